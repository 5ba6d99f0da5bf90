"""The shipped Atari experiments, briefly, on the CPU: each experiment's agent config (its network, uint8 states,
clipped rewards) on its environment config (the real ALE with the full preprocessing) and its number of copies,
with a smaller memory and earlier, smaller updates than a real run, until the agent has updated. Whether the configs
learn is for ``make bench``: that takes about a million frames."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.configs import shipped
from torchforce.environments import make_vector

# what each agent config gets instead of a real run's memory and update schedule
SMALL = {
    "dqn_atari": {
        "memory": {"type": "replay", "capacity": 1000, "stacked_frames": True},
        "update_mode": {"unit": "timesteps", "batch_size": 32, "frequency": 4, "first_update": 200},
    },
    "ppo_atari": {
        "memory": {"type": "latest", "capacity": 256},
        "update_mode": {"unit": "timesteps", "batch_size": 128, "frequency": 128},
        "minibatch_size": 64,
    },
}


@pytest.mark.parametrize("experiment", ["pong_dqn", "pong_ppo", "breakout_dqn", "breakout_ppo"])
def test_shipped_atari_experiment_acts_on_uint8_frames_and_updates(experiment):
    spec = json.loads(shipped("experiments", experiment).read_text())
    environment = json.loads(shipped("environments", spec["environment"]).read_text())
    agent_spec = json.loads(shipped("agents", spec["agent"]).read_text())
    network = [layer["type"] for layer in agent_spec["network"]]
    assert network == ["divide", "conv2d", "conv2d", "conv2d", "flatten", "dense"]
    assert agent_spec["reward_preprocessing"] == [{"type": "clip", "min_value": -1, "max_value": 1}]
    assert environment["type"] == "atari" and not environment["clip_rewards"]  # clipped once, by the agent
    assert spec["total_timesteps"] * environment["frame_skip"] == 2_000_000
    copies = spec["num_environments"]
    torch.manual_seed(0)
    with make_vector(environment, copies, seed=0) as environments:
        agent = create_agent(
            {**agent_spec, **SMALL[spec["agent"]], "seed": 0},
            states=environments.states,
            actions=environments.actions,
        )
        assert agent.memory.fields["states/state"].shape == (84, 84, 4)
        assert agent.memory.fields["states/state"].dtype == np.uint8
        num_actions = environments.actions["num_actions"]
        states = environments.reset()
        for _ in range(400 // copies):
            actions = agent.act(states)
            assert actions.shape == (copies,) and ((0 <= actions) & (actions < num_actions)).all()
            step = environments.execute(actions)
            agent.observe(terminal=step.terminal, reward=step.reward, next_states=step.final_states)
            states = step.states
            if agent.updates >= 2:
                break
    assert agent.updates >= 2
    stored = agent.memory.retrieve_timesteps(32)
    assert stored["states/state"].dtype == np.uint8 and stored["states/state"].shape == (32, 84, 84, 4)
    assert stored["states/state"].max() > 0  # real frames, not the memory's zeros
    assert ((0 <= stored["actions/action"]) & (stored["actions/action"] < num_actions)).all()
    assert np.isin(stored["reward"], (-1.0, 0.0, 1.0)).all()
    np.testing.assert_array_equal(agent.reward_preprocessing.process(np.array([7.0, -4.0, 0.0])), [1.0, -1.0, 0.0])
    # each frame stack is kept once: a row's next state is the state its environment's next row holds, so apart
    # from the ring only the newest row of each environment holds a next state of its own (no episode was cut)
    frame_stack = 84 * 84 * 4
    assert len(agent.memory._next_states) <= copies
    assert agent.memory.nbytes < (agent.memory.capacity + copies) * frame_stack + agent.memory.capacity * 64
    assert agent.memory.stacked_frames is agent_spec["memory"].get("stacked_frames", False)
    if agent.memory.stacked_frames:  # each frame once: about one 84x84 frame a row, where the ring held four
        assert agent.memory._frames["states/state"].planes < len(agent.memory) + 4 * (copies + 10)
        assert agent.memory.nbytes < agent.memory.capacity * frame_stack / 2


def pooled_dqn(stacked, environments, capacity=150):
    """The shipped Atari DQN config with a small memory (``stacked_frames`` or not) and updates from step 64."""
    agent_spec = json.loads(shipped("agents", "dqn_atari").read_text())
    assert agent_spec["memory"]["stacked_frames"] is True
    small = {**SMALL["dqn_atari"], "memory": {"type": "replay", "capacity": capacity, "stacked_frames": stacked}}
    small["update_mode"] = {**small["update_mode"], "first_update": 64}
    return create_agent({**agent_spec, **small, "seed": 0}, states=environments.states, actions=environments.actions)


def test_dqn_learns_the_same_with_its_frames_pooled():
    """``stacked_frames`` changes where frames are kept, not what is retrieved: the shipped DQN config, seeded, on
    Breakout, with and without it, acts and updates to the same parameters, bit for bit."""
    environment = json.loads(shipped("environments", "breakout").read_text())
    parameters = []
    for stacked in (True, False):
        torch.manual_seed(0)
        with make_vector(environment, 1, seed=0) as environments:
            agent = pooled_dqn(stacked, environments)
            states = environments.reset()
            for _ in range(200):  # the ring wraps: pooled frames are given back and reused
                step = environments.execute(agent.act(states))
                agent.observe(terminal=step.terminal, reward=step.reward, next_states=step.final_states)
                states = step.states
        assert agent.updates >= 30
        parameters.append((agent.updates, agent.get_parameters()))
    (updates, pooled), (plain_updates, plain) = parameters
    assert updates == plain_updates and pooled.keys() == plain.keys()
    assert all(torch.equal(value, plain[name]) for name, value in pooled.items())


def test_a_checkpoint_of_pooled_frames_continues_exactly(tmp_path):
    """A DQN agent whose memory pools its frames saves each frame once; restored into a fresh agent, it acts and
    updates as the agent it was saved from, step for step."""
    environment = json.loads(shipped("environments", "breakout").read_text())
    torch.manual_seed(0)
    with make_vector(environment, 1, seed=0) as environments:
        agent = pooled_dqn(True, environments, capacity=100)
        states = environments.reset()
        for _ in range(120):
            step = environments.execute(agent.act(states))
            agent.observe(terminal=step.terminal, reward=step.reward, next_states=step.final_states)
            states = step.states
        path = agent.save_model(tmp_path)
        saved = agent.memory.state_dict()["frames"]["states/state"]
        assert saved["ids"].shape == (100, 4) and len(saved["planes"]) < 100 + 4 * 10  # about a frame a row
        restored = pooled_dqn(True, environments, capacity=100)
        restored.restore_model(file=path)
        for _ in range(40):  # both act on the same states: the same actions, the same updates
            actions = agent.act(states)
            np.testing.assert_array_equal(restored.act(states), actions)
            step = environments.execute(actions)
            for each in (agent, restored):
                each.observe(terminal=step.terminal, reward=step.reward, next_states=step.final_states)
            states = step.states
    assert restored.updates == agent.updates > 0
    continued = agent.get_parameters()
    assert all(torch.equal(value, continued[name]) for name, value in restored.get_parameters().items())
