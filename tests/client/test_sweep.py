"""Sweeps (``tfcli sweep``): the sweep file's validation, the driver's pruning step on synthetic episode logs, and
real sweeps run by the real driver process: ranked trials, the best experiment written, plots, stop and a crash."""

from __future__ import annotations

import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.client.conftest import kill_workers, wait_for
from tests.client.test_bad_input import bad
from torchforce.client import ClientError, Experiment, Project
from torchforce.client.backends.local import process_alive
from torchforce.client.cli import main
from torchforce.client.report import read_episodes
from torchforce.client.sweep import Sweep
from torchforce.client.sweep_file import Pruner
from torchforce.client.sweep_space import optuna_module
from torchforce.client.trial_values import RunProgress, final_value, intermediate_values, no_value, report_and_judge

optuna = pytest.importorskip("optuna")

TINY = """\
name: tiny
base: {agent: vpg_cartpole, environment: cartpole, total_timesteps: 1500}
space:
  agent.optimizer.learning_rate: {low: 1.0e-4, high: 1.0e-1, log: true}
budget: {trials: 3, parallel: 3}
pruner: none
"""


def write(root: Path, name: str, text: str) -> str:
    (root / name).write_text(text)
    return name


def sweep_file(**changes: object) -> dict:
    """A valid sweep (as JSON) with ``changes`` laid over it; a value None drops the field."""
    sweep: dict = {
        "name": "lr",
        "base": {"agent": "vpg_cartpole", "environment": "cartpole", "total_timesteps": 1500},
        "space": {"agent.optimizer.learning_rate": {"low": 1e-4, "high": 1e-1, "log": True}},
        "budget": {"trials": 3},
    }
    sweep.update(changes)
    return {key: value for key, value in sweep.items() if value is not None}


def stop_everything(project: Project) -> None:
    """End every sweep driver and run a test left (drivers first, so that none starts another run)."""
    for name in Sweep.names(project):
        sweep = Sweep(project, name)
        pid = (sweep.state().get("driver") or {}).get("pid")
        if pid and sweep.driver_running():
            os.kill(pid, signal.SIGKILL)
    kill_workers(project)


@pytest.fixture
def sweeps(project: Project):
    yield project
    stop_everything(project)


# ---------------------------------------------------------------------------------------------- validation

LR = "agent.optimizer.learning_rate"


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        ({"name": None}, "sweep.name", "a sweep needs a name"),
        ({"name": "Bad Name"}, "sweep.name", "not a valid sweep name"),
        ({"name": "a" * 32}, "sweep.name", "at most 31 characters"),
        ({"spaces": {}}, "sweep.spaces", "Did you mean 'space'?"),
        ({"base": None}, "sweep.base", "a sweep needs a base experiment"),
        ({"base": "no_such_experiment"}, "sweep.base.file", "no experiment config named 'no_such_experiment'"),
        ({"base": {"file": "cartpole_vpg", "name": "x"}}, "sweep.base.name", "set by the sweep"),
        ({"base": {"agent": "vpg_cartpole", "environment": "cartpole", "episodes": -1}}, "sweep.base.episodes", ""),
        ({"space": {}}, "sweep.space", "an empty space"),
        ({"space": {LR: [1e-3, 1e-2]}}, f"sweep.space.{LR}", "not a range or choices"),
        ({"space": {LR: {"low": 1e-2, "high": 1e-3}}}, f"sweep.space.{LR}.high", "not above low"),
        ({"space": {LR: {"low": 0, "high": 1e-3, "log": True}}}, f"sweep.space.{LR}.low", "a log range starts above 0"),
        ({"space": {LR: {"low": 1e-4}}}, f"sweep.space.{LR}.high", "a range needs its high end"),
        ({"space": {LR: {"low": 1e-4, "hihg": 1}}}, f"sweep.space.{LR}.hihg", "Did you mean 'high'?"),
        ({"space": {"agent.epochs": {"low": 1.5, "high": 8, "type": "int"}}}, "sweep.space.agent.epochs.low", ""),
        (
            {"space": {"agent.update_mode.batch_size": {"low": 2, "high": 10}}},
            "sweep.space.agent.update_mode.batch_size.type",
            "add type: int",
        ),
        ({"space": {LR: {"choices": []}}}, f"sweep.space.{LR}.choices", "a non-empty list"),
        ({"space": {LR: {"choices": [0.1, 0.1]}}}, f"sweep.space.{LR}.choices[1]", "the same as choices[0]"),
        ({"space": {LR: {"choices": [1, True]}}}, f"sweep.space.{LR}.choices[1]", "equal to choices[0] (1) in"),
        ({"space": {LR: {"choices": [0.5, 1, 1.0]}}}, f"sweep.space.{LR}.choices[2]", "would store both as one"),
        ({"space": {"agent.discount": {"choices": [0.99, 1, 1.0]}}}, "sweep.space.agent.discount.choices[2]", "1 =="),
        ({"space": {"seed": {"low": 0, "high": 9, "type": "int"}}}, "sweep.space.seed", "set by the sweep itself"),
        ({"space": {"agent.seed": {"low": 0, "high": 9, "type": "int"}}}, "sweep.space.agent.seed", "never used"),
        ({"space": {"agent..x": {"low": 0, "high": 1}}}, "sweep.space.agent..x", "not a dotted key"),
        (
            {"space": {"agent.network": {"choices": [[]]}, "agent.network[0].size": {"choices": [8]}}},
            "sweep.space.agent.network[0].size",
            "inside another key of the space, agent.network",
        ),
        ({"space": {LR: {"low": -1.0, "high": 1e-3}}}, f"sweep.space.{LR}.low", ""),
        (
            {"space": {"agent.optimizer.learnin_rate": {"low": 0.1, "high": 1}}},
            "sweep.space.agent.optimizer.learnin_rate.low",
            "Did you mean 'learning_rate'?",
        ),
        ({"metric": {"name": "evaluation"}}, "sweep.metric.name", "has no periodic evaluation"),
        ({"metric": {"name": "mean_reward"}}, "sweep.metric.name", "Did you mean 'mean_return'?"),
        ({"metric": {"window": 0}}, "sweep.metric.window", "out of range"),
        ({"metric": {"direction": "up"}}, "sweep.metric.direction", "unknown value"),
        ({"budget": None}, "sweep.budget", "a sweep needs a budget"),
        ({"budget": {"trials": 0}}, "sweep.budget.trials", "out of range"),
        ({"budget": {"trials": 3, "parallel": 0}}, "sweep.budget.parallel", "out of range"),
        ({"seeds_per_trial": 11}, "sweep.seeds_per_trial", "out of range"),
        (
            {"base": {**sweep_file()["base"], "seed": 2**64 - 1}, "seeds_per_trial": 2},
            "sweep.base.seed",
            "a trial's runs are seeded 18446744073709551615 to 18446744073709551616",
        ),
        ({"sampler": "cmaes"}, "sweep.sampler.type", "unknown value"),
        ({"sampler": {"type": "random", "startup_trials": 3}}, "sweep.sampler.startup_trials", "no startup trials"),
        ({"sampler": {"seed": 2**31}}, "sweep.sampler.seed", "expected an integer in [0, 2147483647]"),
        ({"pruner": {"type": "median", "warmup": 95}}, "sweep.pruner.warmup", "out of range"),
        ({"pruner": {"type": "none", "warmup": 10}}, "sweep.pruner.warmup", "takes no settings"),
        ({"cluster": "ray_nowhere"}, "sweep.cluster", "no cluster named 'ray_nowhere'"),
    ],
)
def test_a_bad_sweep_file_names_the_place_and_changes_nothing(sweeps, capsys, changes, path, words):
    write(sweeps.root, "bad.json", json.dumps(sweep_file(**changes)))
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "bad.json")
    assert err.startswith(f"tfcli: {path}: "), err
    assert words in err and "(in bad.json)" in err.splitlines()[0]
    assert not (sweeps.root / ".tfcli" / "sweeps").exists()


def test_a_bad_name_given_with_n_is_blamed_on_the_flag_not_on_the_file(sweeps, capsys):
    """'sweep new -f ppo_cartpole -n "Bad name"' said the name was wrong '(in configs/sweeps/ppo_cartpole.yaml)',
    a file that holds a good name. The error names -n/--name (a bad name in the file names the file, above)."""
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "ppo_cartpole", "-n", "Bad name")
    # the rule told is a sweep's (its runs add -t<trial>-s<seed>), not an experiment's 1-40
    assert err.startswith("tfcli: -n/--name: not a valid sweep name; expected 1-31 lower-case letters, digits, ")
    assert err.splitlines()[0].endswith('got "Bad name".') and "Try 'bad-name'." in err
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "ppo_cartpole", "-n", "a" * 32)
    assert err.startswith("tfcli: -n/--name: too long for a sweep: its runs are named ") and "(in " not in err
    write(sweeps.root, "bad.json", json.dumps(sweep_file(name="Bad name")))
    assert main(["sweep", "new", "-f", "bad.json", "-n", "good"]) == 0  # the file's name is not looked at
    assert Sweep.load(sweeps, "good").spec.name == "good"


@pytest.mark.skipif(torch.cuda.is_available(), reason="about a machine without CUDA")
def test_trials_on_cuda_need_a_cluster_where_this_machine_has_no_cuda(sweeps, capsys):
    agents = sweeps.root / "configs" / "agents"
    (agents / "vpg_gpu.json").write_text(
        json.dumps({**json.loads((agents / "vpg_cartpole.json").read_text()), "device": "cuda"})
    )
    base = {"agent": "vpg_gpu", "environment": "cartpole", "total_timesteps": 1500}
    write(sweeps.root, "gpu.json", json.dumps(sweep_file(base=base)))
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "gpu.json")
    assert err.splitlines()[0] == (
        "tfcli: sweep.base.agent.device: the trials run on this machine (the sweep names no cluster), and it has no "
        'CUDA; got "cuda" (in gpu.json).'
    )
    assert not (sweeps.root / ".tfcli" / "sweeps").exists()


def test_a_sweep_on_a_gke_cluster_is_refused_and_one_on_a_ray_cluster_is_not(sweeps, capsys, tmp_path):
    """The driver reads its trials' episode logs on this machine, and a run on GKE writes them to its bucket: every
    trial failed without a value, the pruner never acted, and the whole budget was spent. A Ray cluster's runs write
    where this machine reads them."""
    sweeps.store.add_cluster("my-gke", {"type": "gke", "name": "my-gke"}, "running", {})
    storage = str(tmp_path / "storage")
    ray = {"type": "ray", "name": "lab", "address": "127.0.0.1:9", "storage": storage}
    sweeps.store.add_cluster("lab", ray, "attached", {"dashboard": "http://127.0.0.1:9", "storage": storage})
    write(sweeps.root, "gke.json", json.dumps(sweep_file(cluster="my-gke")))
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "gke.json")
    assert err.splitlines()[0] == (
        "tfcli: sweep.cluster: a GKE cluster: a sweep reads its trials' episodes on this machine, so it runs here or "
        "on a Ray cluster, not on GKE (yet); expected a Ray cluster of the project, or none (this machine), got "
        '"my-gke" (in gke.json).'
    )
    assert not (sweeps.root / ".tfcli" / "sweeps").exists()

    write(sweeps.root, "ray.json", json.dumps(sweep_file(cluster="lab")))
    assert main(["sweep", "new", "-f", "ray.json"]) == 0
    assert "(1 at a time on 'lab', 1 seed each)" in capsys.readouterr().out
    assert Sweep.load(sweeps, "lr").spec.cluster == "lab"
    sweeps.store.remove_cluster("lab")  # made again, on GKE this time: the driver is not started
    sweeps.store.add_cluster("lab", {"type": "gke", "name": "lab"}, "running", {})
    err = bad(sweeps.root, capsys, "sweep", "start", "--sweep", "lr")
    assert err.startswith("tfcli: sweep.cluster: a GKE cluster: ") and 'got "lab"' in err


def test_a_gke_spec_not_created_yet_is_refused_as_gke_not_as_a_cluster_to_create(sweeps, capsys):
    """A sweep naming the shipped GKE spec small_cluster was told to create it ('tfcli cluster create -f ...'),
    after which it would be refused all the same: sweeps do not run on GKE, and the error says so at once."""
    write(sweeps.root, "gke.yaml", TINY + "cluster: small_cluster\n")
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "gke.yaml")
    assert err.startswith("tfcli: sweep.cluster: a GKE cluster: ") and 'got "small_cluster"' in err
    assert "cluster create" not in err and Sweep.names(sweeps) == []


def test_yaml_reads_1e_5_as_text_and_the_error_says_how_to_write_it(sweeps, capsys):
    write(sweeps.root, "lr.yaml", TINY.replace("low: 1.0e-4", "low: 1e-4"))
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "lr.yaml")
    assert err.splitlines() == [
        f'tfcli: sweep.space.{LR}.low: text, not a number; got "1e-4" (in lr.yaml).',
        "  YAML reads 1e-4 as text: write it with a dot, as 1.0e-4 (not 1e-4).",
    ]


@pytest.mark.parametrize(
    ("choices", "place", "message"),
    [
        ("[0.1, 2020-01-01]", "choices[1]", "not a JSON value; expected {}, got datetime.date(2020, 1, 1)"),
        ("[0.1, !!binary aGVsbG8=]", "choices[1]", "not a JSON value; expected {}, got b'hello'"),
        ("[{1: a, b: c}]", "choices[0]", "an object with a key that is not text; expected {}, got 1"),
        ("[{1: a}]", "choices[0]", "an object with a key that is not text; expected {}, got 1"),
        ("[[0.1, {x: [2020-01-01]}]]", "choices[0][1].x[0]", "not a JSON value; expected {}, got datetime.date"),
        ("[[0.1, .nan]]", "choices[0][1]", "not a finite number; got NaN"),
    ],
)
def test_a_choice_json_cannot_hold_is_refused_at_its_place(sweeps, capsys, choices, place, message):
    """A choice goes to the study and the state file as JSON: a YAML date, !!binary bytes or an object with a key
    that is not text crashed 'sweep new' with exit 1 (or, for an integer key, reached the trials as text)."""
    range_ = "agent.optimizer.learning_rate: {low: 1.0e-4, high: 1.0e-1, log: true}"
    write(sweeps.root, "lr.yaml", TINY.replace(range_, f"agent.optimizer.learning_rate: {{choices: {choices}}}"))
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "lr.yaml")
    expected = "numbers, text, true/false, null, lists or objects with text keys"
    assert err.startswith(f"tfcli: sweep.space.{LR}.{place}: {message.format(expected)}"), err
    assert not (sweeps.root / ".tfcli" / "sweeps").exists()


def test_a_value_the_agent_refuses_is_blamed_on_the_end_of_the_range(sweeps, capsys):
    write(sweeps.root, "neg.json", json.dumps(sweep_file(space={LR: {"low": -0.5, "high": 0.1}})))
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "neg.json")
    assert err.startswith(f"tfcli: sweep.space.{LR}.low: ") and "got -0.5" in err


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_a_driver_started_again_draws_new_values_not_the_first_trials_again(sweeps, capsys, sampler):
    """Each driver process builds its sampler anew: seeded with the sweep's seed plus the trials so far, a driver
    started after a stop or a crash draws on, where one seeded as the first would repeat the first trials."""
    write(sweeps.root, "lr.json", json.dumps(sweep_file(sampler={"type": sampler, "seed": 3})))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(sweeps, "lr")
    space = {dimension.key: dimension.distribution() for dimension in sweep.spec.space}
    drawn = []
    for _ in range(2):  # two driver processes, one after the other, each asking two trials
        study = sweep.study()
        for _ in range(2):
            trial = study.ask(space)
            drawn.append(trial.params[LR])
            study.tell(trial, 1.0)
    assert len(set(drawn)) == 4, drawn


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_a_sampler_seed_near_numpy_s_limit_still_reads_and_draws(sweeps, capsys, sampler):
    """The sampler is built with its seed plus the trials so far, and numpy takes seeds below 2**32 only: a sweep
    seeded 2**32 - 1 (made before seeds were capped) failed 'sweep show', 'list' and 'start' with exit 1 once its
    study held a trial. The sum wraps around, so such a sweep reads and draws."""
    write(sweeps.root, "lr.json", json.dumps(sweep_file(sampler={"type": sampler, "seed": 0})))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    capsys.readouterr()
    sweep = Sweep.load(sweeps, "lr")
    state = sweep.state()
    state["spec"]["sampler"]["seed"] = 2**32 - 1
    sweep.state_file.write_text(json.dumps(state))
    space = {dimension.key: dimension.distribution() for dimension in sweep.spec.space}
    for _ in range(2):
        study = sweep.study()
        trial = study.ask(space)
        study.tell(trial, 1.0)
    assert main(["sweep", "show", "--sweep", "lr"]) == 0
    assert sum(" COMPLETE " in line for line in capsys.readouterr().out.splitlines()) == 2
    assert main(["sweep", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["status"], listed["trials"]) == ("new", "2/3")
    assert len({row.params[LR] for row in sweep.trials()}) == 2


def test_a_sweep_name_is_taken_once_and_an_unknown_one_gets_a_did_you_mean(sweeps, capsys):
    write(sweeps.root, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    assert "Start it with: tfcli sweep start --sweep lr" in capsys.readouterr().out
    state = json.loads((sweeps.root / ".tfcli" / "sweeps" / "lr.json").read_text())
    assert state["driver"] == {"status": "new"} and state["spec"]["budget"] == {"trials": 3, "parallel": 1}
    assert state["spec"]["space"] == {LR: {"low": 1e-4, "high": 0.1, "log": True, "type": "float"}}
    assert state["spec"]["base"]["agent"]["type"] == "vpg"  # the config resolved inline
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "lr.json")
    assert err.splitlines() == ["tfcli: sweep 'lr' already exists", "  Give another name with -n/--name."]
    err = bad(sweeps.root, capsys, "sweep", "show", "--sweep", "rl")
    assert err.splitlines() == ["tfcli: no sweep named 'rl' in project 'project'", "  Known: lr."]
    err = bad(sweeps.root, capsys, "sweep", "stop", "--sweep", "lr")
    assert err.splitlines() == ["tfcli: sweep 'lr' is not running (status: new)"]
    err = bad(sweeps.root, capsys, "sweep", "plot", "--sweep", "lr")
    assert err.startswith("tfcli: nothing to plot for sweep 'lr' yet: history: no trial has completed yet; ")
    assert main(["sweep", "show", "--sweep", "lr"]) == 0
    assert capsys.readouterr().out.endswith("\nNo trials yet.\n")


def test_sweep_plot_refuses_a_missing_output_folder_as_the_other_plots_do(sweeps, capsys):
    """'sweep plot -o FOLDER' made FOLDER and all its parents, anywhere the user typed, where 'experiment plot -o'
    and 'config schema -o' refuse a missing folder. It refuses it too now, before any work; its default folder
    (no -o) is still made."""
    write(sweeps.root, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(sweeps, "lr")
    study = sweep.study()
    for value in (10.0, 20.0):  # two completed trials: something to draw
        study.tell(study.ask({dimension.key: dimension.distribution() for dimension in sweep.spec.space}), value)
    capsys.readouterr()
    missing = sweeps.root / "plots" / "lr"
    err = bad(sweeps.root, capsys, "sweep", "plot", "--sweep", "lr", "-o", str(missing))
    assert err.splitlines() == [
        f"tfcli: the folder '{missing}' does not exist",
        f"  Create it first ('mkdir -p {missing}'), or give another -o/--output.",
    ]
    assert not (sweeps.root / "plots").exists()
    (sweeps.root / "a-file").write_text("mine")
    err = bad(sweeps.root, capsys, "sweep", "plot", "--sweep", "lr", "-o", "a-file")
    assert err.startswith("tfcli: 'a-file' is a file, not a folder to write the PNG files into")
    assert (sweeps.root / "a-file").read_text() == "mine"
    (sweeps.root / "plots").mkdir()
    assert main(["sweep", "plot", "--sweep", "lr", "-o", "plots"]) == 0
    assert capsys.readouterr().out.startswith("Wrote plots/history.png\n")
    assert main(["sweep", "plot", "--sweep", "lr"]) == 0
    assert (sweeps.root / ".tfcli" / "sweeps" / "lr" / "history.png").is_file()


def test_an_unknown_sweep_file_gets_a_did_you_mean_among_the_shipped_examples(sweeps, capsys):
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "ppo_cartpol")
    assert err.splitlines() == [
        "tfcli: sweep.file: no sweep file named 'ppo_cartpol'; expected a file, or a name in configs/sweeps/.",
        "  In configs/sweeps/: ppo_cartpole. Did you mean 'ppo_cartpole'?",  # tfcli init copied the shipped one
    ]
    (sweeps.root / "configs" / "sweeps" / "ppo_cartpole.yaml").unlink()
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "ppo_cartpol")
    assert (
        err.splitlines()[1]
        == "  configs/sweeps/ has none. Shipped examples: ppo_cartpole. Did you mean 'ppo_cartpole'?"
    )


def test_the_shipped_example_validates_by_name(sweeps, capsys):
    assert main(["sweep", "new", "-f", "ppo_cartpole", "-n", "example"]) == 0
    spec = Sweep.load(sweeps, "example").spec
    assert (spec.trials, spec.parallel, spec.seeds_per_trial) == (20, 2, 2)
    assert [d.key for d in spec.space] == [
        "agent.step_optimizer.learning_rate",
        "agent.epochs",
        "agent.likelihood_ratio_clipping",
    ]
    assert spec.run_names(3) == ["example-t003-s0", "example-t003-s1"]


def test_without_optuna_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "optuna", None)
    with pytest.raises(ClientError) as error:
        optuna_module()
    assert (
        str(error.value) == "sweeps need the optuna package, which is not installed\n  pip install 'torchforce[sweep]'"
    )


# ---------------------------------------------------------------------------------------------- pruning


def episode_log(folder: Path, name: str, returns: list[float], every: int = 100) -> Path:
    """A synthetic episodes.jsonl: one episode per ``every`` timesteps with these returns."""
    path = folder / f"{name}.jsonl"
    lines = [
        {"episode": i + 1, "timesteps": (i + 1) * every, "worker": 0, "return": r, "length": every, "wall_time": i}
        for i, r in enumerate(returns)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_intermediate_values_are_the_mean_return_at_each_tenth_of_the_budget(tmp_path):
    log = episode_log(tmp_path, "run", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    run = RunProgress(read_episodes(log), 1000, None, ended=True)
    assert intermediate_values([run], window=2) == {
        10: 1.0,
        20: 1.5,
        30: 2.5,
        40: 3.5,
        50: 4.5,
        60: 5.5,
        70: 6.5,
        80: 7.5,
        90: 8.5,
    }
    halfway = RunProgress(read_episodes(log)[:5], 1000, None)  # at 50%, still going: no value past it
    other = RunProgress(read_episodes(episode_log(tmp_path, "other", [11] * 10)), 1000, None)
    assert intermediate_values([halfway, other], window=2) == {10: 6.0, 20: 6.25, 30: 6.75, 40: 7.25, 50: 7.75}


def test_the_median_pruner_stops_a_trial_fed_bad_intermediate_values(tmp_path):
    study = optuna.create_study(
        storage=f"sqlite:///{tmp_path / 'study.db'}",
        direction="maximize",
        pruner=Pruner("median", startup_trials=2, warmup=20).build(),
    )
    for returns in ([100.0] * 10, [120.0] * 10):
        trial = study.ask()
        run = RunProgress(read_episodes(episode_log(tmp_path, f"good{len(study.trials)}", returns)), 1000, None, True)
        reported: set[int] = set()
        assert report_and_judge(trial, [run], 100, reported) is None  # ended runs are never pruned
        assert reported == set(range(10, 100, 10))
        study.tell(trial, returns[-1])
    trial = study.ask()
    bad_returns = read_episodes(episode_log(tmp_path, "bad", [5.0] * 4))  # 40% through, far below the median
    reported = set()
    assert report_and_judge(trial, [RunProgress(bad_returns, 1000, None)], 100, reported) == 20  # after the warmup
    assert reported == {10, 20}
    assert study.trials[-1].intermediate_values == {10: 5.0, 20: 5.0}
    good = study.ask()
    as_good = read_episodes(episode_log(tmp_path, "good-going", [150.0] * 4))
    assert report_and_judge(good, [RunProgress(as_good, 1000, None)], 100, set()) is None


def test_a_trial_s_last_evaluation_that_is_no_number_is_its_value_and_named_as_such(tmp_path):
    # it was read as damage: the trial was scored with the evaluation before it, or said to have none
    (tmp_path / "results").mkdir()
    run = SimpleNamespace(name="t-s0", episode_log=lambda: tmp_path / "results" / "episodes.jsonl")
    rounds = [
        {"timesteps": 100, "episodes": 1, "mean_return": 50.0, "std_return": 0.0, "returns": [50.0], "wall_time": 1},
        {"timesteps": 200, "episodes": 2, "mean_return": math.nan, "std_return": math.nan, "returns": [math.nan]},
    ]
    evaluations = tmp_path / "results" / "evaluations.jsonl"
    evaluations.write_text("".join(json.dumps({"wall_time": 2, **r}) + "\n" for r in rounds))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(final_value([run], "evaluation", 100)[0])
        assert no_value(run, "evaluation", 100) == "t-s0's last evaluation has a mean return that is not a number"
    evaluations.unlink()
    assert no_value(run, "evaluation", 100) == "t-s0 has no evaluation"
    assert no_value(run, "mean_return", 10) == "t-s0 has no finished episode"
    episode_log(tmp_path / "results", "episodes", [1.0, math.nan])
    assert math.isnan(final_value([run], "mean_return", 10)[0])
    assert no_value(run, "mean_return", 10) == "t-s0's mean return of its last 10 episodes is not a number"


# ---------------------------------------------------------------------------------------------- real sweeps


def sweep_status(project: Project, name: str) -> str:
    return Sweep.load(project, name).status()[0]


@pytest.mark.slow
def test_a_tiny_sweep_runs_ranks_its_trials_and_writes_the_best_experiment_and_plots(sweeps, capsys):
    write(sweeps.root, "tiny.yaml", TINY)
    assert main(["sweep", "new", "-f", "tiny.yaml", "--start"]) == 0
    assert "Started its driver (PID" in capsys.readouterr().out
    wait_for(lambda: sweep_status(sweeps, "tiny") != "running", timeout=80, interval=0.5, what="the sweep")
    sweep = Sweep.load(sweeps, "tiny")
    assert sweep.status() == (
        "finished",
        "ran its 3 trials; the best experiment is in configs/experiments/tiny-best.json",
    )

    rows = sweep.trials()
    assert [row.state for row in rows] == ["COMPLETE"] * 3 and sorted(row.number for row in rows) == [0, 1, 2]
    values = [row.value for row in rows]
    assert values == sorted(values, reverse=True) and [row.best for row in rows] == [True, False, False]
    for row in rows:
        (run,) = row.experiments
        assert run == f"tiny-t{row.number:03d}-s0"
        spec = Experiment.load(sweeps, run).checked_spec
        assert spec["group"] == f"tiny-t{row.number:03d}" and spec["seed"] == 0
        assert spec["agent"]["optimizer"]["learning_rate"] == row.params[LR]
        assert 1e-4 <= row.params[LR] <= 1e-1 and row.timesteps == 1500
        returns = [r["return"] for r in read_episodes(Experiment.load(sweeps, run).episode_log())][-100:]
        assert row.value == pytest.approx(sum(returns) / len(returns))

    assert main(["sweep", "show", "--sweep", "tiny"]) == 0
    out = capsys.readouterr().out
    table = [line.split() for line in out.splitlines() if "COMPLETE" in line]
    assert table[0][:3] == ["*", str(rows[0].number), "COMPLETE"]
    assert [line[0] for line in table[1:]] == [str(rows[1].number), str(rows[2].number)]
    assert "configs/experiments/tiny-best.json" in out and "tfcli experiment new -f tiny-best -n NAME" in out
    best = json.loads((sweeps.root / "configs" / "experiments" / "tiny-best.json").read_text())
    assert best["agent"]["optimizer"]["learning_rate"] == rows[0].params[LR] and "name" not in best
    assert best["seed"] == 0 and "group" not in best
    assert main(["experiment", "new", "-f", "tiny-best", "-n", "from-best"]) == 0
    capsys.readouterr()
    assert (
        Experiment.load(sweeps, "from-best").checked_spec["agent"]
        == Experiment.load(sweeps, rows[0].experiments[0]).checked_spec["agent"]
    )

    (sweeps.root / "plots").mkdir()
    assert main(["sweep", "plot", "--sweep", "tiny", "-o", "plots"]) == 0
    assert capsys.readouterr().out == "Wrote plots/history.png\nWrote plots/importance.png\n"
    for name in ("history.png", "importance.png"):
        assert (sweeps.root / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["sweep", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["trials"] == "3/3" and listed["status"] == "finished" and listed["best_trial"] == rows[0].number
    err = bad(sweeps.root, capsys, "sweep", "start", "--sweep", "tiny")
    assert err.startswith("tfcli: sweep 'tiny' has run its 3 trials")


@pytest.mark.slow
def test_a_sweep_goes_on_past_a_name_taken_by_hand_and_finishes_its_budget(sweeps, capsys):
    """The review's case: 'experiment new' took the name of a later trial's run, and the driver died on reaching
    that trial. That name is refused now; one taken all the same (a folder copied in) costs the sweep nothing: the
    driver (run here, in this process, so that it is this checkout's code) runs real trials to the end of its
    budget, the parameters of the trial it could not start running as the next trial."""
    from torchforce.client.sweep_driver import Driver

    write(
        sweeps.root, "tiny.yaml", TINY.replace("budget: {trials: 3, parallel: 3}", "budget: {trials: 2, parallel: 1}")
    )
    assert main(["sweep", "new", "-f", "tiny.yaml"]) == 0
    capsys.readouterr()
    flags = ["-A", "vpg_cartpole", "-E", "cartpole", "-t", "1500"]
    assert "the name 'tiny-t001-s0' is kept for sweep 'tiny'" in bad(
        sweeps.root, capsys, "experiment", "new", "-n", "tiny-t001-s0", *flags
    )
    copied = sweeps.root / "experiments" / "tiny-t001-s0"
    copied.mkdir()
    (copied / "experiment.json").write_text("{}")
    sweep = Sweep.load(sweeps, "tiny")
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert Driver(sweep, poll=0.2).run() == 0
    finally:  # the driver's handlers (a stop request) are not this test process's
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert sweep.status()[0] == "finished", sweep.status()
    rows = {row.number: row for row in sweep.trials()}
    assert [rows[n].state for n in range(3)] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert rows[1].note == "interrupted (tiny-t001-s0 was taken); queued again"
    assert rows[2].experiments == ["tiny-t002-s0"] and rows[2].params == rows[1].params
    assert (copied / "experiment.json").read_text() == "{}"
    assert "trial 1 not started: the name tiny-t001-s0 is taken" in capsys.readouterr().out


LONG = TINY.replace("total_timesteps: 1500", "total_timesteps: 1000000").replace(
    "budget: {trials: 3, parallel: 3}", "budget: {trials: 2, parallel: 1}"
)


def running_run(project: Project, name: str) -> Experiment:
    """The run of trial 0 of sweep ``name`` once its worker has played an episode."""
    run = wait_for(lambda: _started(project, f"{name}-t000-s0"), timeout=60, interval=0.2, what="the first run")
    wait_for(lambda: read_episodes(run.episode_log()), timeout=60, interval=0.2, what="an episode")
    return run


def _started(project: Project, name: str) -> Experiment | None:
    try:
        run = Experiment.load(project, name)
    except ClientError:
        return None
    return run if run.record().pid else None


def crash(sweep: Sweep) -> None:
    """Kill the sweep's driver as a crash would (and collect it: this process started it)."""
    driver = sweep.state()["driver"]["pid"]
    os.kill(driver, signal.SIGKILL)
    wait_for(lambda: not sweep.driver_running(), timeout=10, what="the driver to die")
    os.waitpid(driver, 0)


def test_a_trial_whose_run_is_new_again_fails_instead_of_waiting_forever(sweeps, capsys):
    """A trial's run that is new again (taken out of the queue by experiment stop, or one the queue could not
    start) would never end, and its trial held a slot for ever: the trial fails, and its runs not started are
    deleted."""
    from torchforce.client.sweep_driver import Driver, Flight

    write(sweeps.root, "lr.json", json.dumps(sweep_file(seeds_per_trial=2)))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(sweeps, "lr")
    driver = Driver(sweep)
    driver.study = sweep.study()
    trial = driver.study.ask({dimension.key: dimension.distribution() for dimension in sweep.spec.space})
    runs = []
    for index, name in enumerate(sweep.spec.run_names(trial.number)):
        raw, _ = sweep.spec.run_raw(trial.number, index, {})
        runs.append(Experiment(sweeps, **{**raw, "name": name}))
        runs[-1].generate_locally(sweep="lr")  # status new: as a run that left the queue is
    driver.flights[trial.number] = Flight(trial, runs)
    driver._poll(driver.flights[trial.number])
    (row,) = sweep.trials()
    assert row.state == "FAIL" and "lr-t000-s0 left the queue" in row.note
    assert [record.name for record in sweeps.store.experiments()] == []


def test_the_names_of_a_sweep_s_trials_are_refused_to_other_experiments(sweeps, capsys):
    """'experiment new' could take the name a trial of a sweep would take (lr-t001-s0), and the sweep's driver died
    on reaching that trial. The names of its trials' runs and groups are the sweep's: refused to anyone else (the
    CLI, a group, the Python API) with a message naming the sweep; names that only look alike are not."""
    write(sweeps.root, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    capsys.readouterr()
    flags = ["-A", "vpg_cartpole", "-E", "cartpole", "-t", "1500"]
    err = bad(sweeps.root, capsys, "experiment", "new", "-n", "lr-t001-s0", *flags)
    assert err.startswith("tfcli: the name 'lr-t001-s0' is kept for sweep 'lr': its driver names its trials' runs ")
    assert "lr-t000-s0, lr-t001-s0, ..." in err and "Pick another name." in err
    err = bad(sweeps.root, capsys, "experiment", "new", "-n", "lr-t012", "--seeds", "0-1", *flags)
    assert "the name 'lr-t012-s0' is kept for sweep 'lr'" in err
    assert "the name 'lr-t007' is kept for sweep 'lr'" in bad(
        sweeps.root, capsys, "experiment", "new", "-n", "lr-t007", *flags
    )
    with pytest.raises(ClientError, match="the name 'lr-t1000-s3' is kept for sweep 'lr'"):
        Experiment(sweeps, name="lr-t1000-s3", agent="vpg_cartpole", environment="cartpole").generate_locally()
    assert sweeps.store.experiments() == []
    for name in ("lr-t1-s0", "lr-t001-s0-again", "lr-tuned", "lrx-t001-s0"):  # never a trial's
        assert main(["experiment", "new", "-n", name, *flags]) == 0, name
    assert len(sweeps.store.experiments()) == 4


def test_the_budget_of_a_sweep_s_trial_is_the_sweep_s(sweeps, capsys):
    """'start --resume -t N' on a trial's run would have the driver judge it on its old budget, and rank a longer run
    against its rivals: refused, naming the sweep."""
    write(sweeps.root, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    capsys.readouterr()
    run = Experiment(sweeps, name="lr-t000-s0", agent="vpg_cartpole", environment="cartpole", total_timesteps=1500)
    run.generate_locally(sweep="lr")  # as the driver makes it
    pointer = run.results / "checkpoints" / "latest.json"
    pointer.parent.mkdir(parents=True)
    pointer.write_text(json.dumps({"timesteps": 1500, "episodes": 60, "folder": "checkpoint-1500"}))
    assert sweeps.store.update_experiment("lr-t000-s0", status="finished")
    err = bad(sweeps.root, capsys, "experiment", "start", "-e", "lr-t000-s0", "--resume", "-t", "3000")
    assert err.startswith("tfcli: 'lr-t000-s0' is a run of a trial of sweep 'lr', whose budget is the sweep's")
    assert "Resume it without -t/--total-timesteps" in err


def test_a_trial_whose_run_s_name_is_taken_runs_again_as_the_next_trial_and_the_driver_goes_on(sweeps, capsys):
    """A name of a trial's run taken all the same (an experiment folder copied in by hand, which no check of names
    can see coming) ended the driver with 'experiment ... already exists'. The trial fails as interrupted (not
    counted), its parameters are queued to run as the next trial, and the folder is left as it was."""
    from torchforce.client.sweep_driver import Driver

    write(sweeps.root, "lr.json", json.dumps(sweep_file(seeds_per_trial=2)))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    copied = sweeps.root / "experiments" / "lr-t000-s1"
    copied.mkdir(parents=True)
    (copied / "notes.txt").write_text("mine")
    sweep = Sweep.load(sweeps, "lr")
    driver = Driver(sweep)
    driver.study = sweep.study()
    driver._launch()
    rows = {row.number: row for row in sweep.trials()}
    assert [rows[n].state for n in range(2)] == ["FAIL", "WAITING"] and not driver.flights
    assert rows[0].note == "interrupted (lr-t000-s1 was taken); queued again" and not rows[0].counted
    assert rows[0].experiments == [] and rows[1].note == "trial 0 again; queued to run next"
    assert rows[1].params == rows[0].params and driver._counted() == 0
    assert sweeps.store.experiments() == [] and [p.name for p in copied.iterdir()] == ["notes.txt"]
    assert not (sweeps.root / "experiments" / "lr-t000-s0").exists()


def trial_with_runs(sweep: Sweep, study, status: str, returns: list[float] | None = None):
    """A trial asked of ``study`` as the driver asks one, with its runs created and given ``status`` (no worker),
    each with an episode log of ``returns`` where given."""
    from torchforce.client.overrides import apply_to_experiment

    trial = study.ask({dimension.key: dimension.distribution() for dimension in sweep.spec.space})
    names = sweep.spec.run_names(trial.number)
    trial.set_user_attr("experiments", names)
    for index, name in enumerate(names):
        raw, overrides = sweep.spec.run_raw(trial.number, index, sweep.spec.values(trial.params))
        run = Experiment(sweep.project, **raw)
        run.raw = apply_to_experiment(sweep.project, run.raw, overrides)
        run.generate_locally(sweep=sweep.name)
        assert sweep.project.store.update_experiment(name, status=status)
        if returns is not None:
            run.results.mkdir(parents=True, exist_ok=True)
            episode_log(run.results, "episodes", returns, every=150)
    return trial


def test_stop_after_a_crashed_driver_keeps_a_trial_whose_runs_ended_for_the_next_driver(sweeps, capsys):
    """After a driver that died, 'sweep stop' interrupted every trial left RUNNING, those whose runs had all
    finished meanwhile too: their results were thrown away and their parameters run again from scratch. Now only a
    trial with a run not yet ended is interrupted; the next driver adopts the other and takes its result."""
    from torchforce.client.sweep_driver import Driver

    write(sweeps.root, "lr.json", json.dumps(sweep_file(seeds_per_trial=2)))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(sweeps, "lr")
    study = sweep.study()
    trial_with_runs(sweep, study, "finished", [10.0, 20.0])  # trial 0: its runs finished while no driver ran
    trial_with_runs(sweep, study, "new")  # trial 1: a run not yet ended
    sweep._write_driver(status="running", pid=None, started_at=time.time())  # a driver that died
    capsys.readouterr()
    assert main(["sweep", "stop", "--sweep", "lr"]) == 0
    assert capsys.readouterr().out == (
        "trial 0's runs have all ended; the next 'sweep start' takes its result\n"
        "'lr' is stopped; continue it with: tfcli sweep start --sweep lr\n"
    )
    rows = {row.number: row for row in sweep.trials()}
    assert [rows[n].state for n in range(3)] == ["RUNNING", "FAIL", "WAITING"]
    assert rows[1].note == "interrupted (stopped); queued again" and not rows[1].counted
    assert [record.name for record in sweeps.store.experiments()] == ["lr-t000-s0", "lr-t000-s1"]

    driver = Driver(sweep)  # the next driver, as 'sweep start' runs it, up to its first poll
    driver.study = sweep.study()
    driver._adopt()
    for flight in list(driver.flights.values()):
        driver._poll(flight)
    rows = {row.number: row for row in sweep.trials()}
    assert (rows[0].state, rows[0].value, rows[0].seed_values) == ("COMPLETE", 15.0, [15.0, 15.0])
    assert rows[0].counted and rows[0].best


def test_the_driver_asked_to_stop_keeps_the_result_of_a_trial_whose_runs_just_finished(sweeps, capsys):
    """A trial whose runs finished since the driver's last poll was interrupted with the others at 'sweep stop':
    its result was thrown away. It is finished as a poll finishes it; a trial still going is interrupted."""
    from torchforce.client.sweep_driver import Driver, Flight

    write(sweeps.root, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(sweeps, "lr")
    driver = Driver(sweep)
    driver.study = sweep.study()
    for status, returns in (("finished", [4.0, 8.0]), ("new", None)):
        trial = trial_with_runs(sweep, driver.study, status, returns)
        runs = [Experiment.load(sweeps, name) for name in trial.user_attrs["experiments"]]
        driver.flights[trial.number] = Flight(trial, runs)
    driver.stopping = True
    assert driver._drive()[0] == "stopped"
    rows = {row.number: row for row in sweep.trials()}
    assert [rows[n].state for n in range(3)] == ["COMPLETE", "FAIL", "WAITING"]
    assert rows[0].value == 6.0 and rows[1].note == "interrupted (stopped); queued again"


def test_a_trial_whose_run_is_paused_from_outside_waits_for_it_to_be_resumed(sweeps, capsys):
    """As the docs say: a paused run neither fails its trial nor ends it; the trial stays in flight, holding its
    place among the parallel trials, and is finished once the run is resumed and ends."""
    from torchforce.client.sweep_driver import Driver, Flight

    write(sweeps.root, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(sweeps, "lr")
    driver = Driver(sweep)
    driver.study = sweep.study()
    trial = trial_with_runs(sweep, driver.study, "paused", [3.0, 5.0])
    driver.flights[trial.number] = Flight(trial, [Experiment.load(sweeps, "lr-t000-s0")])
    for _ in range(2):
        driver._poll(driver.flights[trial.number])
    assert list(driver.flights) == [0] and sweep.trials()[0].state == "RUNNING"
    assert sweeps.store.update_experiment("lr-t000-s0", status="finished")  # resumed, and it ran to its end
    driver._poll(driver.flights[trial.number])
    assert not driver.flights and (sweep.trials()[0].state, sweep.trials()[0].value) == ("COMPLETE", 4.0)


@pytest.mark.slow
def test_a_crashed_driver_is_taken_over_and_stop_leaves_no_process(sweeps, capsys):
    write(sweeps.root, "long.yaml", LONG)
    assert main(["sweep", "new", "-f", "long.yaml", "--start"]) == 0
    capsys.readouterr()
    sweep = Sweep.load(sweeps, "tiny")
    run = running_run(sweeps, "tiny")
    worker = run.record().pid
    crash(sweep)  # the run goes on without its driver
    assert sweep.status()[0] == "failed" and "'tfcli sweep start --sweep tiny' continues it" in sweep.status()[1]
    assert process_alive(worker, run.folder)

    assert main(["sweep", "start", "--sweep", "tiny"]) == 0
    capsys.readouterr()
    wait_for(lambda: "trial 0 adopted" in sweep.log_file.read_text(), timeout=30, what="the adoption")
    assert run.record().pid == worker  # the same run goes on
    (trial,) = sweep.trials()
    assert (trial.number, trial.state) == (0, "RUNNING")

    driver = sweep.state()["driver"]["pid"]
    assert main(["sweep", "stop", "--sweep", "tiny"]) == 0
    assert capsys.readouterr().out == "'tiny' is stopped; continue it with: tfcli sweep start --sweep tiny\n"
    assert not Path(f"/proc/{driver}").exists() and not process_alive(worker, run.folder)
    assert run.record().status == "stopped" and not sweep.driver_running()
    rows = {row.number: row for row in sweep.trials()}
    assert (rows[0].state, rows[0].note) == ("FAIL", "interrupted (stopped); queued again")
    assert (rows[1].state, rows[1].params) == ("WAITING", rows[0].params)  # it runs again at the next start
    assert sweep.status()[0] == "stopped"


@pytest.mark.slow
def test_stop_cleans_up_after_a_crashed_driver_and_the_trial_runs_again_with_its_parameters(sweeps, capsys):
    write(sweeps.root, "long.yaml", LONG)
    assert main(["sweep", "new", "-f", "long.yaml", "--start"]) == 0
    sweep = Sweep.load(sweeps, "tiny")
    first = running_run(sweeps, "tiny")
    crash(sweep)
    assert main(["sweep", "stop", "--sweep", "tiny"]) == 0  # no driver: stop ends the run itself
    assert capsys.readouterr().out.endswith("'tiny' is stopped; continue it with: tfcli sweep start --sweep tiny\n")
    assert first.record().status == "stopped" and sweep.status()[0] == "stopped"
    waiting = {row.number: row for row in sweep.trials()}[1]
    assert (waiting.state, waiting.note) == ("WAITING", "trial 0 again; queued to run next")

    assert main(["sweep", "start", "--sweep", "tiny"]) == 0
    again = wait_for(lambda: _started(sweeps, "tiny-t001-s0"), timeout=60, interval=0.2, what="the trial again")
    rows = {row.number: row for row in sweep.trials()}
    assert (rows[1].state, rows[1].params, rows[1].experiments) == ("RUNNING", rows[0].params, ["tiny-t001-s0"])
    assert again.checked_spec["agent"]["optimizer"]["learning_rate"] == rows[0].params[LR]
    assert main(["sweep", "stop", "--sweep", "tiny"]) == 0
    assert again.record().status == "stopped" and not sweep.driver_running()
    assert [row.state for row in sorted(sweep.trials(), key=lambda row: row.number)] == ["FAIL", "FAIL", "WAITING"]


@contextmanager
def a_look_at(sweep: Sweep, seconds: float):
    """The sweep's lock held shared for ``seconds`` from now, as a concurrent 'sweep show' or 'list' holds it (no
    driver holds it)."""
    descriptor = os.open(sweep.lock_file, os.O_RDONLY)
    fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    timer = threading.Timer(seconds, os.close, [descriptor])
    timer.start()
    try:
        yield
    finally:
        timer.join()


@pytest.mark.slow
def test_a_look_at_a_sweep_meanwhile_never_makes_start_or_stop_fail(sweeps, capsys):
    """A look at a sweep (show, list) took its lock alone for a moment: meanwhile a driver that died showed as
    running, 'sweep stop' said another process was stopping the sweep and 'sweep start' that it was already running
    (exit 2 both). Looks now share the lock; the driver and stop's cleanup wait that moment out."""
    write(sweeps.root, "long.yaml", LONG)
    assert main(["sweep", "new", "-f", "long.yaml"]) == 0
    sweep = Sweep.load(sweeps, "tiny")
    sweep._write_driver(status="running", pid=None, started_at=time.time())  # a driver that died
    capsys.readouterr()
    with a_look_at(sweep, 0.5):
        assert not sweep.driver_running() and sweep.status()[0] == "failed"
        assert main(["sweep", "stop", "--sweep", "tiny"]) == 0
    assert capsys.readouterr().out == "'tiny' is stopped; continue it with: tfcli sweep start --sweep tiny\n"
    with a_look_at(sweep, 0.5):
        assert main(["sweep", "start", "--sweep", "tiny"]) == 0
    assert capsys.readouterr().out.startswith("Started the driver of 'tiny'")
    assert sweep.driver_running() and sweep.status()[0] == "running"
    assert main(["sweep", "stop", "--sweep", "tiny"]) == 0
    assert sweep.status()[0] == "stopped" and not sweep.driver_running()


@contextmanager
def lookalikes(*arguments: list[str]) -> Iterator[list[int]]:
    """Processes whose command lines are ``python -c <a sleep> ARGUMENTS`` (a driver's, or nearly one), for each of
    ``arguments``: their PIDs, once each shows its own arguments (not yet its parent's) in /proc."""
    script = "import time; time.sleep(60)"
    processes = [subprocess.Popen([sys.executable, "-c", script, *given]) for given in arguments]
    try:
        for process, given in zip(processes, arguments, strict=True):
            shown = ("\0".join(given) + "\0").encode()
            wait_for(lambda p=process, s=shown: Path(f"/proc/{p.pid}/cmdline").read_bytes().endswith(s), timeout=10)
        yield [process.pid for process in processes]
    finally:
        for process in processes:
            process.kill()
            process.wait()


def test_the_driver_is_recognized_in_a_project_whose_path_has_a_space(tmp_path, monkeypatch):
    """A sweep's driver is told from a reused PID by its arguments: a project path with a space in it is one
    argument, so the driver of such a project is still its driver (sweep stop could never stop it)."""
    from torchforce.client.sweep_process import DRIVER_MODULE, is_driver

    root = tmp_path / "my project"
    root.mkdir()
    monkeypatch.chdir(root)
    project, _ = Project.init(root)
    write(root, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(project, "lr")
    with lookalikes([DRIVER_MODULE, str(root), "lr"], [DRIVER_MODULE, str(root / "elsewhere"), "lr"]) as pids:
        assert is_driver(pids[0], sweep) and not is_driver(pids[1], sweep)


def test_a_driver_started_before_it_moved_to_sweep_driver_is_still_recognized(tmp_path, monkeypatch):
    """The driver's module moved from torchforce.client.sweep to torchforce.client.sweep_driver: a driver an older
    version started still runs as the old module, and 'sweep stop' must still know it for the sweep's driver."""
    from torchforce.client.sweep_process import is_driver

    monkeypatch.chdir(tmp_path)
    project, _ = Project.init(tmp_path)
    write(tmp_path, "lr.json", json.dumps(sweep_file()))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(project, "lr")
    older, unrelated = (
        ["torchforce.client.sweep", str(tmp_path), "lr"],
        ["torchforce.client.sweeps", str(tmp_path), "lr"],
    )
    with lookalikes(older, unrelated) as pids:
        assert is_driver(pids[0], sweep) and not is_driver(pids[1], sweep)
