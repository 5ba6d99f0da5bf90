"""One PPO update of torchforce's shipped ``ppo_atari`` equals Stable-Baselines3's, to float rounding: from the same
weights, on the same rollout (SB3 collects it on the real ALE), with the same minibatches. Whatever differs between
the two libraries' Atari learning curves is then the random streams, not the update rule: the clipped surrogate,
the entropy bonus, the value loss through the shared CNN, GAE and its λ-returns, advantage normalization, the
gradient clip and Adam."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.transitions import Transitions
from torchforce.configs import shipped
from torchforce.environments.atari import atari_env

pytest.importorskip("stable_baselines3")
pytest.importorskip("ale_py")

ENVS, STEPS, MINIBATCH, EPOCHS = 2, 64, 32, 2


def sb3_update(normalize: bool):
    """SB3's PPO (the zoo's Atari hyperparameters, smaller) after one rollout: its rollout, its weights before and
    after its update, and the row orders of its minibatches."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    environments = DummyVecEnv([lambda: atari_env("Breakout", clip_rewards=True) for _ in range(ENVS)])
    environments.seed(0)
    model = PPO(
        "CnnPolicy",
        environments,
        n_steps=STEPS,
        batch_size=MINIBATCH,
        n_epochs=EPOCHS,
        learning_rate=2.5e-4,
        clip_range=0.1,
        ent_coef=0.01,
        vf_coef=0.5,
        normalize_advantage=normalize,
        seed=0,
        device="cpu",
    )
    seen: dict = {"orders": []}
    permutation = np.random.permutation

    def recorded(n):
        order = permutation(n)
        seen["orders"].append(order.copy())
        return order

    def train():
        buffer = model.rollout_buffer
        seen["rollout"] = {
            key: copy.deepcopy(getattr(buffer, key))
            for key in ("observations", "actions", "rewards", "episode_starts", "log_probs", "advantages", "returns")
        }
        seen["last"] = (model._last_obs.copy(), model._last_episode_starts.copy())
        seen["before"] = copy.deepcopy(model.policy.state_dict())
        np.random.permutation = recorded  # RolloutBuffer.get shuffles with it, once an epoch
        try:
            PPO.train(model)
        finally:
            np.random.permutation = permutation
        seen["after"] = copy.deepcopy(model.policy.state_dict())

    model.train = train
    model.learn(ENVS * STEPS)
    environments.close()
    return seen


def our_batch(seen: dict) -> Transitions:
    """SB3's rollout as torchforce's memory hands it out: each environment's steps in a row, its last step cut
    (terminal 2) unless it ended an episode, images channels-last."""
    rollout, (last_observations, last_starts) = seen["rollout"], seen["last"]
    observations = rollout["observations"]  # [steps, envs, channels, height, width]
    dones = np.concatenate([rollout["episode_starts"][1:], last_starts[None]])
    rows: dict[str, list] = {"states": [], "next_states": [], "actions": [], "reward": [], "terminal": []}
    for environment in range(ENVS):  # SB3 flattens its buffer environment by environment too
        for step in range(STEPS):
            following = observations[step + 1, environment] if step + 1 < STEPS else last_observations[environment]
            rows["states"].append(observations[step, environment].transpose(1, 2, 0))
            rows["next_states"].append(following.transpose(1, 2, 0))
            rows["actions"].append(int(rollout["actions"][step, environment, 0]))
            rows["reward"].append(rollout["rewards"][step, environment])
            rows["terminal"].append(1 if dones[step, environment] else 2 if step == STEPS - 1 else 0)
    return Transitions(
        states={"state": torch.from_numpy(np.stack(rows["states"]))},
        internals={},
        actions={"action": torch.tensor(rows["actions"])},
        reward=torch.tensor(np.array(rows["reward"], dtype=np.float32)),
        terminal=torch.tensor(np.array(rows["terminal"], dtype=np.int8)),
        next_states={"state": torch.from_numpy(np.stack(rows["next_states"]))},
    )


def dense_columns(weight: torch.Tensor) -> torch.Tensor:
    """SB3's first dense layer with its inputs in torchforce's order: SB3 flattens the last conv's output
    channels-first (C, H, W), torchforce channels-last (H, W, C)."""
    return weight.reshape(512, 64, 7, 7).permute(0, 2, 3, 1).reshape(512, 3136)


def pairs(agent, state: dict) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each torchforce parameter with SB3's in ``state``."""
    network, head = agent.policy.network, agent.policy.heads["action"].logits
    result = {}
    for index, conv in zip((0, 2, 4), (network.conv2d0, network.conv2d1, network.conv2d2), strict=True):
        result[f"conv {index}"] = (conv.weight, state[f"features_extractor.cnn.{index}.weight"])
        result[f"conv {index} bias"] = (conv.bias, state[f"features_extractor.cnn.{index}.bias"])
    result["dense"] = (network.dense0.weight, dense_columns(state["features_extractor.linear.0.weight"]))
    result["dense bias"] = (network.dense0.bias, state["features_extractor.linear.0.bias"])
    result["policy head"] = (head.weight, state["action_net.weight"])
    result["policy bias"] = (head.bias, state["action_net.bias"])
    result["value head"] = (agent.baseline.value.weight, state["value_net.weight"])
    result["value bias"] = (agent.baseline.value.bias, state["value_net.bias"])
    return result


@pytest.mark.parametrize("normalize", ["minibatch", False])
def test_one_update_of_the_shipped_atari_ppo_equals_sb3s(normalize):
    seen = sb3_update(normalize=normalize == "minibatch")
    batch = our_batch(seen)
    spec = json.loads(shipped("agents", "ppo_atari").read_text())
    spec.update(epochs=EPOCHS, minibatch_size=MINIBATCH, normalize_advantages=normalize)
    states = {"state": {"type": "uint8", "shape": [84, 84, 4]}}
    agent = create_agent(spec, states=states, actions={"type": "int", "num_actions": 4})
    for name, (ours, theirs) in pairs(agent, seen["before"]).items():  # the shipped init is SB3's ortho_init
        if "bias" not in name:  # orthogonal with the same gain and shape: the same Frobenius norm
            assert ours.norm().item() == pytest.approx(theirs.norm().item(), rel=1e-4), name
    with torch.no_grad():
        for ours, theirs in pairs(agent, seen["before"]).values():
            ours.copy_(theirs)
    data = agent._with_advantages(batch)
    rollout = seen["rollout"]
    torch.testing.assert_close(data["old_log_prob"], torch.from_numpy(rollout["log_probs"].T.reshape(-1)))
    torch.testing.assert_close(data["returns"], torch.from_numpy(rollout["returns"].T.reshape(-1)))
    if normalize is False:
        torch.testing.assert_close(data["advantages"], torch.from_numpy(rollout["advantages"].T.reshape(-1)))
    assert len(seen["orders"]) == EPOCHS

    def sb3_minibatches(size):
        for order in seen["orders"]:
            for start in range(0, size, MINIBATCH):
                yield torch.as_tensor(order[start : start + MINIBATCH])

    agent._minibatches = sb3_minibatches
    agent._update(batch)
    for name, (ours, theirs) in pairs(agent, seen["after"]).items():
        before = pairs(agent, seen["before"])[name][1]
        moved = (theirs - before).abs().max().item()
        assert moved > 1e-6, f"SB3's update left the {name} where it was"
        assert (ours.detach() - theirs).abs().max().item() < 1e-3 * moved + 1e-7, name
