"""The 2018 ``saver`` and ``summarizer`` specs: checkpoints written while observing, resuming from the latest,
a final checkpoint on close, and real TensorBoard event files with the expected scalars."""

import json
import math
import time

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchforce.agents import create_agent
from torchforce.agents.checkpoint import load_checkpoint
from torchforce.core.optimizers import build_optimizer
from torchforce.core.optimizers.synchronization import Synchronization
from torchforce.core.summaries import Summarizer, label_of, learning_rate
from torchforce.environments import make
from torchforce.spec import SpecError

MLP = [{"type": "dense", "size": 8}]
PPO = {
    "type": "ppo",
    "network": MLP,
    "update_mode": {"unit": "episodes", "batch_size": 2},
    "baseline_mode": "states",
    "baseline": {"type": "mlp", "sizes": [8]},
    "gae_lambda": 0.95,
    "optimization_steps": 3,
    "entropy_regularization": 0.01,
    "seed": 3,
}
DQN = {
    "type": "dqn",
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
    "memory": {"type": "replay", "capacity": 64},
    "optimizer": {"type": "adam", "learning_rate": 5e-4},
    "actions_exploration": {"type": "epsilon_anneal", "timesteps": 50},
    "seed": 4,
}
STATES = np.random.default_rng(0).uniform(-1.0, 1.0, (64, 1)).astype(np.float32)
EPISODE = 5


def build(spec, **changes):
    env = make("minimal", action_type="int")
    return create_agent({**spec, **changes}, states=env.states, actions=env.actions)


def drive(agent, start: int, stop: int) -> None:
    """Steps of a fixed stream of states; reward 1 for the right action, episodes of 5 steps."""
    for t in range(start, stop):
        action = agent.act(STATES[t])
        agent.observe(terminal=int((t + 1) % EPISODE == 0), reward=float(action == (STATES[t, 0] > 0)))


def checkpoints(directory) -> list[str]:
    return sorted(path.name for path in directory.glob("*.pt"))


def latest(directory) -> str:
    return json.loads((directory / "checkpoint").read_text())["latest"]


def scalars(directory) -> dict[str, list]:
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: accumulator.Scalars(tag) for tag in accumulator.Tags()["scalars"]}


# ---------------------------------------------------------------------------------------------- saver


def test_saver_steps_saves_while_observing_and_load_resumes_from_the_latest(tmp_path):
    agent = build(PPO, saver={"directory": str(tmp_path), "steps": 10})
    drive(agent, 0, 25)
    assert checkpoints(tmp_path) == ["model-10.pt", "model-20.pt"]
    assert latest(tmp_path) == "model-20.pt"
    manifest = json.loads((tmp_path / "model-20.json").read_text())
    assert manifest["timestep"] == 20 and manifest["spec"]["saver"] == {"directory": str(tmp_path), "steps": 10}

    resumed = build(PPO, saver={"directory": str(tmp_path), "steps": 10, "load": True})
    assert (resumed.timestep, resumed.episode) == (20, 4)
    saved = load_checkpoint(tmp_path / "model-20.pt")
    assert resumed.updates == saved["counters"]["updates"] > 0
    for name, value in resumed.get_parameters().items():
        module, key = name.split(".", 1)
        assert torch.equal(value, saved["modules"][module][key]), name
    drive(resumed, 20, 21)
    assert "model-21.pt" not in checkpoints(tmp_path)  # the next save is 10 steps after the restored one
    drive(resumed, 21, 30)
    assert latest(tmp_path) == "model-30.pt"

    fresh = build(PPO, saver={"directory": str(tmp_path), "steps": 10, "load": False})
    assert fresh.timestep == 0


def test_saver_load_of_a_named_file(tmp_path):
    agent = build(DQN, saver={"directory": str(tmp_path), "steps": 4})
    drive(agent, 0, 9)
    assert checkpoints(tmp_path) == ["model-4.pt", "model-8.pt"]
    resumed = build(DQN, saver={"directory": str(tmp_path), "steps": 4, "file": "model-4"})
    assert resumed.timestep == 4


def test_saver_seconds_zero_saves_at_every_observe_and_basename_names_files(tmp_path):
    agent = build(DQN, saver={"directory": str(tmp_path), "seconds": 0, "basename": "dqn"})
    drive(agent, 0, 3)
    assert checkpoints(tmp_path) == ["dqn-1.pt", "dqn-2.pt", "dqn-3.pt"]


def test_close_writes_a_final_checkpoint(tmp_path):
    agent = build(PPO, saver={"directory": str(tmp_path)})  # default: every 600 seconds
    drive(agent, 0, 7)
    assert checkpoints(tmp_path) == []
    agent.close()
    assert latest(tmp_path) == "model-7.pt"
    resumed = build(PPO, saver={"directory": str(tmp_path)})
    assert (resumed.timestep, resumed.episode) == (7, 1)


def test_saver_spec_errors():
    with pytest.raises(SpecError, match=r"(?s)saver.step: unknown key.*Did you mean 'steps'"):
        build(PPO, saver={"directory": "x", "step": 10})
    with pytest.raises(SpecError, match=r"(?s)saver.diretory: unknown key.*Did you mean 'directory'"):
        build(PPO, saver={"diretory": "x"})
    with pytest.raises(SpecError, match="saver.steps"):
        build(PPO, saver={"directory": "x", "steps": 0})
    with pytest.raises(SpecError, match="saver.load: not a boolean"):
        build(PPO, saver={"directory": "x", "load": "yes"})
    with pytest.raises(SpecError, match="saver.seconds"):
        build(PPO, saver={"directory": None, "seconds": -1})  # checked even when the directory disables it
    assert build(PPO, saver={"directory": None}).saver is None


# ---------------------------------------------------------------------------------------------- summarizer


def test_ppo_summaries_are_real_event_files(tmp_path):
    agent = build(PPO, summarizer={"directory": str(tmp_path)})
    drive(agent, 0, 30)
    agent.close()
    found = scalars(tmp_path)
    expected = {
        "episode/return",
        "episode/length",
        "update/policy_loss",
        "update/baseline_loss",
        "update/entropy",
        "update/learning_rate/step_optimizer",
        "update/learning_rate/baseline_optimizer",
        "update/reward_mean",
    }
    assert expected <= set(found)
    assert "update/learning_rate" not in found  # replaced by the optimizers' own values
    returns = found["episode/return"]
    assert [event.step for event in returns] == [5, 10, 15, 20, 25, 30]
    assert all(0.0 <= event.value <= EPISODE for event in returns)
    assert [event.value for event in found["episode/length"]] == [EPISODE] * 6
    updates = found["update/entropy"]
    assert [event.step for event in updates] == [10, 20, 30] and agent.updates == 3
    assert all(0.0 < event.value <= math.log(2) + 1e-6 for event in updates)  # two actions
    assert [event.value for event in found["update/learning_rate/step_optimizer"]] == pytest.approx([1e-3] * 3)
    assert all(math.isfinite(event.value) for event in found["update/policy_loss"])


def test_a_restored_agent_continues_its_summaries_without_repeating_steps(tmp_path, monkeypatch):
    """Also where the writers' files of one second sort as text the wrong way round: the process's 8th, 9th and
    10th writers ('10' before '8'), as a run of the test suite made them once."""
    from tensorboard.summary.writer import event_file_writer

    monkeypatch.setattr(event_file_writer, "_global_uid", event_file_writer.AtomicCounter(8))
    summaries, saved = tmp_path / "summaries", tmp_path / "checkpoints"
    first = build(PPO, summarizer={"directory": str(summaries)})
    drive(first, 0, 20)
    first.save_model(saved)
    drive(first, 20, 30)  # a crash after step 30: what it wrote after the checkpoint is lost with it
    first.summarizer.writer.flush()
    second = build(PPO, summarizer={"directory": str(summaries)})
    second.restore_model(saved)
    drive(second, 20, 35)
    second.close()
    first.summarizer.close()
    found = scalars(summaries)
    assert [event.step for event in found["episode/return"]] == [5, 10, 15, 20, 25, 30, 35]
    assert [event.step for event in found["update/entropy"]] == [10, 20, 30]


def test_dqn_summaries_steps_and_learning_rate(tmp_path):
    agent = build(DQN, summarizer={"directory": str(tmp_path), "steps": 10})
    drive(agent, 0, 40)
    agent.close()
    found = scalars(tmp_path)
    assert {"update/loss", "update/td_error", "update/learning_rate/optimizer", "episode/return"} <= set(found)
    assert not any("target_sync" in tag for tag in found)  # a synchronization has no learning rate
    steps = [event.step for event in found["update/loss"]]
    assert steps[0] == 4 and all(later - earlier >= 10 for earlier, later in zip(steps, steps[1:], strict=False))
    assert len(steps) < agent.updates
    assert found["update/learning_rate/optimizer"][0].value == pytest.approx(5e-4)


def test_summarizer_labels_select_scalars(tmp_path):
    agent = build(PPO, summarizer={"directory": str(tmp_path / "a"), "labels": ["total-loss", "learning_rate"]})
    drive(agent, 0, 20)
    agent.close()
    tags = set(scalars(tmp_path / "a"))
    assert {"update/policy_loss", "update/learning_rate/step_optimizer", "episode/return"} <= tags
    assert "update/entropy" not in tags and "update/reward_mean" not in tags

    agent = build(PPO, summarizer={"directory": str(tmp_path / "b"), "labels": ["entropy", "inputs"]})
    drive(agent, 0, 20)
    agent.close()
    tags = set(scalars(tmp_path / "b"))
    assert {"update/entropy", "update/reward_mean", "episode/return", "episode/length"} <= tags
    assert not any("loss" in tag or "learning_rate" in tag for tag in tags)


def test_summarizer_spec_errors():
    with pytest.raises(SpecError, match=r"(?s)summarizer.labels\[1\]: unknown label 'entropi'.*Did you mean 'entropy'"):
        Summarizer({"labels": ["losses", "entropi"]})
    with pytest.raises(SpecError, match=r"(?s)summarizer.step: unknown key.*Did you mean 'steps'"):
        Summarizer({"directory": None, "step": 3})
    with pytest.raises(SpecError, match="summarizer.labels: not a list"):
        Summarizer({"labels": "losses"})
    assert not Summarizer({"directory": None}).enabled


def test_labels_and_learning_rates_of_optimizers():
    assert [label_of(name) for name in ("episode/return", "update/entropy", "update/learning_rate/x")] == [
        "episode",
        "entropy",
        "learning_rate",
    ]
    assert [label_of(name) for name in ("update/reward_mean", "update/td_error", "update/policy_loss")] == [
        "rewards",
        "losses",
        "losses",
    ]
    parameters = [torch.nn.Parameter(torch.zeros(3))]
    assert learning_rate(build_optimizer({"type": "adam", "learning_rate": 2e-3}, parameters)) == pytest.approx(2e-3)
    nested = {"type": "multi_step", "num_steps": 2, "optimizer": {"type": "gradient_descent", "learning_rate": 0.1}}
    assert learning_rate(build_optimizer(nested, parameters)) == pytest.approx(0.1)
    assert learning_rate(build_optimizer({"type": "evolutionary", "learning_rate": 0.5}, parameters)) == 0.5
    assert learning_rate(Synchronization(parameters, [torch.zeros(3)])) is None


def test_the_purging_writers_file_is_read_after_the_others_made_in_the_same_second(tmp_path, monkeypatch):
    """TensorBoard reads event files in the order of their names: the second they were made, then the process's
    writer count as text. A summarizer resumed the moment after another wrote (its 8th and 10th writers: '10' sorts
    before '8') waits for the next second, so its purge applies to what the other wrote."""
    from tensorboard.summary.writer import event_file_writer

    from torchforce.core.summaries import Summarizer

    monkeypatch.setattr(event_file_writer, "_global_uid", event_file_writer.AtomicCounter(8))
    first = Summarizer({"directory": str(tmp_path)})
    first.writer.add_scalar("x", 1.0, 5)
    first.writer.flush()
    second = Summarizer({"directory": str(tmp_path)})
    second.resume_at(3)
    names = sorted(path.name for path in tmp_path.glob("events.out.tfevents.*"))
    assert names[-1].endswith(".10")  # the purging writer's, read last
    first.close(), second.close()


def test_an_event_file_stamped_far_ahead_does_not_hold_a_resume(tmp_path, monkeypatch):
    """Results from a machine whose clock ran a day ahead (or a made-up file name) had the resumed summarizer sleep
    until that second came. Only a file of this second or the next is waited for."""
    from torchforce.core.summaries import Summarizer

    ahead = int(time.time()) + 86_400
    (tmp_path / f"events.out.tfevents.{ahead}.elsewhere.1.0").write_bytes(b"")
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    summarizer = Summarizer({"directory": str(tmp_path)})
    summarizer.resume_at(3)
    summarizer.close()
    assert slept == []
