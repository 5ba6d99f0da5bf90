"""Writes the checkpoint fixtures of ``checkpoints_v1/`` (format 1, as the agents of early 2025 saved them) and the
values an agent that went on in memory produced after the save (``expected.json``), for test_checkpoint_compat.py.

Run from the repository root: ``python tests/agents/data/make_checkpoints_v1.py``. Each case drives a small agent
through a fixed stream of states with ``ROWS`` parallel rows, saves it mid-episode, then continues ``AFTER`` steps
and records the actions, the counters and the parameters' sums. Rerunning it with today's code rewrites the
fixtures: do that only on purpose, as the fixtures stand for checkpoints written by older code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from torchforce.agents import create_agent

HERE = Path(__file__).parent
FOLDER = HERE / "checkpoints_v1"
STATES = {"shape": (3,), "type": "float"}
ACTIONS = {
    "int": {"type": "int", "num_actions": 3},
    "float": {"type": "float", "shape": (2,), "min_value": -1.0, "max_value": 1.0},
}
RNN = [{"type": "flatten"}, {"type": "dense", "size": 8}, {"type": "internal_lstm", "size": 8}]
MLP = [{"type": "dense", "size": 8}]
EPSILON = {"type": "epsilon_anneal", "initial_epsilon": 0.5, "final_epsilon": 0.05, "timesteps": 60}
CASES: dict[str, tuple[str, int, int, dict[str, Any]]] = {  # name: (action type, rows, steps before the save, spec)
    "ppo-lstm-sequence": (
        "int",
        2,
        23,
        {
            "type": "ppo",
            "network": RNN,
            "update_mode": {"unit": "episodes", "batch_size": 2},
            "memory": {"type": "latest", "capacity": 128},
            "optimization_steps": 3,
            "seed": 11,
            "states_preprocessing": [{"type": "sequence", "length": 3}],
        },
    ),
    "ppo-timesteps": (
        "int",
        2,
        13,
        {
            "type": "ppo",
            "network": MLP,
            "update_mode": {"unit": "timesteps", "batch_size": 8},
            "memory": {"type": "latest", "capacity": 64},
            "optimization_steps": 2,
            "seed": 12,
            "states_preprocessing": {"type": "running_standardize"},
            "actions_exploration": EPSILON,
        },
    ),
    "dqn-replay": (
        "int",
        1,
        27,
        {
            "type": "dqn",
            "network": MLP,
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
            "memory": {"type": "replay", "capacity": 64},
            "target_sync_frequency": 6,
            "actions_exploration": EPSILON,
            "seed": 13,
        },
    ),
    "dqn-prioritized": (
        "int",
        2,
        21,
        {
            "type": "dqn",
            "network": MLP,
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
            "memory": {"type": "prioritized_replay", "capacity": 64},
            "target_sync_frequency": 6,
            "actions_exploration": EPSILON,
            "double_q_model": True,
            "seed": 14,
            "reward_preprocessing": {"type": "running_standardize"},
        },
    ),
    "ddpg": (
        "float",
        1,
        25,
        {
            "type": "ddpg",
            "network": MLP,
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
            "memory": {"type": "replay", "capacity": 64},
            "target_sync_frequency": 2,
            "target_update_weight": 0.1,
            "actions_exploration": {"type": "ornstein_uhlenbeck"},
            "seed": 15,
        },
    ),
}
AFTER = 12  # steps after the save that the restored agent must repeat
LENGTH = 7  # row r's episodes last LENGTH + r steps
STREAM = np.random.default_rng(0).uniform(-1.0, 1.0, (64, 2, 3)).astype(np.float32)


def build(name: str) -> Any:
    action_type, _, _, spec = CASES[name]
    return create_agent(spec, states=STATES, actions=ACTIONS[action_type])


def step(agent: Any, t: int, rows: int) -> list:
    """Step ``t`` of the stream: act on ``rows`` rows (one state unbatched when 1), observe; returns the actions."""
    states = STREAM[t, :rows] if rows > 1 else STREAM[t, 0]
    actions = np.asarray(agent.act(states)).reshape(rows, -1)
    terminal = np.array([int((t + 1) % (LENGTH + r) == 0) for r in range(rows)], dtype=np.int8)
    reward = (actions.astype(np.float32).mean(axis=1) * STREAM[t, :rows, 0]).astype(np.float32)
    agent.observe(terminal=terminal if rows > 1 else int(terminal[0]), reward=reward if rows > 1 else reward[0])
    return actions.tolist()


def outcome(agent: Any, name: str, start: int) -> dict[str, Any]:
    """What ``agent`` (saved after ``start`` steps) does in the next ``AFTER`` steps."""
    rows = CASES[name][1]
    actions = [step(agent, t, rows) for t in range(start, start + AFTER)]
    parameters = {key: float(value.double().sum()) for key, value in agent.get_parameters().items()}
    counters = {"timestep": agent.timestep, "episode": agent.episode, "updates": agent.updates}
    return {"actions": actions, "parameters": parameters, "counters": counters}


def main() -> None:
    shutil.rmtree(FOLDER, ignore_errors=True)
    expected: dict[str, Any] = {}
    for name, (_, rows, before, _) in CASES.items():
        agent = build(name)
        for t in range(before):
            step(agent, t, rows)
        assert agent.updates > 0, name
        agent.save_model(FOLDER / name, append_timestep=False)
        expected[name] = {"saved_after": before, **outcome(agent, name, before)}
    (FOLDER / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    sizes = sum(file.stat().st_size for file in FOLDER.rglob("*") if file.is_file())
    print(f"wrote {len(CASES)} checkpoints, {sizes / 1024:.0f} KiB, into {FOLDER}")


if __name__ == "__main__":
    main()
