"""Seeds and groups: ``experiment new --seeds`` (all the runs or none), a group in ``list``, ``show``, ``compare``
and ``plot``, and one smoothing window (``--window``) in every table and the plot. The results are episode logs
written here (no training), except for one small group run to its end."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pytest

from tests.client.conftest import copied_project, fake_worker, wait_for, wait_until_done
from tests.client.test_bad_input import bad, set_status
from torchforce.client import ClientError, Experiment, Project, queue
from torchforce.client.aggregate import bootstrap_interval
from torchforce.client.cli import build_parser, main
from torchforce.client.groups import Group, format_seeds, new_group, parse_seeds
from torchforce.client.report import read_episodes
from torchforce.spec import SpecError

CHEAP = ["-A", "ppo_cartpole", "-E", "cartpole", "-t", "1100"]  # past the first update: no warning
FINALS = [0.0, 0.0, 0.0, 100.0]  # cp-s0 ... cp-s3: mean 25, 95% interval [0, 75] (test_aggregate), IQM 0


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with the group 'cp' (seeds 0-3) and the experiments 'solo' and 'taken-s1', made once."""
    root = tmp_path_factory.mktemp("groups") / "project"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        project, _ = Project.init(root)
        fields = {"agent": "ppo_cartpole", "environment": "cartpole", "total_timesteps": 1000}
        new_group(project, "cp", [0, 1, 2, 3], **fields)
        for name in ("solo", "taken-s1"):
            Experiment(project, name=name, **fields).generate_locally()
    return root


@pytest.fixture
def root(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return copied_project(template, tmp_path, monkeypatch)


def ok(capsys: pytest.CaptureFixture, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0 and err == "", (out, err)
    return out


def episodes(root: Path, name: str, returns: list[float], step: int = 10, seconds: float = 0.5) -> None:
    """The episode log of ``name``: episode i (from 1) ends at timestep ``step * i``, second ``seconds * i``."""
    results = root / "experiments" / name / "results"
    results.mkdir(exist_ok=True)
    records = [
        {"episode": i, "timesteps": step * i, "worker": 0, "return": value, "length": step, "wall_time": seconds * i}
        for i, value in enumerate(returns, start=1)
    ]
    (results / "episodes.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))


def constant_finals(root: Path) -> None:
    for seed, value in enumerate(FINALS):
        episodes(root, f"cp-s{seed}", [value] * 120)


def table_rows(out: str) -> dict[str, list[str]]:
    """The cells of a table's rows (columns are two spaces apart or more) by their first; the header, the rule and
    a note under the table left out."""
    table = out.split("\n\n")[-1].splitlines()
    cells = [re.split(r" {2,}", line.strip()) for line in table[2:] if "  " in line.strip()]
    return {row[0]: row for row in cells}


# ---------------------------------------------------------------------------------------------- seeds


@pytest.mark.parametrize(
    ("text", "seeds", "written"),
    [
        ("0-4", [0, 1, 2, 3, 4], "0-4"),
        ("0,3,7", [0, 3, 7], "0,3,7"),
        ("0-2,5", [0, 1, 2, 5], "0-2,5"),
        ("7", [7], "7"),
        ("3-3, 1", [3, 1], "1,3"),
        ("5,2-3,4", [5, 2, 3, 4], "2-5"),
    ],
)
def test_seeds_are_read_as_ranges_and_lists(text, seeds, written):
    assert parse_seeds(text) == seeds
    assert format_seeds(seeds) == written  # in order, consecutive ones as a range


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("4-0", "the range '4-0' runs backwards; write it as '0-4'"),
        ("a", "expected seeds like 0-4, 0,3,7 or 0-2,5 (whole numbers >= 0), got 'a'"),
        ("-1", "expected seeds like"),
        ("0-2,", "expected seeds like"),
        ("0-2,2", "seed 2 is given twice in '0-2,2'"),
        ("0-1000", "more than 1000 seeds in '0-1000'"),
        # the agent's range: not an error about the agent config, after the runs are made
        ("0,99999999999999999999", "seed 99999999999999999999 is out of range; expected seeds in [0, 2^64 - 1]"),
        ("18446744073709551615-18446744073709551616", "seed 18446744073709551616 is out of range"),
    ],
)
def test_bad_seeds_are_a_usage_error_that_changes_nothing(root, capsys, text, message):
    err = bad(root, capsys, "experiment", "new", "-n", "g", *CHEAP, f"--seeds={text}")
    assert f"tfcli: error: argument --seeds: {message}" in err


# ---------------------------------------------------------------------------------------------- creating a group


def test_new_with_seeds_makes_a_group_of_runs(root, capsys):
    out = ok(capsys, "experiment", "new", "-n", "g", *CHEAP, "--seeds", "0-1,5", "--set", "num_environments=2")
    assert out.splitlines()[0] == (
        "Created group 'g' of 3 runs (g-s0, g-s1, g-s5; seeds 0-1,5) in experiments: ppo on CartPole-v1, "
        "single run mode"
    )
    project = Project(root)
    for seed in (0, 1, 5):
        spec = json.loads((root / "experiments" / f"g-s{seed}" / "experiment.json").read_text())
        assert (spec["name"], spec["seed"], spec["group"], spec["num_environments"]) == (f"g-s{seed}", seed, "g", 2)
        assert project.store.experiment(f"g-s{seed}").status == "new"
    assert Group.load(project, "g").seeds == [0, 1, 5]
    plain = json.loads((root / "experiments" / "solo" / "experiment.json").read_text())
    assert plain["group"] is None


def test_a_group_is_made_whole_or_not_at_all(root, capsys):
    err = bad(root, capsys, "experiment", "new", "-n", "taken", *CHEAP, "--seeds", "0-2")
    assert "experiment 'taken-s1' already exists; group 'taken' needs that name for its seed 1" in err
    err = bad(root, capsys, "experiment", "new", "-n", "solo", *CHEAP, "--seeds", "0-2")
    assert "'solo' is an experiment's name already; a group of that name would be ambiguous" in err
    err = bad(root, capsys, "experiment", "new", "-n", "cp", *CHEAP, "--seeds", "4-5")
    assert "group 'cp' already exists (cp-s0, cp-s1, cp-s2, cp-s3)" in err
    err = bad(root, capsys, "experiment", "new", "-n", "cp", *CHEAP)
    assert "'cp' is the name of a group (cp-s0, cp-s1, cp-s2, cp-s3)" in err


def test_a_failure_while_writing_removes_the_runs_written(root, monkeypatch):
    project = Project(root)
    original, calls = Experiment.generate_locally, []

    def fail_the_third(self: Experiment) -> Path:
        calls.append(self.name)
        if len(calls) == 3:
            raise ClientError("disk full")
        return original(self)

    monkeypatch.setattr(Experiment, "generate_locally", fail_the_third)
    with pytest.raises(ClientError, match="disk full"):
        new_group(project, "half", [0, 1, 2, 3], agent="ppo_cartpole", environment="cartpole", total_timesteps=100)
    assert calls == ["half-s0", "half-s1", "half-s2"]
    assert not any(path.name.startswith(("half", ".half")) for path in (root / "experiments").iterdir())
    assert [r.name for r in project.store.experiments()] == ["cp-s0", "cp-s1", "cp-s2", "cp-s3", "solo", "taken-s1"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--seed", "3"], "experiment.seed: each run of a group gets its seed from --seeds; got 3"),
        (["--set", "seed=2"], "experiment.seed: each run of a group gets its seed from --seeds and --name"),
        (["--set", "group=x"], "experiment.group: each run of a group gets its group from --seeds and --name"),
        (["-t", "0"], "experiment.total_timesteps: out of range"),
    ],
)
def test_a_group_request_that_contradicts_itself(root, capsys, flags, expected):
    err = bad(root, capsys, "experiment", "new", "-n", "g", *CHEAP, "--seeds", "0-1", *flags)
    assert err.startswith(f"tfcli: {expected}")


def test_a_group_name_leaves_room_for_the_seeds(root, capsys):
    name = "g" * 36  # g...g-s10 is 40 characters; g...g-s100 would be 41
    assert main(["experiment", "new", "-n", name, *CHEAP, "--seeds", "9-10"]) == 0
    capsys.readouterr()
    err = bad(root, capsys, "experiment", "new", "-n", "h" * 36, *CHEAP, "--seeds", "99-100")
    assert f"experiment.name: too long for a group: its runs are named NAME-s<seed>, and '{'h' * 36}-s100'" in err
    assert "expected at most 35 characters" in err
    # a name that breaks the rule is told the length its seeds leave, not an experiment's 40
    err = bad(root, capsys, "experiment", "new", "-n", "Odd Name", *CHEAP, "--seeds", "99-100")
    assert err.startswith("tfcli: experiment.name: not a valid group name; expected 1-35 lower-case letters")


def test_the_group_field_is_checked_in_the_python_api_too(root):
    with pytest.raises(SpecError, match=r"experiment\.group: not a valid group name.*got \"Odd\""):
        Experiment(Project(root), name="odd", agent="ppo_cartpole", environment="cartpole", group="Odd").validate()
    with pytest.raises(SpecError, match=r"experiment\.group: not a valid group name.*got 5"):
        Experiment(Project(root), name="odd", agent="ppo_cartpole", environment="cartpole", group=5).validate()


def test_the_group_field_follows_the_naming_rule(root, capsys):
    spec = {"name": "one", "agent": "ppo_cartpole", "environment": "cartpole", "group": "Bad Name"}
    (root / "spec.json").write_text(json.dumps(spec))
    err = bad(root, capsys, "experiment", "new", "-f", "spec.json")
    assert err.startswith("tfcli: experiment.group: not a valid group name; expected 1-40 lower-case letters")
    assert "(in spec.json)" in err and "Try 'bad-name'." in err
    (root / "spec.json").write_text(json.dumps({**spec, "group": "mine"}))
    assert main(["experiment", "new", "-f", "spec.json"]) == 0
    capsys.readouterr()
    assert Group.load(Project(root), "mine").seeds == [0]


# ---------------------------------------------------------------------------------------------- list and show


def test_list_shows_a_group_as_one_row(root, capsys):
    constant_finals(root)
    episodes(root, "solo", [1.0] * 50 + [5.0] * 50)
    for name, status in (("cp-s0", "finished"), ("cp-s1", "failed"), ("cp-s3", "finished")):
        set_status(root, name, status=status)
    out = ok(capsys, "experiment", "list")
    assert out.splitlines()[0].split("  ")[-2:] == ["Mean return (last 100)", "Runs"]
    rows = table_rows(out)
    assert list(rows) == ["cp", "solo", "taken-s1"]
    # 2 of 4 finished: 50%; the mean return of 0, 0, 0, 100 is 25, its interval [0, 75]
    assert rows["cp"][5:] == ["local", "1 new, 1 failed, 2 finished", "50%", "25.0 [0.0, 75.0]", "4"]
    assert rows["solo"][5:] == ["local", "new", "0%", "3.0", "-"]
    assert "mean of the last 100 episodes, with a 95% bootstrap confidence interval" in out.replace("\n", " ")


def test_one_agent_has_one_name_in_the_tables(root, capsys):
    # the shipped configs/agents/ppo.json keeps 2018's "ppo_agent": it showed as "ppo_agent" beside ppo_cartpole's "ppo"
    out = ok(
        capsys, "experiment", "new", "-n", "long", "-A", "ppo", "-M", "mlp2_network", "-E", "cartpole", "-t", "2000"
    )
    assert "ppo on CartPole-v1" in out and "ppo_agent" not in out, out
    out = ok(capsys, "experiment", "list")
    assert "ppo_agent" not in out and [line.split()[1] for line in out.splitlines() if line.startswith("long ")] == [
        "ppo"
    ], out


def test_list_runs_and_json(root, capsys):
    constant_finals(root)
    out = ok(capsys, "experiment", "list", "--runs", "--window", "10")
    rows = table_rows(out)
    assert "Mean return (last 10)" in out.splitlines()[0] and out.splitlines()[0].endswith("Group")
    assert [rows[f"cp-s{seed}"][-2:] for seed in range(4)] == [["0.0", "cp"]] * 3 + [["100.0", "cp"]]
    assert rows["solo"][-2:] == ["-", "-"]
    listed = json.loads(ok(capsys, "experiment", "list", "--json"))
    assert [(row["kind"], row["name"]) for row in listed] == [
        *[("experiment", f"cp-s{seed}") for seed in range(4)],
        ("experiment", "solo"),
        ("experiment", "taken-s1"),
        ("group", "cp"),
    ]
    assert [(row["group"], row["seed"], row["mean_return"]) for row in listed[:4]] == [
        ("cp", seed, value) for seed, value in enumerate(FINALS)
    ]
    group = listed[-1]
    assert (group["runs"], group["seeds"], group["statuses"], group["status"]) == (
        ["cp-s0", "cp-s1", "cp-s2", "cp-s3"],
        [0, 1, 2, 3],
        {"new": 4},
        "4 new",
    )
    assert (group["mean_return"], group["mean_return_low"], group["mean_return_high"]) == (25.0, 0.0, 75.0)
    assert (group["mean_return_iqm"], group["mean_return_seeds"], group["window"]) == (0.0, 4, 100)


def test_show_a_group(root, capsys):
    constant_finals(root)
    set_status(root, "cp-s2", status="paused")
    out = ok(capsys, "experiment", "show", "-e", "cp")
    lines = out.splitlines()
    assert lines[:8] == [
        "Group        cp: 4 runs, seeds 0-3",
        "Status       1 paused, 3 new",
        "Agent        ppo (configs/agents/ppo_cartpole.json)",
        "Environment  CartPole-v1 x 1",
        "Run mode     single",
        "Budget       1,000 timesteps per run",
        "Progress     0% (mean of the runs), 0 timesteps and 0 episodes in all",
        "Mean return  25.00 (last 100; mean of 4 seeds), 95% CI [0.00, 75.00], IQM 0.00",
    ]
    assert [line.split()[0] for line in lines[11:]] == ["cp-s0", "cp-s1", "cp-s2", "cp-s3"]
    shown = json.loads(ok(capsys, "experiment", "show", "-e", "cp", "--json"))
    assert shown["kind"] == "group" and [row["name"] for row in shown["run_rows"]] == shown["runs"]
    assert ok(capsys, "experiment", "show", "-e", "cp-s3", "--window", "7").count("100.00 (last 7)") == 1


def test_a_group_with_one_seed_counted_shows_no_interval(root, capsys):
    episodes(root, "cp-s0", [35.0] * 120)  # the other three have no episodes yet
    out = ok(capsys, "experiment", "list")
    assert table_rows(out)["cp"][-2:] == ["35.0 [-]", "4"]
    assert "[low, high] ([-] for one seed, which gives none)" in out.replace("\n", " ")
    group = json.loads(ok(capsys, "experiment", "list", "--json"))[-1]
    assert (group["mean_return"], group["mean_return_low"], group["mean_return_high"]) == (35.0, None, None)
    assert group["mean_return_seeds"] == 1
    shown = ok(capsys, "experiment", "show", "-e", "cp").splitlines()
    assert shown[7] == "Mean return  35.00 (last 100; mean of 1 seed), 95% CI [-], IQM 35.00"
    # compare: episodes, timesteps as means over the 4 runs; best and final 35, no interval, IQM 35
    assert table_rows(ok(capsys, "experiment", "compare", "cp"))["cp"][:9] == [
        *["cp", "4", "30", "300", "1m00s", "35.0", "35.0", "-", "35.0"]
    ]
    compared = json.loads(ok(capsys, "experiment", "compare", "cp", "--json"))[0]
    assert (compared["final_mean_return"], compared["final_low"], compared["final_high"]) == (35.0, None, None)


def test_compare_a_group_whose_runs_end_at_different_steps(root, capsys):
    # as vectorized runs do: the same returns (0..149), ending at steps 1,350, 1,500 and 1,650 (the fourth has none
    # yet); finals (mean of 50..149) 99.5 each, and so is the best, where a curve that stopped at 1,350 peaked lower
    for seed, step in enumerate((9, 10, 11)):
        episodes(root, f"cp-s{seed}", [float(i) for i in range(150)], step=step)
    row = table_rows(ok(capsys, "experiment", "compare", "cp"))["cp"]
    assert row[5:7] == ["99.5", "99.5"]


def test_an_unknown_name_is_said_with_the_groups(root, capsys):
    err = bad(root, capsys, "experiment", "show", "-e", "cpp")
    assert err.startswith(f"tfcli: no experiment named 'cpp' in project '{Project(root).name}'")
    assert err.endswith("Known: cp-s0, cp-s1, cp-s2, cp-s3, solo, taken-s1. Did you mean the group 'cp'? Groups: cp.\n")
    err = bad(root, capsys, "experiment", "compare", "solo", "other")
    assert err.endswith("Groups: cp.\n") and "Did you mean the group" not in err


# ---------------------------------------------------------------------------------------------- compare


@pytest.mark.parametrize("threshold", ["nan", "inf"])
def test_a_threshold_that_no_return_reaches_is_refused(root, capsys, threshold):
    episodes(root, "solo", [float(i) for i in range(10)])
    err = bad(root, capsys, "experiment", "compare", "solo", "--threshold", threshold)
    assert f"argument --threshold: expected a finite number, got '{threshold}'" in err


def test_compare_groups_with_a_threshold(root, capsys):
    ramps = {f"cp-s{seed}": [float(i + 15 * seed) for i in range(60)] for seed in range(4)}
    ramps["solo"] = [float(i) for i in range(100)]
    for name, returns in ramps.items():
        episodes(root, name, returns)  # episode n ends at step 10 n, second n / 2
    crossed = {name: expected_crossing(returns, 10, 60.0) for name, returns in ramps.items()}
    assert crossed == {"cp-s0": None, "cp-s1": 51, "cp-s2": 36, "cp-s3": 21, "solo": 66}
    out = ok(capsys, "experiment", "compare", "cp", "solo", "--threshold", "60", "--window", "10")
    header = out.splitlines()[0]
    for title in ("Best mean (last 10)", "Final mean (last 10)", "95% CI", "IQM", "Reached"):
        assert title in header
    assert header.endswith("Steps to 60 (median, min-max)  Time to 60 (median, min-max)")
    rows = table_rows(out)
    # 60 episodes and 600 steps per run, 30 s; best and final 77 (the finals: 54.5, 69.5, 84.5, 99.5), IQM 77
    low, high = bootstrap_interval([54.5, 69.5, 84.5, 99.5])
    assert rows["cp"] == [
        *["cp", "4", "60", "600", "30s", "77.0", "77.0", f"[{low:.1f}, {high:.1f}]", "77.0", "20"],
        *["3/4", "360 (210-510)", "18s (10s-25s)"],
    ]
    assert rows["solo"] == ["solo", "1", "100", "1,000", "50s", "94.5", "94.5", "-", "94.5", "20", "1/1", "660", "33s"]
    note = " ".join(out.splitlines()[-3:])
    assert "steps and time to 60 are the median (min-max) over the seeds that reached it" in note
    flags = ["--threshold", "60", "--window", "10", "--json"]
    group, single = json.loads(ok(capsys, "experiment", "compare", "cp", "solo", *flags))
    assert (group["kind"], group["reached"], group["window"], single["kind"]) == ("group", 3, 10, "experiment")
    assert group["timesteps_to_threshold"] == {"median": 360.0, "low": 210.0, "high": 510.0}
    assert [run["timesteps_to_threshold"] for run in group["runs"]] == [None, 510, 360, 210]
    assert (group["final_mean_return"], group["final_iqm"]) == (77.0, 77.0)
    assert (group["final_low"], group["final_high"]) == bootstrap_interval([54.5, 69.5, 84.5, 99.5])
    assert single["timesteps_to_threshold"] == 660


def expected_crossing(returns: list[float], window: int, threshold: float) -> int | None:
    """The episode (from 1) whose mean of the last ``window`` returns first reaches ``threshold``, by plain
    Python."""
    for n in range(1, len(returns) + 1):
        last = returns[max(0, n - window) : n]
        if sum(last) / len(last) >= threshold:
            return n
    return None


def test_compare_experiments_alone_keeps_its_table(root, capsys):
    episodes(root, "solo", [float(i) for i in range(100)])
    out = ok(capsys, "experiment", "compare", "solo", "--threshold", "60")
    assert out.splitlines()[0].split("  ")[0] == "Experiment" and "IQM" not in out
    # smoothed over 100 (fewer at the start) 0, 1, ..., 99 never reach 60: their mean ends at 49.5
    assert table_rows(out)["solo"][-2:] == ["-", "-"]
    assert "Final mean (last 100)" in out.splitlines()[0]


# ---------------------------------------------------------------------------------------------- plot


@pytest.fixture
def drawn(monkeypatch):
    """What the plot draws: each call of Axes.plot, fill_between and errorbar, with its data and label."""
    from matplotlib.axes import Axes

    calls: dict[str, list] = {"plot": [], "fill_between": [], "errorbar": [], "ylabel": []}
    for method in ("plot", "fill_between", "errorbar"):
        original = getattr(Axes, method)

        def record(self, *args, _method=method, _original=original, **kwargs):
            calls[_method].append(([np.asarray(a, dtype=float) for a in args[:3]], kwargs))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Axes, method, record)
    original_ylabel = Axes.set_ylabel
    monkeypatch.setattr(
        Axes, "set_ylabel", lambda self, text, **kw: calls["ylabel"].append(text) or original_ylabel(self, text, **kw)
    )
    return calls


def test_plot_draws_a_group_as_its_mean_in_a_band(root, capsys, drawn):
    constant_finals(root)
    episodes(root, "solo", [float(i) for i in range(150)])
    out = ok(capsys, "experiment", "plot", "-e", "cp", "solo")
    written = root / "experiments" / "cp-s0" / "results" / "group_learning_curve.png"
    assert out == f"Learning curves of cp, solo (smoothed over 100 episodes): {written}\n"
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (steps, mean), options = drawn["plot"][0]
    assert options["label"] == "cp (mean of 4 seeds, 95% CI)"
    assert (steps[0], steps[-1], len(steps)) == (10.0, 1200.0, 200) and set(mean) == {25.0}
    bands = drawn["fill_between"]
    assert len(bands) == 2  # by steps and by time
    (x, low, high), _ = bands[0]
    assert set(low) == {0.0} and set(high) == {75.0} and x.tolist() == steps.tolist()
    (solo_steps, solo_returns), options = drawn["plot"][2]
    assert options["label"] == "solo" and solo_returns[-1] == pytest.approx(np.mean(range(50, 150)))
    assert drawn["ylabel"] == ["episode return, smoothed over 100 episodes"] * 2


def test_plot_draws_a_group_whose_runs_have_not_all_started_or_overlapped(root, capsys, drawn):
    # cp-s1 has one episode, at step 5, before cp-s0's first (step 10); cp-s2 and cp-s3 have not started
    episodes(root, "cp-s0", [1.0] * 20)
    episodes(root, "cp-s1", [3.0], step=5)
    code = main(["experiment", "plot", "-e", "cp", "-o", str(root / "cp.png")])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("Learning curves of cp"), (out, err)
    assert err == (
        "tfcli: warning: cp: cp-s1 left out of the mean curve: too little in common yet with the steps of the other "
        "runs\n"
    )
    (steps, mean), options = drawn["plot"][0]
    assert options["label"] == "cp (1 seed)" and (steps[0], steps[-1]) == (10.0, 200.0)
    assert set(mean) == {1.0}
    assert drawn["fill_between"] == []  # one seed gives no band


def test_compare_json_writes_a_nan_return_as_null_and_smooths_past_it(root, capsys):
    returns = [1.0, math.nan] + [2.0] * 10
    episodes(root, "solo", returns)
    summary = json.loads(ok(capsys, "experiment", "compare", "solo", "--json", "--window", "5"))[0]
    assert summary["final_mean_return"] == 2.0 and summary["best_mean_return"] == 2.0
    episodes(root, "solo", [1.0, 2.0, math.nan])
    summary = json.loads(ok(capsys, "experiment", "compare", "solo", "--json", "--window", "5"))[0]
    assert summary["final_mean_return"] is None  # NaN, which JSON has not


def test_a_group_s_evaluations_are_averaged_round_by_round(root, capsys, drawn):
    constant_finals(root)
    for seed, value in enumerate(FINALS):
        rounds = [
            {
                "timesteps": 400 + seed,
                "episodes": 40,
                "mean_return": value,
                "std_return": 0.0,
                "returns": [value],
                "wall_time": 1.0,
            },
            {
                "timesteps": 800 + seed,
                "episodes": 80,
                "mean_return": value + 10,
                "std_return": 0.0,
                "returns": [],
                "wall_time": 2.0,
            },
        ]
        if seed == 3:
            rounds = rounds[:1]  # the last seed has one round so far: one round is drawn
        path = root / "experiments" / f"cp-s{seed}" / "results" / "evaluations.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rounds))
    ok(capsys, "experiment", "plot", "-e", "cp", "-o", str(root / "curve.png"))
    ((x, y), options) = drawn["errorbar"][0]
    assert (x.tolist(), y.tolist()) == ([401.5], [25.0])
    assert np.asarray(options["yerr"]).tolist() == [[25.0], [50.0]]  # down to 0, up to 75
    assert options["label"] == "cp (evaluation, mean of 4 seeds, 95% CI)"


def test_a_group_s_evaluation_round_with_a_result_that_is_no_number_is_left_out(root, capsys, drawn):
    constant_finals(root)
    for seed, value in enumerate(FINALS):
        diverged = math.nan if seed == 2 else value + 10  # seed 2's second round: NaN rewards
        rounds = [
            {"timesteps": 400, "episodes": 40, "mean_return": value, "std_return": 0.0, "returns": [value]},
            {"timesteps": 800, "episodes": 80, "mean_return": diverged, "std_return": 0.0, "returns": [diverged]},
        ]
        path = root / "experiments" / f"cp-s{seed}" / "results" / "evaluations.jsonl"
        path.write_text("".join(json.dumps({**r, "wall_time": 1.0}) + "\n" for r in rounds))
    ok(capsys, "experiment", "plot", "-e", "cp", "-o", str(root / "curve.png"))  # no warning of damaged lines
    ((x, y), options) = drawn["errorbar"][0]
    assert (x.tolist(), y.tolist()) == ([400.0], [25.0])  # the second round's mean would be NaN


def test_one_window_in_every_view(root, capsys, drawn):
    """The plot and every table show the same smoothed return for the same window (it was 20 in the plot and 100
    in the tables)."""
    returns = [500.0] * 30 + [0.0] * 170 + [500.0] * 20  # the last 20: 500; the last 100: 100; a plot of 20: 500
    episodes(root, "solo", returns)
    for window, expected in ((20, 500.0), (100, 100.0)):
        flags = [] if window == 100 else ["--window", str(window)]
        ok(capsys, "experiment", "plot", "-e", "solo", *flags)
        plotted = drawn["plot"][-1][0][1][-1]
        compared = json.loads(ok(capsys, "experiment", "compare", "solo", "--json", *flags))[0]["final_mean_return"]
        listed = [r for r in json.loads(ok(capsys, "experiment", "list", "--json", *flags)) if r["name"] == "solo"]
        shown = json.loads(ok(capsys, "experiment", "show", "-e", "solo", "--json", *flags))["mean_return"]
        assert plotted == compared == listed[0]["mean_return"] == shown == expected
        assert f"{expected:.2f} (last {window})" in ok(capsys, "experiment", "show", "-e", "solo", *flags)


def test_plot_of_a_group_without_episodes(root, capsys):
    err = bad(root, capsys, "experiment", "plot", "-e", "cp")
    assert "no finished episodes yet in cp" in err


# ---------------------------------------------------------------------------------------------- for real


@pytest.mark.slow
def test_a_small_group_runs_to_its_end(project, capsys):
    argv = ["experiment", "new", "-n", "real", "-A", "ppo_cartpole", "-E", "cartpole", "-t", "2000"]
    assert main([*argv, "--seeds", "0-1", "--start"]) == 0
    out = capsys.readouterr().out
    assert "Created group 'real' of 2 runs (real-s0, real-s1; seeds 0-1)" in out
    assert "Follow them with: tfcli experiment show -e real" in out
    runs = [Experiment.load(project, f"real-s{seed}") for seed in (0, 1)]
    assert [wait_until_done(run) for run in runs] == ["finished", "finished"]
    assert [run.progress()["timesteps"] >= 2000 for run in runs] == [True, True]
    logs = [read_episodes(run.episode_log()) for run in runs]
    assert [r["return"] for r in logs[0]] != [r["return"] for r in logs[1]]  # two seeds, two runs

    assert main(["experiment", "show", "-e", "real", "--window", "10"]) == 0
    shown = capsys.readouterr().out
    assert "Status       2 finished" in shown and "Progress     100% (mean of the runs)" in shown
    finals = [float(np.mean([r["return"] for r in log[-10:]])) for log in logs]
    assert f"Mean return  {np.mean(finals):.2f} (last 10; mean of 2 seeds), 95% CI [{min(finals):.2f}, " in shown
    assert main(["experiment", "compare", "real", "--json", "--window", "10"]) == 0
    (group,) = json.loads(capsys.readouterr().out)
    assert group["final_mean_return"] == pytest.approx(np.mean(finals))
    assert [run["episodes"] for run in group["runs"]] == [len(log) for log in logs]
    assert main(["experiment", "plot", "-e", "real", "-o", str(project.root / "real.png")]) == 0
    assert (project.root / "real.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------- lifecycle of a group


def test_a_group_command_with_no_run_to_act_on_changes_nothing(root, capsys):
    err = bad(root, capsys, "experiment", "pause", "-e", "cp")
    assert "group 'cp': no run to pause (its runs are new)" in err
    for seed in range(4):
        set_status(root, f"cp-s{seed}", status="finished")
    err = bad(root, capsys, "experiment", "start", "-e", "cp")
    assert "group 'cp': no run to start (its runs are finished)" in err and "--resume" in err
    err = bad(root, capsys, "experiment", "start", "-e", "cp", "--resume")
    assert "group 'cp': no run to resume (its runs are finished)" in err
    assert "tfcli experiment start -e cp --resume -t N" in err
    err = bad(root, capsys, "experiment", "stop", "-e", "cp")
    assert "group 'cp': no run to stop (its runs are finished)" in err


def test_a_group_pause_with_nothing_to_pause_says_to_resume_only_what_was_paused(root, capsys):
    for seed in range(4):
        set_status(root, f"cp-s{seed}", status="finished")
    err = bad(root, capsys, "experiment", "pause", "-e", "cp")
    assert err.splitlines() == [
        "tfcli: group 'cp': no run to pause (its runs are finished)",
        "  Runs that are new, finished, failed or stopped have nothing to pause.",
    ]
    set_status(root, "cp-s1", status="paused")
    err = bad(root, capsys, "experiment", "pause", "-e", "cp")
    assert err.splitlines()[1] == "  Continue the paused ones with 'tfcli experiment start -e cp --resume'."


@pytest.mark.parametrize(
    "argv",
    [
        ("experiment", "evaluate", "-e", "cp"),
        ("experiment", "logs", "-e", "cp"),
        ("experiment", "new", "-n", "warm", *CHEAP, "--warm-start", "cp"),
    ],
)
def test_a_group_where_one_run_is_needed_is_said_to_be_a_group(root, capsys, argv):
    # was "no experiment named 'cp' ... Did you mean 'cp-s0'?", as if the group did not exist
    err = bad(root, capsys, *argv)
    assert "'cp' is a group of 4 runs, and this takes one experiment" in err, err
    assert "Give one of its runs: cp-s0, cp-s1, cp-s2, cp-s3." in err, err


@pytest.mark.parametrize(
    "cluster, cause",
    [
        ("ray_local", "runs on the Ray cluster 'ray_local', which this project has not created"),
        ("small_cluster", "runs on the GKE cluster 'small-cluster', but this project is not linked"),
    ],
)
def test_new_start_that_fails_keeps_the_experiment_and_names_a_command_that_works(root, capsys, cluster, cause):
    code = main(["experiment", "new", "-n", "q1", *CHEAP, "--cluster", cluster, "--start"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out.startswith("Created experiment 'q1' in experiments/q1")
    assert err.startswith(
        f"tfcli: experiment 'q1' was created and is kept, but it did not start: experiment 'q1' {cause}"
    )
    assert "'tfcli experiment start -e q1 -c local'" in err and "add -c local" not in err
    assert "give -c local" not in err
    assert Experiment.load(Project(root), "q1").record().status == "new"
    for command in re.findall(r"'tfcli ([^']*-c local)'", err):  # a command that tfcli takes
        build_parser().parse_args(command.split())


def test_new_start_of_a_group_tries_every_run_and_names_the_group_s_start(root, capsys):
    code = main(["experiment", "new", "-n", "q4", *CHEAP, "--cluster", "ray_local", "--seeds", "0-1", "--start"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out.startswith("Created group 'q4' of 2 runs (q4-s0, q4-s1; seeds 0-1)")
    message, hint = err.splitlines()
    assert message == (
        "tfcli: group 'q4' was created and is kept, but 2 of 2 runs did not start: q4-s0 (experiment 'q4-s0' runs "
        "on the Ray cluster 'ray_local', which this project has not created); q4-s1 (experiment 'q4-s1' runs on "
        "the Ray cluster 'ray_local', which this project has not created)"
    )
    assert hint == (
        "  Create it with 'tfcli cluster create -f ray_local', or run it here with 'tfcli experiment start -e q4 "
        "-c local'."
    )
    assert [Experiment.load(Project(root), f"q4-s{seed}").record().status for seed in (0, 1)] == ["new", "new"]


@pytest.mark.parametrize("flag", ["--follow", "--dry-run"])
def test_a_group_start_refuses_what_is_for_one_run(root, capsys, flag):
    err = bad(root, capsys, "experiment", "start", "-e", "cp", flag)
    assert f"'cp' is a group: {flag} is for one run" in err and "cp-s0, cp-s1, cp-s2, cp-s3" in err


def test_a_group_is_deleted_whole_or_not_at_all(root, capsys):
    with fake_worker(root / "experiments" / "cp-s2") as pid:
        set_status(root, "cp-s2", status="running", pid=pid)
        err = bad(root, capsys, "experiment", "delete", "-e", "cp")
        assert "group 'cp' has runs that are not over: cp-s2 (running); nothing was deleted" in err
        assert "tfcli experiment stop -e cp" in err
    set_status(root, "cp-s2", status="failed", pid=None)
    out = ok(capsys, "experiment", "delete", "-e", "cp")
    assert out.splitlines() == [f"Deleted experiment 'cp-s{seed}'" for seed in range(4)]
    assert [record.name for record in Project(root).store.experiments()] == ["solo", "taken-s1"]
    assert not any((root / "experiments" / f"cp-s{seed}").exists() for seed in range(4))


def test_a_run_of_a_group_that_fails_does_not_stop_the_others(root, capsys):
    set_status(root, "cp-s1", status="paused")  # neither has a checkpoint to resume from
    set_status(root, "cp-s3", status="stopped")
    code = main(["experiment", "start", "-e", "cp", "--resume"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out.splitlines() == [  # (a group paused while some runs were queued has new runs: they say how to start)
        f"'cp-s{seed}' is new: left alone (never started: 'tfcli experiment start -e cp' starts it)" for seed in (0, 2)
    ]
    assert err.startswith(
        "tfcli: group 'cp': 2 of 4 runs did not resume: cp-s1 (experiment 'cp-s1' has no checkpoint to resume "
        "from); cp-s3 (experiment 'cp-s3' has no checkpoint to resume from)"
    )


@pytest.mark.slow
def test_a_group_is_paused_resumed_and_trained_longer_as_one(project, capsys):
    argv = ["experiment", "new", "-n", "long", "-A", "ppo_cartpole", "-E", "cartpole", "-t", "2000", "-N", "2"]
    assert main([*argv, "--seeds", "0-1", "--start"]) == 0
    capsys.readouterr()
    runs = [Experiment.load(project, f"long-s{seed}") for seed in (0, 1)]
    assert [wait_until_done(run) for run in runs] == ["finished", "finished"]
    assert main(["experiment", "start", "-e", "long", "--resume", "-t", "60000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out] == ["Resumed 'long-s0'", "Resumed 'long-s1'"]
    assert main(["experiment", "pause", "-e", "long"]) == 0
    paused = capsys.readouterr().out.splitlines()
    assert [line.split(" at timestep")[0] for line in paused] == ["'long-s0' is paused", "'long-s1' is paused"]
    assert all(Experiment.load(project, run.name).checkpoint_timesteps() >= 2000 for run in runs)
    assert main(["experiment", "stop", "-e", "long"]) == 0  # paused runs end for good too
    stopped = capsys.readouterr().out.splitlines()
    assert [line.split(";")[0] for line in stopped] == ["'long-s0' is stopped", "'long-s1' is stopped"]
    assert main(["experiment", "start", "-e", "long", "--resume", "-t", "2000"]) == 2
    err = capsys.readouterr().err  # both are at 2,000 or past it: each run says so, none starts
    assert "group 'long': 2 of 2 runs did not resume" in err and err.count("is no more than the") == 2
    assert [Experiment.load(project, run.name).spec["total_timesteps"] for run in runs] == [60000, 60000]
    assert [run.record().status for run in runs] == ["stopped", "stopped"]


def test_a_group_download_fetches_every_run_that_has_results(root, capsys):
    for seed in (1, 3):
        set_status(root, f"cp-s{seed}", status="finished")
        episodes(root, f"cp-s{seed}", [1.0, 2.0])
    out = ok(capsys, "experiment", "download", "-e", "cp")
    assert out.splitlines()[0:2] == [
        "'cp-s0' is new: left alone",
        "Results of 'cp-s1' are in experiments/cp-s1/results (1 files, 0.0 MB)",
    ]
    assert out.splitlines()[2:] == [
        "'cp-s2' is new: left alone",
        "Results of 'cp-s3' are in experiments/cp-s3/results (1 files, 0.0 MB)",
    ]


def test_a_group_with_a_damaged_run_is_still_deleted_whole(root, capsys):
    spec_file = root / "experiments" / "cp-s2" / "experiment.json"
    spec_file.write_text(json.dumps({**json.loads(spec_file.read_text()), "total_timesteps": "many"}))
    out = ok(capsys, "experiment", "delete", "-e", "cp")
    assert out.splitlines() == [f"Deleted experiment 'cp-s{seed}'" for seed in (2, 0, 1, 3)]  # no seed: first
    assert [record.name for record in Project(root).store.experiments()] == ["solo", "taken-s1"]


@pytest.mark.slow
def test_a_group_pause_and_stop_take_its_queued_runs_out_of_the_queue_first(project, capsys):
    queue.set_max_parallel(project, 1)
    argv = ["experiment", "new", "-n", "busy", "-A", "ppo_cartpole", "-E", "cartpole", "-t", "500000"]
    assert main([*argv, "--seeds", "0-2", "--start"]) == 0
    capsys.readouterr()
    runs = [Experiment.load(project, f"busy-s{seed}") for seed in range(3)]
    wait_for(lambda: runs[0].progress().get("timesteps", 0) > 0, timeout=60, what="the first run")
    assert [run.record().status for run in runs] == ["running", "queued", "queued"]
    assert main(["experiment", "pause", "-e", "busy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["'busy-s1' left the queue; it is new again", "'busy-s2' left the queue; it is new again"]
    assert out[2].startswith("'busy-s0' is paused at timestep ")
    time.sleep(1.0)  # a slot freed by the pause would have started a queued run by now
    assert [run.record().status for run in runs] == ["paused", "new", "new"]

    assert main(["experiment", "start", "-e", "busy"]) == 0  # the ones not started: s1 runs, s2 waits
    capsys.readouterr()
    wait_for(lambda: runs[1].record().status == "running", timeout=60, what="the second run")
    assert [run.record().status for run in runs] == ["paused", "running", "queued"]
    assert main(["experiment", "stop", "-e", "busy", "--no-download"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "'busy-s2' left the queue; it is new again"
    assert [line.split(";")[0] for line in out[1:]] == ["'busy-s0' is stopped", "'busy-s1' is stopped"]
    time.sleep(1.0)
    assert [run.record().status for run in runs] == ["stopped", "stopped", "new"]
