"""Evaluation during training (the experiment's ``evaluation`` field): its validation, ``results/evaluations.jsonl``,
the best checkpoint (``checkpoints/best.json``, never pruned), training unchanged by it, resuming on schedule, and
the evaluation curve of ``tfcli experiment plot``. Real runs of the worker in this process (see worker_runs)."""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.client.worker_runs import (
    new_experiment,
    new_project,
    pause_at,
    records,
    run,
    set_fields,
    without_wall_time,
)
from torchforce.client import Project
from torchforce.client.checkpoints import Checkpoints
from torchforce.client.cli import main
from torchforce.client.experiment_file import resolve_experiment
from torchforce.client.periodic_evaluation import PeriodicEvaluation
from torchforce.client.report import read_evaluations
from torchforce.spec import SpecError, SpecWarning

EVALUATION = {"frequency": "250t", "episodes": 3}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return new_project(tmp_path / "project")


def results(project: Project, name: str) -> Path:
    return project.experiment_folder(name) / "results"


def model_parameters(folder: Path) -> dict[str, torch.Tensor]:
    """The model tensors of the checkpoint in ``folder`` (every state dict in its model file)."""
    state = torch.load(folder / "model.pt", map_location="cpu", weights_only=True)
    flat: dict[str, torch.Tensor] = {}

    def walk(value: object, prefix: str) -> None:
        if isinstance(value, torch.Tensor):
            flat[prefix] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{prefix}/{key}")

    walk(state, "")
    return flat


# ---------------------------------------------------------------------------------------------- the spec


def resolve(project: Project, **fields) -> dict:
    raw = {"name": "spec", "agent": "small_ppo", "environment": "cartpole", "total_timesteps": 1000, **fields}
    return resolve_experiment(project, raw, build=False)


def built(project: Project, **fields) -> list[str]:
    """The SpecWarnings of resolving and building an experiment (``resolve`` with ``build``)."""
    raw = {"name": "spec", "agent": "small_ppo", "environment": "cartpole", "total_timesteps": 1000, **fields}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolve_experiment(project, raw)
    return [str(w.message) for w in caught if issubclass(w.category, SpecWarning)]


def test_a_budget_that_never_reaches_evaluation_or_an_update_warns(project):
    assert built(project, evaluation={"frequency": "250t"}) == []  # small_ppo updates every 128 timesteps
    assert built(project, evaluation={"frequency": "5000t"}) == [
        "experiment.evaluation.frequency: every 5,000 timesteps, but the run ends at 1,000 (total_timesteps): it "
        "never evaluates, and there will be no best checkpoint"
    ]
    assert built(project, total_timesteps=None, episodes=20, evaluation={"frequency": "50e"}) == [
        "experiment.evaluation.frequency: every 50 episodes, but the run ends at 20 (episodes): it never evaluates, "
        "and there will be no best checkpoint"
    ]
    assert built(project, total_timesteps=128) == [  # its 128th step is complete only at a 129th
        "experiment.total_timesteps: 128, but the agent's first update needs 128 complete timesteps (its update_mode: "
        "batch_size, first_update), and a step is complete only at the next one: the run never learns; give it at "
        "least 129"
    ]
    assert built(project, total_timesteps=129) == []
    assert len(built(project, total_timesteps=130, num_environments=4)) == 1  # four rows: four steps incomplete
    assert built(project, total_timesteps=132, num_environments=4) == []
    assert len(built(project, total_timesteps=None, episodes=20, evaluation={"frequency": "20e"})) == 1


def test_a_seed_in_the_agent_or_environment_that_the_runs_never_use_warns(project):
    """The worker seeds the agent and the environment copies from the experiment's seed: another one in their
    specs is never used, which a warning says (the same seed, or none, says nothing)."""
    environment = {"type": "gym", "gym_id": "CartPole-v1", "seed": 5}
    (warning,) = built(project, environment=environment, seed=3)
    assert warning.startswith("experiment.environment.seed: 5 is not used: the runs of an experiment are seeded by")
    agent = {**json.loads((project.root / "configs" / "agents" / "small_ppo.json").read_text()), "seed": 7}
    (warning,) = built(project, agent=agent, seed=3)
    assert warning.startswith("experiment.agent.seed: 7 is not used") and "--seed" in warning
    assert built(project, environment={**environment, "seed": 3}, seed=3) == []


def test_an_atari_game_by_its_gymnasium_id_warns_that_its_screens_are_raw(project, capfd):
    (warning,) = built(project, agent="ppo_atari", environment="ALE/Pong-v5", total_timesteps=2048)
    assert warning.startswith("experiment.environment: 'ALE/Pong-v5' gives raw 210x160 colour screens")
    assert '{"type": "atari", "game": "Pong"} applies them' in warning
    assert built(project, agent="ppo_atari", environment="pong", total_timesteps=2048) == []
    ram = {"type": "gym", "gym_id": "ALE/Pong-v5", "obs_type": "ram"}  # RAM asked for: nothing to say
    assert built(project, agent="small_ppo", environment=ram, total_timesteps=2048) == []
    assert "Stella" not in capfd.readouterr().out  # ALE's banner stays out of tfcli's output


def test_the_evaluation_field_is_resolved_with_its_defaults(project):
    assert resolve(project)["evaluation"] is None
    resolved = resolve(project, evaluation={"frequency": 600})["evaluation"]
    assert resolved == {"frequency": "600s", "episodes": 10, "environment": None}
    named = resolve(project, evaluation={"frequency": "50e", "episodes": 4, "environment": "cartpole"})
    assert named["evaluation"] == {
        "frequency": "50e",
        "episodes": 4,
        "environment": {"type": "gym", "gym_id": "CartPole-v1"},  # the config, inline
    }


@pytest.mark.parametrize(
    ("evaluation", "path", "words"),
    [
        ({"frequncy": "100t"}, "experiment.evaluation.frequncy", "Did you mean 'frequency'?"),
        ({"episodes": 3}, "experiment.evaluation.frequency", "evaluation needs a frequency"),
        ({"frequency": "10 minutes"}, "experiment.evaluation.frequency", "not a frequency"),
        ({"frequency": "100t", "episodes": 0}, "experiment.evaluation.episodes", "an integer >= 1, got 0"),
        ({"frequency": "100t", "environment": 7}, "experiment.evaluation.environment", "7"),
        ({"frequency": "100t", "environment": "no_such_env"}, "experiment.evaluation.environment", "no_such_env"),
        ("often", "experiment.evaluation", "often"),
    ],
)
def test_a_bad_evaluation_field_is_an_error_naming_it(project, evaluation, path, words):
    with pytest.raises(SpecError) as caught:
        resolve(project, evaluation=evaluation)
    assert caught.value.path == path
    assert words in str(caught.value)


def test_an_evaluation_environment_must_act_like_the_experiments(project):
    raw = {"name": "other", "agent": "small_ppo", "environment": "cartpole", "total_timesteps": 1000}
    raw["evaluation"] = {"frequency": "100t", "environment": {"type": "gym", "gym_id": "Pendulum-v1"}}
    with pytest.raises(SpecError) as caught:
        resolve_experiment(project, raw)
    assert caught.value.path == "experiment.evaluation.environment"
    assert "its states differ from those of experiment.environment" in str(caught.value)
    raw["evaluation"]["environment"] = {"type": "gym", "gym_id": "CartPole-v1", "colour": 3}
    with pytest.raises(SpecError) as caught:
        resolve_experiment(project, raw)
    assert caught.value.path == "experiment.evaluation.environment.colour"


def test_tfcli_refuses_a_bad_evaluation_and_writes_nothing(project, capsys):
    file = project.root / "bad.json"
    file.write_text(json.dumps({"name": "bad", "environment": "cartpole", "agent": "small_ppo", "evaluation": {}}))
    assert main(["experiment", "new", "-f", str(file)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("tfcli: experiment.evaluation.frequency: evaluation needs a frequency")
    assert "Traceback" not in err
    assert not project.experiment_folder("bad").exists() and project.store.experiment("bad") is None


# ---------------------------------------------------------------------------------------------- the schedule


def test_rounds_are_due_at_each_multiple_of_the_frequency():
    evaluation = PeriodicEvaluation({"frequency": "100e", "episodes": 2}, "minimal", seed=1, max_timesteps=None)
    from torchforce.agents import create_agent

    agent = create_agent(
        {"type": "random"}, states=evaluation.environment.states, actions=evaluation.environment.actions
    )
    counts = {"timesteps": 0, "episodes": 99, "seconds": 0.0}
    assert not evaluation.due(counts)
    counts["episodes"] = 100
    assert evaluation.due(counts)
    returns = evaluation.play(agent, counts)
    assert len(returns) == 2 and all(0.0 <= value <= 10.0 for value in returns)  # minimal: 10 steps, reward <= 1
    assert evaluation.next == 200 and not evaluation.due(counts)
    counts["episodes"] = 250  # late (a long episode): the next one is at the next multiple, no round is repeated
    evaluation.play(agent, counts)
    assert evaluation.next == 300
    evaluation.load_state_dict(None, {"timesteps": 0, "episodes": 420, "seconds": 0.0}, None)  # no state saved
    assert (evaluation.next, evaluation.best) == (500, None)
    evaluation.close()


# ---------------------------------------------------------------------------------------------- a run


def test_a_run_evaluates_on_schedule_and_keeps_the_best_checkpoint(project, caplog, monkeypatch):
    monkeypatch.setattr("torchforce.client.checkpoints.KEEP_CHECKPOINTS", 1)  # pruning as hard as it gets
    folder = new_experiment(project, "evaluated", evaluation=EVALUATION, saver_frequency="100t")
    with caplog.at_level(logging.INFO, "torchforce.worker"):
        assert run(folder) == "finished"
    evaluations = read_evaluations(folder / "results" / "evaluations.jsonl")
    assert [e["timesteps"] for e in evaluations] == [250, 500, 750, 1000]
    episodes = records(folder / "results" / "episodes.jsonl")
    for evaluation in evaluations:
        assert evaluation["episodes"] == sum(1 for e in episodes if e["timesteps"] <= evaluation["timesteps"])
        assert len(evaluation["returns"]) == 3
        assert evaluation["mean_return"] == pytest.approx(statistics.fmean(evaluation["returns"]))
        assert evaluation["std_return"] == pytest.approx(statistics.pstdev(evaluation["returns"]))
        assert evaluation["returns"] == [round(value) for value in evaluation["returns"]]  # CartPole: 1 per step
    assert set(evaluations[0]) == {"timesteps", "episodes", "mean_return", "std_return", "returns", "wall_time"}
    # the best: the first round that no later one beat
    best = max(evaluations, key=lambda e: (e["mean_return"], -e["timesteps"]))
    pointer = Checkpoints(folder / "results" / "checkpoints").best()
    assert pointer == {
        "timesteps": best["timesteps"],
        "mean_return": best["mean_return"],
        "folder": f"{best['timesteps']:012d}",
    }
    kept = sorted(p.name for p in (folder / "results" / "checkpoints").iterdir() if p.is_dir())
    assert kept == sorted({pointer["folder"], "000000001000"})  # the best survives the pruning
    assert (folder / "results" / "checkpoints" / pointer["folder"] / "runner.json").is_file()
    logged = [m for m in caplog.messages if m.startswith("evaluation at timestep")]
    assert logged[0] == f"evaluation at timestep 250: mean return {evaluations[0]['mean_return']:.2f} (std " + (
        f"{evaluations[0]['std_return']:.2f}) over 3 episodes, the best so far"
    )
    assert len(logged) == 4
    # and TensorBoard has the same means
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder / "results" / "summaries"), size_guidance={"scalars": 0})
    events.Reload()
    curve = [(e.step, e.value) for e in events.Scalars("evaluation/mean_return")]
    assert curve == [(e["timesteps"], pytest.approx(e["mean_return"])) for e in evaluations]


@pytest.mark.parametrize("agent", ["small_ppo", "standardized_ppo", "small_dqn"])
def test_training_with_evaluation_is_bit_identical_to_training_without(project, agent):
    plain = new_experiment(project, "plain", agent=agent)
    evaluated = new_experiment(project, "evaluated", agent=agent, evaluation={"frequency": "150t", "episodes": 2})
    assert run(plain) == run(evaluated) == "finished"
    assert len(records(evaluated / "results" / "evaluations.jsonl")) == 6
    curve = without_wall_time(records(plain / "results" / "episodes.jsonl"))
    assert len(curve) > 20 and curve == without_wall_time(records(evaluated / "results" / "episodes.jsonl"))
    first = model_parameters(plain / "results" / "checkpoints" / "000000001000")
    second = model_parameters(evaluated / "results" / "checkpoints" / "000000001000")
    assert first.keys() == second.keys() and len(first) > 4
    assert all(torch.equal(first[name], second[name]) for name in first)


def test_a_resumed_run_evaluates_on_schedule_and_keeps_the_best(project):
    whole = new_experiment(project, "whole", evaluation=EVALUATION)
    assert run(whole) == "finished"
    halves = new_experiment(project, "halves", evaluation=EVALUATION, total_timesteps=600)
    assert run(halves) == "finished"
    checkpoints = Checkpoints(halves / "results" / "checkpoints")
    best_before = checkpoints.best()
    assert best_before is not None and best_before["timesteps"] in (250, 500)
    # what a crashed run after the checkpoint left: an evaluation past it, half a line, a best.json pointing at it
    with open(halves / "results" / "evaluations.jsonl", "a") as log:
        log.write(json.dumps({**records(halves / "results" / "evaluations.jsonl")[-1], "timesteps": 700}) + "\n")
        log.write('{"timesteps": 750, "episo')
    (halves / "results" / "checkpoints" / "best.json").write_text('{"timesteps": 700, "mean_return": 99.0, "fol')
    set_fields(halves, total_timesteps=1000)
    assert run(halves, resume=True) == "finished"
    expected = without_wall_time(records(whole / "results" / "evaluations.jsonl"))
    assert [e["timesteps"] for e in expected] == [250, 500, 750, 1000]
    assert without_wall_time(records(halves / "results" / "evaluations.jsonl")) == expected
    assert checkpoints.best() == Checkpoints(whole / "results" / "checkpoints").best()


def test_an_evaluation_environment_of_its_own_is_the_one_evaluated(project):
    own = {"type": "gym", "gym_id": "CartPole-v1", "max_episode_timesteps": 5}  # CartPole, cut at 5 steps
    folder = new_experiment(project, "own", total_timesteps=300, evaluation={"frequency": "300t", "environment": own})
    assert run(folder) == "finished"
    (evaluation,) = records(folder / "results" / "evaluations.jsonl")
    assert evaluation["returns"] == [5.0] * 10  # ten episodes (the default), each cut at 5 steps
    assert min(e["length"] for e in records(folder / "results" / "episodes.jsonl")) > 5  # training: not cut there


def test_evaluation_leaves_the_training_environments_monitor_alone(project):
    """The experiment's environment evaluated without its monitor: the records in the monitor's folder are the
    training's episodes, not with the evaluation's episodes among them."""
    monitored = {"type": "gym", "gym_id": "CartPole-v1", "monitor": "monitor"}
    folder = new_experiment(project, "watched", environment=monitored, total_timesteps=600, evaluation=EVALUATION)
    assert run(folder) == "finished"
    assert len(records(folder / "results" / "evaluations.jsonl")) == 2
    training = records(folder / "results" / "episodes.jsonl")
    monitor = records(folder / "results" / "monitor" / "episodes.jsonl")
    assert [game["reward"] for game in monitor] == [episode["return"] for episode in training][: len(monitor)]
    assert len(training) - 1 <= len(monitor) <= len(training)  # (the run may end mid-episode: that one is cut)


# ---------------------------------------------------------------------------------------------- the plot


def test_plot_draws_the_evaluations_mean_and_deviation(project, tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    from torchforce.plots import plot_learning_curves

    results = tmp_path / "results"
    results.mkdir()
    episodes = [{"episode": i, "timesteps": 10 * i, "return": float(i), "wall_time": 0.1 * i} for i in range(1, 9)]
    (results / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    rounds = [
        {"timesteps": 40, "episodes": 4, "mean_return": 3.0, "std_return": 0.5, "returns": [2.5, 3.5], "wall_time": 1},
        {"timesteps": 80, "episodes": 8, "mean_return": 7.0, "std_return": 1.0, "returns": [6.0, 8.0], "wall_time": 2},
    ]
    (results / "evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds) + '{"timesteps": 1')
    drawn = []
    original = Axes.errorbar
    monkeypatch.setattr(
        Axes, "errorbar", lambda self, x, y, **kw: drawn.append((x, y, kw)) or original(self, x, y, **kw)
    )
    plot_learning_curves({"run": results / "episodes.jsonl"}, tmp_path / "curve.png")
    ((x, y, options),) = drawn
    assert (x, y, options["yerr"]) == ([40, 80], [3.0, 7.0], [0.5, 1.0])
    assert options["label"] == "run (evaluation, mean ± std)"
    assert (tmp_path / "curve.png").stat().st_size > 1000


def test_the_legend_leaves_a_falling_runs_last_evaluation_in_view(tmp_path, monkeypatch):
    # the legend sat at the lower right, where the last evaluation of a falling curve lands (a short Pong run)
    from torchforce import plots

    results = tmp_path / "results"
    results.mkdir()
    episodes = [{"episode": i, "timesteps": 100 * i, "return": -float(i), "wall_time": 0.1 * i} for i in range(1, 31)]
    (results / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    last = {"timesteps": 3000, "episodes": 30, "mean_return": -30.0, "std_return": 0.0, "returns": [-30.0]}
    (results / "evaluations.jsonl").write_text(json.dumps({**last, "wall_time": 3}) + "\n")
    saved = []
    monkeypatch.setattr(plots, "save_figure", lambda figure, output: saved.append(figure))
    plots.plot_learning_curves({"run": results / "episodes.jsonl"}, tmp_path / "curve.png")
    (figure,) = saved
    figure.canvas.draw()
    by_steps = figure.axes[0]
    point = by_steps.transData.transform((3000, -30.0))
    assert not by_steps.get_legend().get_window_extent().contains(*point)


def test_plot_leaves_out_an_evaluation_whose_mean_is_no_number(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    from torchforce.plots import plot_learning_curves

    results = tmp_path / "results"
    results.mkdir()
    episodes = [{"episode": i, "timesteps": 10 * i, "return": float(i), "wall_time": 0.1 * i} for i in range(1, 9)]
    (results / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    diverged = {"episodes": 4, "std_return": math.nan, "returns": [math.nan, 1.0], "wall_time": 1}
    rounds = [
        {"timesteps": 20, "mean_return": math.nan, **diverged},
        {"timesteps": 40, "episodes": 4, "mean_return": 3.0, "std_return": 0.5, "returns": [2.5, 3.5], "wall_time": 1},
        {"timesteps": 60, "mean_return": math.inf, **diverged},
    ]
    (results / "evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    drawn = []
    original = Axes.errorbar
    monkeypatch.setattr(
        Axes, "errorbar", lambda self, x, y, **kw: drawn.append((x, y, kw)) or original(self, x, y, **kw)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_learning_curves({"run": results / "episodes.jsonl"}, tmp_path / "curve.png")
    ((x, y, options),) = drawn
    assert (x, y, options["yerr"]) == ([40], [3.0], [0.5])


def test_tfcli_plot_shows_a_run_s_evaluations(project, monkeypatch):
    from matplotlib.axes import Axes

    folder = new_experiment(project, "plotted", evaluation=EVALUATION, total_timesteps=500)
    assert run(folder) == "finished"
    drawn = []
    original = Axes.errorbar
    monkeypatch.setattr(Axes, "errorbar", lambda self, x, y, **kw: drawn.append((x, y)) or original(self, x, y, **kw))
    assert main(["experiment", "plot", "-e", "plotted", "-o", str(project.root / "curve.png")]) == 0
    means = [e["mean_return"] for e in records(folder / "results" / "evaluations.jsonl")]
    assert drawn == [([250, 500], means)]
    assert np.isfinite(means).all()


def test_step_axes_label_long_counts_short():
    """Hundreds of thousands of steps as full numbers run into each other under the axis: 250k and 1.5M do not."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torchforce.plots import label_steps, step_label

    assert [step_label(v) for v in (0, 500, 1000, 250_000, 1_500_000, 2e9)] == ["0", "500", "1k", "250k", "1.5M", "2G"]
    figure, axis = plt.subplots()
    axis.plot([0, 1_000_000], [0, 1])
    label_steps(axis)
    figure.canvas.draw()
    labels = [tick.get_text() for tick in axis.get_xticklabels() if tick.get_text()]
    plt.close(figure)
    assert "1M" in labels and all(len(label) <= 5 for label in labels), labels


def test_checkpoints_and_their_pointers_reach_the_disk_before_they_are_named(project, monkeypatch):
    """A crash or power loss must not leave latest.json or best.json naming a folder whose files were still in
    the page cache: every file of a checkpoint, its folder and the pointers are fsynced, the pointer last."""
    import torchforce.durable

    synced: list[str] = []
    real = os.fsync

    def fsync(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real(descriptor)

    monkeypatch.setattr(torchforce.durable.os, "fsync", fsync)
    monkeypatch.setattr(os, "fsync", fsync)  # write_json_atomically's own flush of the pointer
    folder = new_experiment(project, "durable", evaluation={"frequency": "500t", "episodes": 2})
    assert run(folder) == "finished"
    checkpoints = folder / "results" / "checkpoints"
    latest = Checkpoints(checkpoints).latest()
    assert latest is not None
    written = str(checkpoints / f".{latest['folder']}.partial")  # the folder as written, before its rename
    files = [index for index, path in enumerate(synced) if path.startswith(written + "/")]
    assert any(synced[index].endswith("model.pt") for index in files)
    pointer = max(index for index, path in enumerate(synced) if path.startswith(str(checkpoints / ".latest.json.")))
    assert max(files) < pointer  # the folder's files first, the pointer that names it after
    assert str(checkpoints) in synced[pointer + 1 :]  # and the pointer's rename
    assert any(".best.json." in path for path in synced)


def test_a_damaged_best_json_keeps_every_checkpoint(tmp_path, caplog):
    """Pruning keeps the newest two checkpoints and the best; when best.json cannot be read, any folder could be
    the best one, so none is removed (where before the best one was)."""
    checkpoints = Checkpoints(tmp_path)
    names = [Checkpoints.folder_name(steps) for steps in (100, 200, 300, 400)]
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / "best.json").write_text('{"timesteps": 100, "folder": "0000000')  # cut short
    with caplog.at_level(logging.WARNING, logger="torchforce.worker"):
        checkpoints._prune()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == names
    assert "cannot be read, so no checkpoint is removed" in caplog.text
    checkpoints.mark_best(100, 5.0)
    checkpoints._prune()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [names[0], *names[2:]]


def test_a_pause_at_a_step_an_evaluation_is_due_plays_it_first(project, monkeypatch):
    """A pause that arrives at the step a round is due: the round is played (and kept as the best if it is) before
    the pause, so the resumed run's evaluations are the uninterrupted run's, not one played later by a policy
    that has moved on."""
    whole = new_experiment(project, "whole", evaluation=EVALUATION)
    assert run(whole) == "finished"
    paused = pause_at(monkeypatch, 500)
    halves = new_experiment(project, "halves", evaluation=EVALUATION)
    assert run(halves) == "paused" and paused == [500]  # the step the second round is due
    assert [e["timesteps"] for e in records(halves / "results" / "evaluations.jsonl")] == [250, 500]
    assert run(halves, resume=True) == "finished"
    expected = without_wall_time(records(whole / "results" / "evaluations.jsonl"))
    assert without_wall_time(records(halves / "results" / "evaluations.jsonl")) == expected
    assert (
        Checkpoints(halves / "results" / "checkpoints").best() == Checkpoints(whole / "results" / "checkpoints").best()
    )
