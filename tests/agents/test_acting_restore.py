"""``restore_model(..., for_acting=True)``: an agent restored only to act (what ``tfcli experiment evaluate`` and
``export`` do) acts exactly as one restored in full, never reads its memory's or its optimizers' state, and refuses
to learn. The agents and the stream of states are those of ``test_checkpoint.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.agents.test_checkpoint import CASES, PROBES, STATES, assert_parameters_equal, build, drive, step
from torchforce.agents import create_agent
from torchforce.agents.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from torchforce.environments import make

LEARNING_ONLY = ("memory", "optimizers", "demo_memory")  # what acting never reads (DQfD: its demonstrations too)


def acting(agent, rows: int) -> list[np.ndarray]:
    """What the agent does with acts that record nothing: deterministic actions on fixed states, then explored or
    sampled ones (drawn from the random generators of acting apart, which the checkpoint holds) on the stream."""
    done = [np.asarray(agent.act(PROBES, deterministic=True, independent=True))]
    for t in range(30, 36):
        done.append(np.asarray(agent.act(STATES[t, :rows], independent=True)))
    return done


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_an_agent_restored_for_acting_acts_as_one_restored_in_full(case, rows, tmp_path):
    agent = build(case)
    drive(agent, 0, 23, rows)
    agent.act(STATES[23, :rows], independent=True)  # the generators of acting apart have drawn: the checkpoint has them
    agent.save_model(tmp_path, append_timestep=False)

    whole = build(case)
    whole.restore_model(tmp_path, "model")
    parameters = whole.get_parameters()  # (acting with variable noise adds and takes it off: not to the last bit)
    expected = acting(whole, rows)  # one after the other: torch's global generator is part of both
    light = build(case)
    light.restore_model(tmp_path, "model", for_acting=True)
    assert light.acting_only and not whole.acting_only
    assert light.get_parameters().keys() == parameters.keys()
    assert all(torch.equal(value, parameters[name]) for name, value in light.get_parameters().items())
    assert (light.timestep, light.episode, light.updates) == (whole.timestep, whole.episode, whole.updates)
    for got, wanted in zip(acting(light, rows), expected, strict=True):
        np.testing.assert_array_equal(got, wanted)
    assert len(light.memory) == 0  # the memory stayed on the disk


def strip(folder: Path, name: str = "model") -> None:
    """Rewrite the checkpoint ``folder/name.pt`` without what only learning reads: the memory and the optimizers."""
    payload = load_checkpoint(folder / f"{name}.pt")
    assert payload["memory"]["size"] > 0 and payload["optimizers"]
    kept = {key: value for key, value in payload.items() if key not in LEARNING_ONLY}
    save_checkpoint(folder, name, kept, json.loads((folder / f"{name}.json").read_text()))


@pytest.mark.parametrize("case", ["dqn-prioritized-preprocessed", "dqfd", "ppo-sequence", "ddpg"])
def test_acting_needs_no_memory_and_no_optimizer_state_in_the_checkpoint(case, tmp_path):
    agent = build(case)
    drive(agent, 0, 23)
    agent.save_model(tmp_path, append_timestep=False)
    whole = build(case)
    whole.restore_model(tmp_path, "model")
    expected = acting(whole, 1)

    strip(tmp_path)
    light = build(case)
    light.restore_model(tmp_path, "model", for_acting=True)
    for got, wanted in zip(acting(light, 1), expected, strict=True):
        np.testing.assert_array_equal(got, wanted)
    with pytest.raises(CheckpointError, match=r"model\.pt: damaged, or not a torchforce checkpoint \(KeyError: "):
        build(case).restore_model(tmp_path, "model")  # training needs them: a full restore says what is missing


def test_an_agent_restored_for_acting_refuses_to_learn_until_restored_in_full(tmp_path):
    whole = build("dqfd")
    drive(whole, 0, 40)
    agent = build("dqfd")
    drive(agent, 0, 23)
    agent.save_model(tmp_path, append_timestep=False)
    saver = {"directory": str(tmp_path / "saver"), "steps": 1}
    light = build("dqfd", saver=saver)
    light.restore_model(tmp_path, "model", for_acting=True)
    experience = {"states": [[0.5]], "actions": [1], "terminal": [1], "reward": [1.0]}
    refusals = {
        "act() without independent=True": lambda: light.act(STATES[23, 0]),
        "observe()": lambda: light.observe(terminal=0, reward=1.0),
        "import_experience()": lambda: light.import_experience(experience),
        "import_demonstrations()": lambda: light.import_demonstrations(experience),
        "pretrain()": lambda: light.pretrain(1),
        "compute_update()": light.compute_update,
        "save_model()": lambda: light.save_model(tmp_path / "again"),
    }
    for what, call in refusals.items():
        with pytest.raises(RuntimeError) as refused:
            call()
        assert str(refused.value).startswith(
            f"{what}: this dqfd agent was restored only to act (restore_model(..., for_acting=True)), without its "
            "memory and its optimizers' state, so it cannot learn or be saved. Act with act(states, "
            "independent=True); to train on"
        ), what
    assert (light.timestep, light.updates, len(light.memory), len(light.demo_memory)) == (23, agent.updates, 0, 0)
    light.close()  # its saver saves nothing: there is nothing new to save, and not all of it to save
    assert not (tmp_path / "saver").exists() and not (tmp_path / "again").exists()

    light.restore_model(tmp_path, "model")  # in full: it learns on exactly as an uninterrupted run
    assert not light.acting_only
    drive(light, 23, 40)
    assert light.updates == whole.updates > agent.updates
    assert_parameters_equal(whole, light)


def test_the_public_partial_load_marks_the_agent_too_and_a_refused_restore_marks_nothing(tmp_path):
    agent = build("dqn-replay")
    drive(agent, 0, 23)
    agent.save_model(tmp_path, append_timestep=False)
    partial = build("dqn-replay")
    partial.load_state_dict(load_checkpoint(tmp_path / "model.pt", mapped=True), for_acting=True)
    assert partial.acting_only  # as restore_model(..., for_acting=True) leaves it: no memory to learn on or save
    for call in (partial.state_dict, lambda: partial.apply_update({})):
        with pytest.raises(RuntimeError, match="was restored only to act"):
            call()
    learning = build("ppo")  # a checkpoint of another kind is refused: the agent learns on as it was
    with pytest.raises(ValueError, match="the checkpoint is of a 'dqn' agent"):
        learning.restore_model(tmp_path, "model", for_acting=True)
    assert not learning.acting_only
    drive(learning, 0, 5)


def test_an_own_agent_class_whose_load_state_dict_predates_for_acting_still_restores(tmp_path):
    """A project's agent class overriding ``load_state_dict(self, state)`` (as the docs invite) restored nothing
    since for_acting came: every restore passed the keyword, and failed as a 'damaged' checkpoint."""
    from torchforce.agents.dqn import DQNAgent

    loaded = []

    class MyDQN(DQNAgent):
        def load_state_dict(self, state):  # the old signature
            loaded.append(state["counters"]["timestep"])
            super().load_state_dict(state)

    agent = build("dqn-replay")
    drive(agent, 0, 23)
    agent.save_model(tmp_path, append_timestep=False)
    for for_acting in (False, True):
        own = build("dqn-replay")
        own.__class__ = MyDQN  # (as "type": "modules_file:MyDQN" would build it)
        own.restore_model(tmp_path, "model", for_acting=for_acting)
        assert own.acting_only == for_acting
        assert len(own.memory) == len(agent.memory) > 0  # the old signature loads it all, to act too
        assert_parameters_equal(agent, own)
    assert loaded == [23, 23]


def test_an_agent_that_does_not_learn_is_restored_in_full_either_way(tmp_path):
    env = make("minimal", action_type="int")
    agent = create_agent({"type": "random", "seed": 1}, states=env.states, actions=env.actions)
    for t in range(5):
        step(agent, t, 1)
    agent.save_model(tmp_path)
    restored = create_agent({"type": "random", "seed": 1}, states=env.states, actions=env.actions)
    restored.restore_model(tmp_path, for_acting=True)
    assert not restored.acting_only and restored.timestep == 5
    step(restored, 5, 1)  # nothing was left out: it goes on as before
    step(agent, 5, 1)
    assert restored.last_observation()["actions"] == agent.last_observation()["actions"]


# ---------------------------------------------------------------------------------------------- not read at all

PEAK = """
import json, sys
from pathlib import Path
from torchforce.agents import create_agent

def peak_mib():  # this process's own high-water mark (VmHWM), since its exec
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1]) / 1024

spec, folder, for_acting = json.loads(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "acting"
agent = create_agent(spec, states={"shape": (256,), "type": "float"}, actions={"type": "int", "num_actions": 2})
before = peak_mib()
agent.restore_model(folder, "model", for_acting=for_acting)
print(json.dumps({"grew_mib": peak_mib() - before, "memory": len(agent.memory)}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak memory from /proc")
def test_restoring_for_acting_leaves_the_memory_unread(tmp_path):
    """A replay memory of 128 MiB: a full restore reads it into memory (twice over, the file's bytes and the memory's
    arrays), a restore for acting maps the file and never touches those bytes. Each restore in a process of its own."""
    spec = {
        "type": "dqn",
        "network": [{"type": "dense", "size": 8}],
        "memory": {"type": "replay", "capacity": 2**17},
        "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 4, "first_update": 2**18},
        "seed": 0,
    }
    agent = create_agent(spec, states={"shape": (256,), "type": "float"}, actions={"type": "int", "num_actions": 2})
    rows = 2**14
    for chunk in range(8):  # episodes of 16,384 steps of 256 floats: 1 KiB a row
        states = np.random.default_rng(chunk).normal(size=(rows + 1, 256)).astype(np.float32)
        terminal = np.zeros(rows, np.int8)
        terminal[-1] = 1
        agent.memory.store(
            {
                "states/state": states[:-1],
                "next_states/state": states[1:],
                "actions/action": np.zeros(rows, np.int64),
                "reward": np.zeros(rows, np.float32),
                "terminal": terminal,
            }
        )
    assert len(agent.memory) == 2**17
    agent.save_model(tmp_path, append_timestep=False)
    del agent
    assert (tmp_path / "model.pt").stat().st_size > 128 * 2**20

    grew = {}
    for kind in ("whole", "acting"):
        command = [sys.executable, "-c", PEAK, json.dumps(spec), str(tmp_path), kind]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
        assert result.returncode == 0, result.stderr
        grew[kind] = json.loads(result.stdout.splitlines()[-1])
    assert grew["whole"]["memory"] == 2**17 and grew["acting"]["memory"] == 0
    assert grew["whole"]["grew_mib"] > 128  # the measure sees a memory that is read
    assert grew["acting"]["grew_mib"] < 16, grew  # and none here
