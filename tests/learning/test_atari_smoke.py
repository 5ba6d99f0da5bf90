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
        "memory": {"type": "replay", "capacity": 1000},
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
