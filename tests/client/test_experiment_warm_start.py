"""``experiment new --warm-start EXP[:CHECKPOINT]``: a new experiment begins from another's checkpoint (its networks
and run-wide statistics), which it carries in its folder; bad requests are exit 2 and write nothing. Real runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.client.conftest import copied_project, kill_workers, wait_until_done
from tests.client.test_bad_input import bad
from tests.client.test_lifecycle import final_parameters
from torchforce.client import Experiment, Project
from torchforce.client.cli import main

SOURCE = ["-A", "ppo_cartpole", "-E", "cartpole", "-N", "4"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose experiment 'cp' (PPO, CartPole, 3,000 steps: two updates) has finished, made once."""
    root = tmp_path_factory.mktemp("warm") / "project"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        project, _ = Project.init(root)
        source = Experiment(
            project, name="cp", agent="ppo_cartpole", environment="cartpole", num_environments=4, total_timesteps=3000
        )
        source.generate_locally()
        source.start()
        try:
            assert wait_until_done(source) == "finished"
        finally:
            kill_workers(project)
    return root


@pytest.fixture
def root(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    copy = copied_project(trained, tmp_path, monkeypatch)
    yield copy
    kill_workers(Project(copy))


def test_a_warm_started_run_begins_from_the_checkpoint_s_networks(root, capsys):
    # 200 steps end before the first update: the run's final parameters are those it began with
    assert main(["experiment", "new", "-n", "ft", *SOURCE, "-t", "200", "--warm-start", "cp", "--seed", "3"]) == 0
    capsys.readouterr()
    project = Project(root)
    warm = Experiment.load(project, "ft")
    assert warm.spec["warm_start"] == {"experiment": "cp", "checkpoint": "latest", "timesteps": 3000}
    assert (warm.folder / "warm_start.pt").is_file()
    warm.start()
    assert wait_until_done(warm) == "finished"
    source = Experiment.load(project, "cp")
    expected, actual = final_parameters(source), final_parameters(warm)
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[name], actual[name]) for name in expected)
    log = (warm.results / "worker.log").read_text()
    assert "warm start from cp, latest checkpoint (timestep 3,000): its networks and run-wide statistics" in log
    assert main(["experiment", "show", "-e", "ft"]) == 0
    assert "Warm start   cp, latest checkpoint (timestep 3,000)\n" in capsys.readouterr().out
    # the run's own checkpoints are what a resume goes on from; the source may go
    assert main(["experiment", "delete", "-e", "cp"]) == 0
    assert main(["experiment", "start", "-e", "ft", "--resume", "-t", "400"]) == 0
    assert wait_until_done(warm) == "finished"
    assert "warm start" not in (warm.results / "worker.log").read_text().split("resumed from checkpoint")[-1]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--warm-start", "nope"], "experiment.warm_start.experiment: no experiment named 'nope' in project"),
        (["--warm-start", "cp:best"], "experiment.warm_start.checkpoint: experiment 'cp' has no best checkpoint yet"),
        (
            ["--warm-start", "cp:77"],
            "experiment.warm_start.checkpoint: experiment 'cp' has no checkpoint at timestep 77",
        ),
        (["--warm-start", "cp:soon"], "experiment.warm_start.checkpoint: not a checkpoint"),
        (["--warm-start", "ft"], "experiment.warm_start.experiment: an experiment cannot start from itself"),
        (
            ["--warm-start", "cp", "--set", 'agent.network=[{"type": "dense", "size": 8}]'],
            "experiment.warm_start: the agent cannot start from the latest checkpoint of 'cp' (timestep 3,000)",
        ),
        (
            ["--warm-start", "cp", "--run-mode", "distributed", "--num-workers", "2"],
            "experiment.warm_start: a distributed run cannot start warm yet",
        ),
    ],
)
def test_a_warm_start_that_cannot_be_is_refused_and_writes_nothing(root, capsys, flags, message):
    err = bad(root, capsys, "experiment", "new", "-n", "ft", *SOURCE, "-t", "2000", *flags)
    assert message in err


def test_a_warm_start_from_another_agent_type(root, capsys):
    err = bad(
        root, capsys, "experiment", "new", "-n", "ft", "-A", "dqn_cartpole", "-E", "cartpole", "--warm-start", "cp"
    )
    assert "the checkpoint is of a 'ppo' agent; it cannot be restored into a 'dqn' one" in err


def test_the_field_in_a_spec_file(root, capsys):
    spec = {"name": "from-file", "agent": "ppo_cartpole", "environment": "cartpole", "total_timesteps": 2000}
    (root / "ft.json").write_text(json.dumps({**spec, "warm_start": {"experiment": "cp", "checkpoint": 3000}}))
    assert main(["experiment", "new", "-f", "ft.json"]) == 0
    capsys.readouterr()
    stored = json.loads((root / "experiments" / "from-file" / "experiment.json").read_text())
    assert stored["warm_start"] == {"experiment": "cp", "checkpoint": "3000", "timesteps": 3000}
    (root / "bad.json").write_text(json.dumps({**spec, "name": "bad", "warm_start": {"experiment": "cp", "step": 5}}))
    err = bad(root, capsys, "experiment", "new", "-f", "bad.json")
    assert "experiment.warm_start.step: not a field of a warm start" in err


STANDARDIZED = [
    "--set",
    'agent.states_preprocessing={"type": "running_standardize", "reset_after_batch": false}',
]


def test_every_worker_thread_of_a_multi_threaded_run_starts_warm(root, capsys):
    """The threads' agents share the model, which the first one's warm start loads, but each has its own state
    preprocessing: theirs started empty, feeding raw states to networks trained on standardized ones."""
    from torchforce.client.experiment_run import ExperimentRun
    from torchforce.core.preprocessors import RunningStandardize

    assert main(["experiment", "new", "-n", "src", *SOURCE, "-t", "1500", *STANDARDIZED]) == 0
    project = Project(root)
    source = Experiment.load(project, "src")
    ExperimentRun(source.folder, resume=False).run()
    threads = ["--run-mode", "multi-threaded", "--num-workers", "2"]  # one environment per thread: no -N
    argv = ["experiment", "new", "-n", "ft", *SOURCE[:4], *threads, "-t", "100", *STANDARDIZED, "--warm-start", "src"]
    assert main(argv) == 0
    capsys.readouterr()
    run = ExperimentRun(Experiment.load(project, "ft").folder, resume=False)
    run.build()
    counts = [
        step.state_dict()["count"]
        for worker in run.workers
        for step in worker.preprocessing["state"].preprocessors
        if isinstance(step, RunningStandardize)
    ]
    assert len(counts) == 2 and counts[0] == counts[1] > 0
    for worker in run.workers:
        worker.close()


def test_a_checkpoint_whose_statistics_are_kept_otherwise_is_refused(root, capsys):
    """running_standardize over the run or per episode have the same state keys: a warm start mixing them was
    accepted (or failed with a traceback)."""
    assert main(["experiment", "new", "-n", "src", *SOURCE, "-t", "1500", *STANDARDIZED]) == 0
    from torchforce.client.experiment_run import ExperimentRun

    ExperimentRun(Experiment.load(Project(root), "src").folder, resume=False).run()
    capsys.readouterr()
    per_episode = ["--set", 'agent.states_preprocessing={"type": "running_standardize"}']
    err = bad(root, capsys, "experiment", "new", "-n", "ft", *SOURCE, *per_episode, "--warm-start", "src")
    assert "the checkpoint's running_standardize (step 0 of 'state') kept its statistics over the run, this one" in err


def test_the_copy_holds_what_a_warm_start_reads_and_not_the_memory(root, capsys):
    from torchforce.agents.checkpoint import load_checkpoint

    assert main(["experiment", "new", "-n", "ft", *SOURCE, "-t", "2000", "--warm-start", "cp"]) == 0
    capsys.readouterr()
    copied = load_checkpoint(root / "experiments" / "ft" / "warm_start.pt")
    assert sorted(copied) == ["agent", "format", "modules", "preprocessing"]
    (root / "experiments" / "ft" / "warm_start.pt").unlink()
    err = bad(root, capsys, "experiment", "start", "-e", "ft")
    assert "experiment 'ft' starts warm (its spec's warm_start), but experiments/ft/warm_start.pt" in err
