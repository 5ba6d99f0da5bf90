"""One PPO update of torchforce equals Stable-Baselines3's, to float rounding: from the same weights, on the same
rollout (SB3 collects it on the real environment), with the same minibatches. Two setups: the shipped ``ppo_atari``
(one CNN shared by a categorical policy and the value, on Breakout) and SB3's default MlpPolicy (separate tanh
networks, a Gaussian with a learned log std, on HalfCheetah). Whatever differs between the two libraries' learning
curves in such setups is then the random streams and the settings, not the update rule: the clipped surrogate, the
entropy bonus, the value loss (through the shared CNN), GAE and its λ-returns, advantage normalization, the gradient
clip and Adam."""

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

STEPS, MINIBATCH, EPOCHS = 64, 32, 2


def sb3_update(environment, envs: int, normalize: bool, policy: str):
    """SB3's PPO after one rollout of ``envs`` copies of ``environment()`` (``STEPS`` each): its rollout, its
    weights before and after its update, and the row orders of its minibatches."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    environments = DummyVecEnv([environment] * envs)
    environments.seed(0)
    model = PPO(
        policy,
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
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default one leaves a folder in the temp dir
    seen: dict = {"orders": [], "envs": envs}
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
    model.learn(envs * STEPS)
    environments.close()
    return seen


def our_batch(seen: dict, image: bool) -> Transitions:
    """SB3's rollout as torchforce's memory hands it out: each environment's steps in a row, its last step cut
    (terminal 2) unless it ended an episode; images channels-last (in memory too), int actions as integers."""
    rollout, (last_observations, last_starts) = seen["rollout"], seen["last"]
    observations = rollout["observations"]  # [steps, envs, *state] (images: channels first)
    dones = np.concatenate([rollout["episode_starts"][1:], last_starts[None]])
    rows: dict[str, list] = {"states": [], "next_states": [], "actions": [], "reward": [], "terminal": []}

    def state(observation: np.ndarray) -> np.ndarray:
        # images channels-last in memory too, as torchforce's memory holds them: the conv weights' gradients then
        # come out channels-last, as in a live run (a transposed view would give contiguous ones)
        return np.ascontiguousarray(observation.transpose(1, 2, 0)) if image else observation.astype(np.float32)

    for environment in range(seen["envs"]):  # SB3 flattens its buffer environment by environment too
        for step in range(STEPS):
            following = observations[step + 1, environment] if step + 1 < STEPS else last_observations[environment]
            rows["states"].append(state(observations[step, environment]))
            rows["next_states"].append(state(following))
            action = rollout["actions"][step, environment]
            rows["actions"].append(int(action[0]) if image else action.astype(np.float32))
            rows["reward"].append(rollout["rewards"][step, environment])
            rows["terminal"].append(1 if dones[step, environment] else 2 if step == STEPS - 1 else 0)
    return Transitions(
        states={"state": torch.from_numpy(np.stack(rows["states"]))},
        internals={},
        actions={"action": torch.tensor(np.array(rows["actions"]))},
        reward=torch.tensor(np.array(rows["reward"], dtype=np.float32)),
        terminal=torch.tensor(np.array(rows["terminal"], dtype=np.int8)),
        next_states={"state": torch.from_numpy(np.stack(rows["next_states"]))},
    )


def dense_columns(weight: torch.Tensor) -> torch.Tensor:
    """SB3's first dense layer with its inputs in torchforce's order: SB3 flattens the last conv's output
    channels-first (C, H, W), torchforce channels-last (H, W, C)."""
    return weight.reshape(512, 64, 7, 7).permute(0, 2, 3, 1).reshape(512, 3136)


def cnn_pairs(agent, state: dict) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each torchforce parameter of ``ppo_atari`` with SB3's ``CnnPolicy`` one in ``state``."""
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
    seen = sb3_update(lambda: atari_env("Breakout", clip_rewards=True), 2, normalize == "minibatch", "CnnPolicy")
    spec = json.loads(shipped("agents", "ppo_atari").read_text())
    spec.update(epochs=EPOCHS, minibatch_size=MINIBATCH, normalize_advantages=normalize)
    spec["mixed_precision"] = None  # float32 as SB3 (the shipped "auto" is bfloat16 on a CPU with its instructions)
    states = {"state": {"type": "uint8", "shape": [84, 84, 4]}}
    agent = create_agent(spec, states=states, actions={"type": "int", "num_actions": 4})
    for name, (ours, theirs) in cnn_pairs(agent, seen["before"]).items():  # the shipped init is SB3's ortho_init
        if "bias" not in name:  # orthogonal with the same gain and shape: the same Frobenius norm
            assert ours.norm().item() == pytest.approx(theirs.norm().item(), rel=1e-4), name
    update_as_sb3(agent, seen, our_batch(seen, image=True), cnn_pairs, normalize)


def update_as_sb3(agent, seen: dict, batch: Transitions, pairs, normalize) -> None:
    """From SB3's weights before its update, ``agent``'s update on ``batch`` in SB3's minibatch orders: each
    parameter ends where SB3's did (to float rounding), and the advantages' inputs agree on the way."""
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


def mlp_pairs(agent, state: dict) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each torchforce parameter of the spec below with SB3's ``MlpPolicy`` one in ``state``."""
    policy, baseline, head = agent.policy.network, agent.baseline.network, agent.policy.heads["action"]
    result = {"log std": (head.log_stddev, state["log_std"])}
    for ours, theirs in ((policy, "policy_net"), (baseline, "value_net")):
        for layer, index in ((ours.dense0, 0), (ours.dense1, 2)):
            result[f"{theirs} {index}"] = (layer.weight, state[f"mlp_extractor.{theirs}.{index}.weight"])
            result[f"{theirs} {index} bias"] = (layer.bias, state[f"mlp_extractor.{theirs}.{index}.bias"])
    result["mean head"] = (head.mean.weight, state["action_net.weight"])
    result["mean bias"] = (head.mean.bias, state["action_net.bias"])
    result["value head"] = (agent.baseline.value.weight, state["value_net.weight"])
    result["value bias"] = (agent.baseline.value.bias, state["value_net.bias"])
    return result


def test_one_update_of_a_gaussian_ppo_with_separate_value_network_equals_sb3s():
    """SB3's MlpPolicy on HalfCheetah: two tanh MLPs (policy, value), a Gaussian with one learned log std per
    action element, one Adam over both networks on the joint loss: in torchforce, baseline_mode "states" with
    value_loss_weight. SB3 samples actions unbounded and clips them for the environment only, so the agent here
    has the action unbounded too (with bounds, torchforce scores a clipped action by the tail it stands for)."""
    pytest.importorskip("mujoco")
    import gymnasium as gym

    seen = sb3_update(lambda: gym.make("HalfCheetah-v5"), 1, True, "MlpPolicy")
    tanh = [{"type": "dense", "size": 64, "activation": "tanh"}] * 2
    spec = {
        "type": "ppo",
        "network": tanh,
        "distributions": {"action": {"type": "gaussian", "state_dependent_std": False}},
        "update_mode": {"unit": "timesteps", "batch_size": STEPS, "frequency": STEPS},
        "memory": {"type": "latest", "capacity": STEPS},
        "step_optimizer": {"type": "adam", "learning_rate": 2.5e-4, "epsilon": 1e-5, "clip_grad_norm": 0.5},
        "epochs": EPOCHS,
        "minibatch_size": MINIBATCH,
        "discount": 0.99,
        "gae_lambda": 0.95,
        "likelihood_ratio_clipping": 0.1,
        "entropy_regularization": 0.01,
        "normalize_advantages": "minibatch",
        "baseline_mode": "states",
        "baseline": {"type": "custom", "network": tanh},
        "value_loss_weight": 1.0,
    }
    states = {"state": {"type": "float", "shape": [17]}}
    agent = create_agent(spec, states=states, actions={"type": "float", "shape": [6]})
    update_as_sb3(agent, seen, our_batch(seen, image=False), mlp_pairs, "minibatch")
