"""Bad input to tfcli: each gets one clear message (a line, maybe a hint line), exit code 2, and no change on disk.

"No change" is checked on a snapshot of the whole project tree (paths and bytes; SQLite's -wal/-shm side files
left out) and of the state database's rows, taken before and after every bad call. Most calls go through
``cli.main`` in this process; a representative set runs the real ``tfcli`` as a subprocess.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.client.conftest import copied_project, fake_worker, template_project, tfcli
from torchforce.client import ClientError, Experiment, Project
from torchforce.client.cli import main
from torchforce.client.experiment_state import STARTING_SECONDS
from torchforce.client.store import Store

EXISTING = "alpha_run"
EPISODE = '{"episode": 1, "timesteps": 20, "worker": 0, "return": 20.0, "length": 20, "wall_time": 0.1}\n'
CHEAP = ["-A", "ppo_cartpole", "-E", "cartpole", "-t", "1100"]  # past the first update: no warning


# ---------------------------------------------------------------------------------------------- helpers


def snapshot(root: Path) -> tuple[dict[str, bytes | None], list[tuple] | None]:
    """Every path under ``root`` with its bytes (None for folders), and the state database's rows."""
    files = {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
        if not path.name.endswith(("-wal", "-shm"))
    }
    database = root / ".tfcli" / "state.db"
    rows = None
    if database.is_file():
        try:
            rows = [dataclasses.astuple(record) for record in Store(database).experiments()]
        except ClientError:
            rows = None  # a damaged database: its bytes are compared above
    return files, rows


def assert_clear_message(stderr: str) -> None:
    """One line saying what is wrong (``tfcli: ...``), at most one indented hint line, never a traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.rstrip("\n").split("\n")
    assert lines[0].startswith("tfcli: ") and len(lines[0]) > len("tfcli: ") + 10, stderr
    assert len(lines) <= 2, stderr
    if len(lines) == 2:
        assert lines[1].startswith("  ") and lines[1].strip(), stderr


def bad(root: Path, capsys: pytest.CaptureFixture, *argv: str) -> str:
    """Run ``tfcli argv`` in this process; check exit code 2, the message's form and that nothing changed."""
    before = snapshot(root)
    try:
        code = main(list(argv))
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert out == ""
    assert_clear_message(err)
    assert snapshot(root) == before, f"tfcli {' '.join(argv)} changed the project"
    return err


def bad_subprocess(root: Path, *argv: str) -> str:
    before = snapshot(root)
    result = tfcli(root, *argv)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert_clear_message(result.stderr)
    assert snapshot(root) == before, f"tfcli {' '.join(argv)} changed the project"
    return result.stderr


def set_status(root: Path, name: str, **values) -> None:
    assert Project(root).store.update_experiment(name, **values)


# ---------------------------------------------------------------------------------------------- projects


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with one experiment (built once), copied afresh for every test."""
    return template_project(tmp_path_factory, EXISTING, 1000)


@pytest.fixture
def root(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return copied_project(template, tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def cli_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project made by the real ``tfcli init``, with one experiment; for the subprocess tests."""
    root = tmp_path_factory.mktemp("cli") / "project"
    root.mkdir()
    assert tfcli(root, "init").returncode == 0
    project = Project(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        Experiment(
            project, name=EXISTING, agent="ppo_cartpole", environment="cartpole", total_timesteps=1000
        ).generate_locally()
    return root


# -------------------------------------------------------------------------------------------- missing, malformed files


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize(
    ("file", "content", "expected"),
    [
        ("missing.json", None, ["experiment.file: no experiment config named 'missing.json'", "Known: breakout_dqn"]),
        ("sub/missing.json", None, ["experiment.file: file not found: 'sub/missing.json'"]),
        ("truncated.json", '{"name": "x", "agent": ', ["malformed JSON at line 1, column 24", "truncated.json"]),
        ("trailing.json", '{"name": "x",}', ["malformed JSON at line 1, column 14", "trailing.json"]),
        ("broken.yaml", "name: [x\n", ["malformed YAML at line 2", "broken.yaml"]),
        ("list.json", "[1, 2]", ["experiment: not a dict; expected a JSON object, got [1, 2]"]),
        ("binary.json", b"\xff\xfe{}", ["not UTF-8 text: byte 0xff at offset 0", "binary.json"]),
        ("empty.json", "", ["malformed JSON at line 1, column 1", "empty.json"]),
    ],
)
def test_a_missing_or_malformed_experiment_file(root, capsys, file, content, expected):
    if content is not None:
        write(root / file, content)
    err = bad(root, capsys, "experiment", "new", "-f", file)
    for part in expected:
        assert part in err


def test_a_folder_given_as_a_file(root, capsys):
    (root / "specs.json").mkdir()
    err = bad(root, capsys, "experiment", "new", "-f", "specs.json")
    assert (
        "experiment.file: 'specs.json' is a folder, not a file; expected a file, or a name in configs/experiments/"
        in err
    )


def test_a_malformed_config_that_an_experiment_names(root, capsys):
    write(root / "configs" / "agents" / "mine.json", '{"type": "ppo",')
    err = bad(root, capsys, "experiment", "new", "-n", "fresh", "-A", "mine", "-E", "cartpole")
    assert err.startswith("tfcli: experiment.agent: malformed JSON at line 1, column 16")
    assert "configs/agents/mine.json" in err


def test_a_damaged_project_settings_file(root, capsys):
    write(root / ".tfcli" / "project.json", '{"name": ')
    err = bad(root, capsys, "experiment", "list")
    assert "project settings" in err and "project.json are damaged: malformed JSON" in err
    assert "tfcli init --force" in err


def test_a_damaged_state_database(root, capsys):
    write(root / ".tfcli" / "state.db", b"this is not a database, it was overwritten" * 100)
    err = bad(root, capsys, "experiment", "list")
    assert "the state database" in err and "state.db cannot be used: file is not a database" in err


def test_no_project_here(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    err = bad(tmp_path, capsys, "experiment", "list")
    assert "no tfcli project here" in err and "Run 'tfcli init'" in err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------- unknown config names


@pytest.mark.parametrize(
    ("flags", "expected", "guess"),
    [
        (
            ["-A", "ppo_cartpol", "-E", "cartpole"],
            "experiment.agent: no agent config named 'ppo_cartpol'",
            "ppo_cartpole",
        ),
        (
            ["-A", "ppo_cartpole", "-E", "cartpol"],
            "experiment.environment: no environment config named 'cartpol'",
            "cartpole",
        ),
        (
            ["-A", "ppo", "-E", "cartpole", "-M", "mlp2_netwrk"],
            "experiment.network: no network config named",
            "mlp2_network",
        ),
        (
            ["-A", "ppo_cartpole", "-E", "cartpole", "--cluster", "small_clustr"],
            "experiment.cluster: no cluster config",
            "small_cluster",
        ),
        (["-f", "cartpole_pp"], "experiment.file: no experiment config named 'cartpole_pp'", "cartpole_ppo"),
        (
            ["-A", "configs/agents/ppo_cartpol.json", "-E", "cartpole"],
            "file not found: 'configs/agents/ppo_cartpol.json'",
            "ppo_cartpole",
        ),
        (["-A", "", "-E", "cartpole"], "experiment.agent: an empty agent config name", None),
    ],
)
def test_an_unknown_config_name(root, capsys, flags, expected, guess):
    err = bad(root, capsys, "experiment", "new", "-n", "fresh", *flags)
    assert expected in err
    if guess:
        assert f"Did you mean '{guess}'?" in err


def test_an_unknown_config_name_inside_an_experiment_file_names_the_file(root, capsys):
    write(root / "mine.json", json.dumps({"name": "mine", "agent": "ppo_cartpol", "environment": "cartpole"}))
    err = bad(root, capsys, "experiment", "new", "-f", "mine.json")
    assert "experiment.agent: no agent config named 'ppo_cartpol'" in err and "(in mine.json)" in err
    assert "Did you mean 'ppo_cartpole'?" in err


def test_an_unknown_cluster_config(root, capsys):
    err = bad(root, capsys, "cluster", "create", "-f", "smal_cluster", "--dry-run")
    assert "cluster: no cluster config named 'smal_cluster'" in err and "Did you mean 'small_cluster'?" in err


def test_an_error_in_a_network_given_with_m_names_the_networks_file(root, capsys):
    err = bad(root, capsys, "experiment", "new", "-n", "fresh", "-A", "ppo", "-E", "cartpole", "-M", "cnn_dqn_network")
    assert err.startswith("tfcli: experiment.network[0]: layer 'conv2d' needs an input of shape")
    assert "(in configs/networks/cnn_dqn_network.json)" in err and "ppo.json" not in err


def test_an_unknown_gym_id_names_the_field_once(root, capsys):
    write(root / "configs" / "environments" / "typo.json", '{"type": "gym", "gym_id": "CartPol-v1"}')
    err = bad(root, capsys, "experiment", "new", "-n", "fresh", "-A", "ppo_cartpole", "-E", "typo")
    assert "tfcli: experiment.environment.gym_id: unknown Gymnasium id 'CartPol-v1'" in err
    assert "configs/environments/typo.json" in err and "Did you mean 'CartPole-v1'?" in err


# ---------------------------------------------------------------------------------------------- experiment names


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("MyRun", "Try 'myrun'."),
        ("my run", "Try 'my-run'."),
        ("../escape", "Try 'escape'."),
        ("a/b", "Try 'a-b'."),
        (".hidden", "Try 'hidden'."),
        ("a.b", "Try 'a-b'."),
        ("-lead", "Try 'lead'."),
        ("trail_", "Try 'trail'."),
        ("1st", "Try 'exp-1st'."),
        ("x" * 41, None),
        ("", None),
        ("ünïcode", None),
    ],
)
def test_an_invalid_experiment_name(root, capsys, name, hint):
    err = bad(root, capsys, "experiment", "new", f"--name={name}", *CHEAP)
    assert err.startswith("tfcli: experiment.name: not a valid experiment name; expected 1-40 lower-case letters")
    assert f"got {json.dumps(name)}" in err
    if hint:
        assert hint in err


def test_a_name_windows_reserves(root, capsys):
    err = bad(root, capsys, "experiment", "new", "-n", "con", *CHEAP)
    assert "experiment.name: not a valid experiment name: Windows reserves it for a device" in err


def test_a_name_from_a_file_that_is_not_a_string(root, capsys):
    write(root / "numbered.json", json.dumps({"name": 5, "agent": "ppo_cartpole", "environment": "cartpole"}))
    err = bad(root, capsys, "experiment", "new", "-f", "numbered.json")
    assert "experiment.name: not a valid experiment name" in err and "got 5 (in numbered.json)" in err


def test_a_name_that_is_taken(root, capsys):
    err = bad(root, capsys, "experiment", "new", "-n", EXISTING, *CHEAP)
    assert f"experiment '{EXISTING}' already exists" in err


def test_a_name_that_is_the_same_as_another_in_kubernetes(root, capsys):
    clash = EXISTING.replace("_", "-")
    err = bad(root, capsys, "experiment", "new", "-n", clash, *CHEAP)
    assert f"experiment name '{clash}' clashes with the existing '{EXISTING}'" in err
    assert list((root / "experiments").iterdir()) == [root / "experiments" / EXISTING]  # no staging folder left


# ---------------------------------------------------------------------------------------------- spec fields


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"totl_timesteps": 5},
            ["experiment.totl_timesteps: unknown experiment field", "Did you mean 'total_timesteps'?"],
        ),
        ({"saver_frequncy": "10e"}, ["experiment.saver_frequncy: unknown experiment field", "'saver_frequency'?"]),
        ({"summary_frequency": "10e"}, ["experiment.summary_frequency: summaries are written by time or by timesteps"]),
        ({"saver_frequency": "10m"}, ["experiment.saver_frequency: not a frequency", "write '600s'"]),
        ({"saver_frequency": "0t"}, ["experiment.saver_frequency: out of range"]),
        ({"timesteps": "lots"}, ['experiment.timesteps: not an integer; expected an integer >= 1, got "lots"']),
        (
            {"timesteps": 10, "total_timesteps": 20},
            [
                "experiment.timesteps: the 2018 name of total_timesteps, given together with a different",
                "total_timesteps (20); got 10",
            ],
        ),
        ({"run_mode": "singel"}, ["experiment.run_mode: unknown value", "Did you mean 'single'?"]),
        ({"deterministic": "yes"}, ['experiment.deterministic: not a boolean; expected true or false, got "yes"']),
        ({"type": "agent"}, ['experiment.type: not an experiment spec; expected "experiment", got "agent"']),
        ({"cluster": {"name": "c", "num_nodez": 2}}, ["experiment.cluster.num_nodez: unknown cluster field"]),
        ({"environment": 5}, ["experiment.environment: not a dict"]),
        (
            {"torch_threads": "all"},
            ['experiment.torch_threads: not an integer; expected an integer in [1, 256], got "all"'],
        ),
        (
            {"torch_threads": 1000},
            ["experiment.torch_threads: out of range; expected an integer in [1, 256], got 1000"],
        ),
        ({"seed": 2**64}, [f"experiment.seed: out of range; expected an integer in [0, 2^64 - 1], got {2**64}"]),
    ],
)
def test_a_bad_field_in_an_experiment_file(root, capsys, fields, expected):
    write(
        root / "spec.json", json.dumps({"name": "fresh", "agent": "ppo_cartpole", "environment": "cartpole", **fields})
    )
    err = bad(root, capsys, "experiment", "new", "-f", "spec.json")
    for part in expected:
        assert part in err
    assert "(in spec.json)" in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["-t", "0"], "experiment.total_timesteps: out of range; expected an integer >= 1, got 0."),
        (["-N", "0"], "experiment.num_environments: out of range; expected an integer >= 1, got 0."),
        (["--torch-threads", "0"], "experiment.torch_threads: out of range; expected an integer in [1, 256], got 0."),
        (
            ["--run-mode", "distributed", "--num-parameter-servers", "-1"],
            "experiment.num_parameter_servers: out of range; expected an integer >= 0",
        ),
        (
            ["--seed", "99999999999999999999"],  # the agent's range, blamed on the flag, not the agent config
            "experiment.seed: out of range; expected an integer in [0, 2^64 - 1], got 99999999999999999999.",
        ),
        (["--seed", "-1"], "experiment.seed: out of range; expected an integer >= 0, got -1."),
        (["-t", "many"], "tfcli: error: argument -t/--total-timesteps: invalid int value: 'many'"),
        (["--run-mode", "threads"], "tfcli: error: argument --run-mode: invalid choice: 'threads'"),
    ],
)
def test_a_bad_flag(root, capsys, flags, expected):
    err = bad(root, capsys, "experiment", "new", "-n", "fresh", *CHEAP, *flags)
    assert expected in err
    assert "(in " not in err  # flags are not a file


@pytest.mark.parametrize(
    ("flags", "expected", "hint"),
    [
        (
            ["--num-workers", "4"],
            "experiment.num_workers: workers are for the multi-threaded and distributed run modes, and this one is "
            "single; expected 1, got 4.",
            "Give --run-mode multi-threaded (or distributed) to run 4 workers, or leave out --num-workers.",
        ),
        (
            ["--num-parameter-servers", "2"],
            "experiment.num_parameter_servers: parameter servers are for the distributed run mode, and this one is "
            "single; expected 0, got 2.",
            "Give --run-mode distributed (with --num-workers), or leave out --num-parameter-servers.",
        ),
        (
            ["--run-mode", "multi-threaded", "--num-workers", "2", "--num-parameter-servers", "1"],
            "experiment.num_parameter_servers: parameter servers are for the distributed run mode, and this one is "
            "multi-threaded; expected 0, got 1.",
            "--run-mode distributed",
        ),
        (
            ["--run-mode", "multi-threaded", "-N", "4"],
            "experiment.num_environments: the multi-threaded run mode steps one environment per worker thread; "
            "expected 1, got 4.",
            "Give --num-workers 4 instead of -N 4",
        ),
        (  # the threads and the Ray workers step their environments themselves: the setting was stored, unused
            ["--run-mode", "multi-threaded", "--num-workers", "2", "--set", "vectorization=subprocess"],
            "experiment.vectorization: only the single run mode steps environments in subprocesses, and this one is "
            'multi-threaded (one environment per worker thread); expected sync, got "subprocess".',
            "Give --run-mode single (with -N) for environments stepped in subprocesses",
        ),
        (
            ["--run-mode", "distributed", "--num-workers", "2", "-N", "2", "--set", "vectorization=subprocess"],
            "experiment.vectorization: only the single run mode steps environments in subprocesses, and this one is "
            'distributed (each Ray worker\'s in turn); expected sync, got "subprocess".',
            "or leave out vectorization.",
        ),
    ],
)
def test_a_count_the_run_mode_would_ignore_is_refused(root, capsys, flags, expected, hint):
    err = bad(root, capsys, "experiment", "new", "-n", "fresh", *CHEAP, *flags)
    assert err.splitlines()[0] == f"tfcli: {expected}"
    assert hint in err.splitlines()[1]
    assert not (root / "experiments" / "fresh").exists()


def test_the_counts_each_run_mode_uses_are_kept(root, capsys):
    threads = ["--run-mode", "multi-threaded", "--num-workers", "3", "-N", "1", "--set", "vectorization=sync"]
    spread = ["--run-mode", "distributed", "--num-workers", "2", "--num-parameter-servers", "2", "-N", "3"]
    one = ["-N", "4", "--num-workers", "1", "--set", "vectorization=subprocess"]
    for name, flags in (("threads", threads), ("spread", spread), ("one", one)):
        assert main(["experiment", "new", "-n", name, *CHEAP, *flags]) == 0, capsys.readouterr().err
    counts = {
        name: tuple(Experiment.load(Project(root), name).spec[key] for key in ("num_workers", "num_parameter_servers"))
        for name in ("threads", "spread", "one")
    }
    assert counts == {"threads": (3, 0), "spread": (2, 2), "one": (1, 0)}


def test_an_agent_that_learns_nothing_in_the_distributed_mode(root, capsys):
    write(root / "random.json", json.dumps({"type": "random"}))
    err = bad(
        root,
        capsys,
        "experiment",
        "new",
        "-n",
        "fresh",
        "-A",
        "random.json",
        "-E",
        "cartpole",
        "--run-mode",
        "distributed",
    )
    assert "experiment.run_mode: a distributed run trains one model on parameter servers, and a random agent" in err
    assert not (root / "experiments" / "fresh").exists()


def test_a_missing_name_or_agent(root, capsys):
    assert "experiment.name: an experiment needs a name" in bad(root, capsys, "experiment", "new", *CHEAP)
    err = bad(root, capsys, "experiment", "new", "-n", "fresh", "-E", "cartpole")
    assert "experiment.agent: an experiment needs an agent" in err and "-A/--agent" in err


# ---------------------------------------------------------------------------------------------- unknown experiments


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment", "start", "-e"],
        ["experiment", "start", "--resume", "-e"],
        ["experiment", "pause", "-e"],
        ["experiment", "stop", "-e"],
        ["experiment", "download", "-e"],
        ["experiment", "show", "-e"],
        ["experiment", "logs", "-e"],
        ["experiment", "watch", "-e"],
        ["experiment", "plot", "-e"],
        ["experiment", "compare"],
        ["experiment", "delete", "-e"],
    ],
)
def test_an_unknown_experiment(root, capsys, argv):
    err = bad(root, capsys, *argv, "alpha_rn")
    assert f"tfcli: no experiment named 'alpha_rn' in project '{Project(root).name}'" in err
    assert f"Did you mean '{EXISTING}'?" in err


def test_an_unknown_experiment_among_known_ones(root, capsys):
    assert "no experiment named 'beta'" in bad(root, capsys, "experiment", "compare", EXISTING, "beta")
    assert "no experiment named 'beta'" in bad(root, capsys, "experiment", "compare", "-e", EXISTING, "beta")


def test_compare_takes_its_names_with_or_without_e_and_needs_one(root, capsys):
    def compared(*argv: str) -> list:
        code = main(["experiment", "compare", *argv, "--json"])
        out, err = capsys.readouterr()
        assert code == 0 and err == "", (out, err)
        return json.loads(out)

    with_e = compared("-e", EXISTING)
    assert compared(EXISTING) == with_e
    assert [row["name"] for row in with_e] == [EXISTING]
    err = bad(root, capsys, "experiment", "compare")
    assert "compare needs the experiments or groups to compare" in err and "-e NAME" in err


# ---------------------------------------------------------------------------------------------- wrong states


def test_starting_a_running_experiment(root, capsys):
    with fake_worker(root / "experiments" / EXISTING) as pid:
        set_status(root, EXISTING, status="running", pid=pid)
        for argv in (["start"], ["start", "--resume"], ["start", "--fresh"], ["delete"]):
            err = bad(root, capsys, "experiment", *argv, "-e", EXISTING)
            assert f"experiment '{EXISTING}' is" in err and "running" in err
        err = bad(root, capsys, "experiment", "start", "-e", EXISTING)
        assert f"experiment '{EXISTING}' is already running (PID {pid})" in err
        assert f"tfcli experiment pause -e {EXISTING}" in err


@pytest.mark.parametrize("inside", ["results/worker.log", "results/summaries", "results"])
def test_a_symbolic_link_in_the_experiments_folder_is_refused_before_a_start(root, capsys, tmp_path, inside):
    """An experiment folder copied from someone else held results/worker.log as a link to a file of this user's:
    the start appended its log there (and a linked folder took the run's summaries or results). Refused, with
    nothing written through the link."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("precious")
    link = root / "experiments" / EXISTING / inside
    if link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim / "notes.txt" if inside.endswith(".log") else victim)
    for argv in (["start"], ["start", "--fresh"]):
        err = bad(root, capsys, "experiment", *argv, "-e", EXISTING)
        assert err.startswith(f"tfcli: experiment '{EXISTING}' holds a symbolic link, {inside} -> {victim}"), err
        assert f"rm {link}" in err
    assert sorted(path.name for path in victim.iterdir()) == ["notes.txt"]
    assert (victim / "notes.txt").read_text() == "precious"


@pytest.mark.parametrize("status", ["paused", "new", "failed", "stopped"])
def test_resuming_an_experiment_with_no_checkpoint(root, capsys, status):
    if status != "new":
        set_status(root, EXISTING, status=status)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--resume")
    assert f"experiment '{EXISTING}' has no checkpoint to resume from" in err


def test_resuming_a_finished_experiment(root, capsys):
    set_status(root, EXISTING, status="finished")
    err = bad(root, capsys, "experiment", "start", "--resume", "-e", EXISTING)
    assert "has finished; there is nothing to resume" in err
    assert f"tfcli experiment start -e {EXISTING} --resume -t N" in err


def finished_with_a_checkpoint(root: Path, timesteps: int = 1000, episodes: int = 40) -> None:
    """EXISTING as a run that ended at its budget, its latest checkpoint's pointer at ``timesteps``."""
    pointer = root / "experiments" / EXISTING / "results" / "checkpoints" / "latest.json"
    pointer.parent.mkdir(parents=True)
    pointer.write_text(json.dumps({"timesteps": timesteps, "episodes": episodes, "folder": "checkpoint-1000"}))
    set_status(root, EXISTING, status="finished")


def test_a_new_budget_does_not_start_a_run_over(root, capsys):
    finished_with_a_checkpoint(root)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "-t", "5000")
    assert f"experiment '{EXISTING}' has already run (status: finished)" in err
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--resume", "--fresh", "-t", "5000")
    assert "--resume and --fresh contradict each other" in err


@pytest.mark.parametrize("flags", [["--fresh"], ["--resume"]])
@pytest.mark.parametrize("total", ["0", "-5"])
def test_a_new_budget_is_checked_as_the_spec_field_it_sets(root, capsys, flags, total):
    finished_with_a_checkpoint(root)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, *flags, "-t", total)
    assert f"experiment.total_timesteps: out of range; expected an integer >= 1, got {total}" in err


@pytest.mark.parametrize("total", ["1000", "999"])
def test_a_new_budget_must_lie_beyond_the_checkpoint(root, capsys, total):
    finished_with_a_checkpoint(root)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--resume", "-t", total)
    assert f"-t/--total-timesteps: {int(total):,} is no more than the 1,000 timesteps of the latest checkpoint" in err
    assert "expected more than 1,000" in err


def test_more_episodes_alone_do_not_lift_a_spent_timestep_budget(root, capsys):
    finished_with_a_checkpoint(root)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--resume", "--episodes", "500")
    assert f"experiment '{EXISTING}' reached its budget of 1,000 timesteps (total_timesteps)" in err
    assert "Give -t/--total-timesteps too, more than 1,000." in err


@pytest.mark.parametrize("status", ["new", "stopped"])
def test_a_new_budget_without_a_checkpoint(root, capsys, status):
    set_status(root, EXISTING, status=status)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--resume", "-t", "5000")
    assert f"experiment '{EXISTING}' has no checkpoint to resume from" in err


def test_a_start_with_a_new_budget_that_fails_leaves_the_budget_as_it_was(root, capsys):
    # the budget is sound, so it is written; the start then fails on the cluster, and the spec goes back
    finished_with_a_checkpoint(root)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--resume", "-t", "5000", "-c", "nowhere")
    assert "nowhere" in err
    assert json.loads((root / "experiments" / EXISTING / "experiment.json").read_text())["total_timesteps"] == 1000


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["start", "--resume", "--fresh"], "--resume and --fresh contradict each other"),
        (
            ["start", "-c", "small_cluster"],
            "configs/clusters/ has a gke spec of that name, but no such cluster was created",
        ),
        (["pause"], f"experiment '{EXISTING}' is not running (status: new)"),
        (["download"], f"experiment '{EXISTING}' has no results yet"),
        (["logs"], f"experiment '{EXISTING}' has no log yet"),
        (["plot"], f"no finished episodes yet in {EXISTING}"),
        (["watch"], f"experiment '{EXISTING}' has not been started, so there is nothing to watch"),
    ],
)
def test_a_command_that_does_not_fit_the_state(root, capsys, argv, expected):
    assert expected in bad(root, capsys, "experiment", *argv, "-e", EXISTING)


def fake_checkpoint(root: Path, timesteps: int = 500) -> None:
    checkpoints = root / "experiments" / EXISTING / "results" / "checkpoints"
    write(checkpoints / "latest.json", json.dumps({"timesteps": timesteps, "episodes": 3, "folder": "x"}))


@pytest.mark.parametrize(
    ("status", "checkpoint", "resumable"),
    [("paused", True, True), ("failed", True, True), ("paused", False, False), ("finished", True, False)],
)
def test_starting_again_without_resume_or_fresh(root, capsys, status, checkpoint, resumable):
    set_status(root, EXISTING, status=status)
    if checkpoint:
        fake_checkpoint(root)
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING)
    assert f"has already run (status: {status})" in err and "--fresh" in err
    assert ("--resume" in err) == resumable  # never suggested where it would be refused


def test_a_run_mode_a_backend_lacks(root, capsys, monkeypatch):
    from torchforce.client.backends.local import LocalBackend

    monkeypatch.setattr(LocalBackend, "supported_run_modes", ("single",))  # as a backend with fewer modes would be
    spec = json.loads((root / "experiments" / EXISTING / "experiment.json").read_text())
    distributed = {**spec, "run_mode": "distributed", "num_parameter_servers": 1}
    write(root / "experiments" / EXISTING / "experiment.json", json.dumps(distributed))
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING)
    assert "run mode 'distributed' is not available yet on the local backend" in err


def test_stopping_an_experiment_that_never_started(root, capsys):
    err = bad(root, capsys, "experiment", "stop", "-e", EXISTING)
    assert f"experiment '{EXISTING}' has not been started; there is nothing to stop" in err
    assert f"tfcli experiment delete -e {EXISTING}" in err


# ---------------------------------------------------------------------------------------------- workers starting, dying


def test_a_status_check_while_a_worker_starts_does_not_mark_it_failed(root, capsys):
    # Experiment.start marks the row running, launches the worker, then writes its PID: in between, a check
    # (list, show, another start) must take the worker for starting, not dead.
    set_status(root, EXISTING, status="running", pid=None, started_at=time.time())
    experiment = Experiment.load(Project(root), EXISTING)
    assert experiment.record().status == "running"
    assert main(["experiment", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "running"
    err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--fresh")
    assert "is already running (its worker is starting)" in err
    # a start whose tfcli call died before it wrote the PID is judged once the grace period is over
    set_status(root, EXISTING, started_at=time.time() - STARTING_SECONDS - 1)
    record = experiment.record()
    assert record.status == "failed" and record.message.startswith("the worker died")


def test_an_ended_run_whose_cluster_cannot_say_how_stays_running_until_it_can(root, monkeypatch):
    # a cluster's dashboard (or Kubernetes API) silent for a moment between "it ended" and "how": nothing is judged
    from torchforce.client.backends.local import LocalBackend

    def silent(self, handle, folder):
        raise ClientError("the Ray cluster 'lab' at http://127.0.0.1:8265 did not answer just now")

    set_status(root, EXISTING, status="running", pid=None, started_at=time.time() - STARTING_SECONDS - 1)
    experiment = Experiment.load(Project(root), EXISTING)
    with monkeypatch.context() as patch:
        patch.setattr(LocalBackend, "outcome", silent)
        assert experiment.record().status == "running"
    assert experiment.record().status == "failed"  # once it answers


def test_a_local_run_whose_end_missed_the_database_ends_as_its_progress_says(root):
    # the worker wrote "finished" to its progress file, then its write to the database failed (or it was killed)
    started = time.time() - STARTING_SECONDS - 10
    results = root / "experiments" / EXISTING / "results"
    write(results / "progress.json", json.dumps({"state": "finished", "updated_at": started + 5}))
    set_status(root, EXISTING, status="running", pid=None, started_at=started)
    record = Experiment.load(Project(root), EXISTING).record()
    assert (record.status, record.message) == ("finished", None)
    # a final state from before this run's start is an earlier run's: this one died before its first write
    write(results / "progress.json", json.dumps({"state": "paused", "updated_at": started - 60}))
    set_status(root, EXISTING, status="running", pid=None, started_at=started, message=None)
    assert Experiment.load(Project(root), EXISTING).record().status == "failed"


def test_the_worker_pid_is_written_only_onto_the_starting_row(root):
    store = Project(root).store
    set_status(root, EXISTING, status="running", pid=None, started_at=time.time())
    assert store.update_experiment(EXISTING, expect=("running",), expect_pid=None, pid=4242)
    # a checker that read "no PID" before the PID was written cannot mark the worker failed afterwards
    assert not store.update_experiment(EXISTING, expect=("running",), expect_pid=None, status="failed")
    assert store.experiment(EXISTING).status == "running"


def test_a_live_worker_wrongly_marked_failed_while_starting_is_running_again(root):
    from torchforce.client.backends import get_backend

    experiment = Experiment.load(Project(root), EXISTING)
    with fake_worker(root / "experiments" / EXISTING) as pid:
        set_status(root, EXISTING, status="failed", pid=None, message="the worker died")
        experiment._record_handle(pid, get_backend("local"))
        record = Project(root).store.experiment(EXISTING)
        assert (record.status, record.pid, record.message) == ("running", pid, None)
    set_status(root, EXISTING, status="finished", pid=None)  # a worker that ended by itself: its status stands
    experiment._record_handle(pid, get_backend("local"))
    assert Project(root).store.experiment(EXISTING).status == "finished"


def test_start_fresh_never_deletes_results_under_a_live_worker(root, capsys):
    results = root / "experiments" / EXISTING / "results"
    write(results / "episodes.jsonl", '{"episode": 1}\n')
    with fake_worker(root / "experiments" / EXISTING) as pid:
        write(results / "progress.json", json.dumps({"pid": pid, "timesteps": 10}))
        set_status(root, EXISTING, status="failed", pid=None)  # whatever the status says
        err = bad(root, capsys, "experiment", "start", "-e", EXISTING, "--fresh")
        assert f"a worker of experiment '{EXISTING}' is still running (PID {pid}), though its status is" in err
        assert f"kill {pid}" in err
    assert (results / "episodes.jsonl").is_file()


@pytest.mark.parametrize("command", ["delete", "stop"])
def test_delete_or_stop_never_leaves_a_live_worker_the_row_lost(root, capsys, command):
    # a supervisor killed with kill -9 leaves its worker running and the row failed: deleting its folder under it,
    # or marking it stopped while it runs on, loses track of it
    results = root / "experiments" / EXISTING / "results"
    with fake_worker(root / "experiments" / EXISTING) as pid:
        write(results / "progress.json", json.dumps({"pid": pid, "timesteps": 10}))
        set_status(root, EXISTING, status="failed", pid=None, message="the worker died")
        err = bad(root, capsys, "experiment", command, "-e", EXISTING)
        assert f"a worker of experiment '{EXISTING}' is still running (PID {pid})" in err and f"kill {pid}" in err
    assert (results / "progress.json").is_file() and Project(root).store.experiment(EXISTING).status == "failed"


def test_delete_waits_a_moment_for_a_finished_runs_worker_to_exit(root, capsys):
    """A worker writes 'finished', then closes its environments and its interpreter: a delete right after 'watch'
    said finished waits for it to exit (up to EXITING_SECONDS) instead of calling it a live worker."""
    results = root / "experiments" / EXISTING / "results"
    with fake_worker(root / "experiments" / EXISTING, script="import time; time.sleep(1.5)") as pid:
        write(results / "progress.json", json.dumps({"pid": pid, "timesteps": 10}))
        set_status(root, EXISTING, status="finished", pid=pid)
        assert main(["experiment", "delete", "-e", EXISTING]) == 0, capsys.readouterr().err
    assert not (root / "experiments" / EXISTING).exists() and Project(root).store.experiment(EXISTING) is None


@pytest.mark.parametrize("command", ["pause", "stop"])
def test_pause_or_stop_fails_clearly_when_the_worker_dies_instead(root, capsys, command):
    # A process that the signal (SIGUSR1, SIGTERM) kills, as it killed a worker whose handlers were not installed.
    with fake_worker(root / "experiments" / EXISTING) as pid:
        set_status(root, EXISTING, status="running", pid=pid, started_at=time.time())
        code = main(["experiment", command, "-e", EXISTING])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (out, err)
    assert_clear_message(err)
    assert err.startswith(f"tfcli: experiment '{EXISTING}' did not {command}: it is failed (the worker died")
    assert Project(root).store.experiment(EXISTING).status == "failed"


# ---------------------------------------------------------------------------------------------- damaged experiments


def test_an_experiment_whose_folder_was_removed(root, capsys):
    shutil.rmtree(root / "experiments" / EXISTING)
    for argv in (["show"], ["start"], ["logs"], ["pause"]):
        err = bad(root, capsys, "experiment", *argv, "-e", EXISTING)
        assert f"the folder of experiment '{EXISTING}' is missing: no experiments/{EXISTING}/experiment.json" in err
        assert f"tfcli experiment delete -e {EXISTING}" in err and "Did you mean" not in err
    err = bad(root, capsys, "experiment", "new", "-n", EXISTING, *CHEAP)
    assert f"experiment '{EXISTING}' already exists, though its folder experiments/{EXISTING} is missing" in err
    assert f"tfcli experiment delete -e {EXISTING}" in err
    assert main(["experiment", "delete", "-e", EXISTING]) == 0
    assert f"Deleted experiment '{EXISTING}'" in capsys.readouterr().out
    assert Project(root).store.experiment(EXISTING) is None
    assert main(["experiment", "new", "-n", EXISTING, *CHEAP]) == 0


def test_a_folder_the_project_does_not_know(root, capsys):
    shutil.copytree(root / "experiments" / EXISTING, root / "experiments" / "stray")
    err = bad(root, capsys, "experiment", "show", "-e", "stray")
    assert "no experiment named 'stray'" in err and "experiments/stray exists, but the project's state database" in err
    err = bad(root, capsys, "experiment", "new", "-n", "stray", *CHEAP)
    assert "experiment 'stray' already exists (experiments/stray)" in err and "move the folder" in err


def _edit_spec(root: Path, change) -> None:
    path = root / "experiments" / EXISTING / "experiment.json"
    spec = json.loads(path.read_text())
    write(path, change(spec) if callable(change) else change)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda spec: json.dumps({k: v for k, v in spec.items() if k != "agent"}), "experiment.agent: an experiment"),
        (lambda spec: json.dumps({**spec, "total_timesteps": "many"}), "experiment.total_timesteps: not an integer"),
        (lambda spec: json.dumps({**spec, "agent": 7}), "experiment.agent: not a dict"),
        (lambda spec: json.dumps({**spec, "seeed": 1}), "experiment.seeed: unknown experiment field"),
        (lambda spec: json.dumps({**spec, "name": "other"}), "experiment.name: the stored spec names another"),
        (lambda spec: json.dumps([spec]), "experiment: not a dict"),
        ('{"name": ', "malformed JSON at line 1, column 10"),
    ],
)
def test_a_damaged_stored_spec_is_a_clean_error_naming_the_file(root, capsys, change, expected):
    _edit_spec(root, change)
    for argv in (["show"], ["start"], ["start", "--fresh"], ["plot"]):
        err = bad(root, capsys, "experiment", *argv, "-e", EXISTING)
        assert err.startswith("tfcli: " + expected), err
        assert f"(in experiments/{EXISTING}/experiment.json)" in err
    assert main(["experiment", "list", "--json"]) == 0
    assert "is unreadable" in json.loads(capsys.readouterr().out)[0]["message"]
    assert main(["experiment", "delete", "-e", EXISTING]) == 0  # a damaged experiment can still be removed
    assert not (root / "experiments" / EXISTING).exists()


def test_init_refuses_to_rename_without_force_and_writes_nothing(root, capsys):
    (root / "configs" / "agents" / "dqn.json").unlink()  # init would put it back: it must not, when it refuses
    err = bad(root, capsys, "init", "-n", "other")
    assert "is already a project named 'project'" in err and "--force" in err


def test_a_bad_plot_window_or_output_folder(root, capsys):
    write(root / "experiments" / EXISTING / "results" / "episodes.jsonl", EPISODE)
    for window in ("0", "-3", "many"):
        err = bad(root, capsys, "experiment", "plot", "-e", EXISTING, "--window", window)
        assert "argument --window: expected a whole number >= 1, got " in err and window in err
    err = bad(root, capsys, "experiment", "plot", "-e", EXISTING, "-o", "no/such/folder/curves.png")
    assert "the folder of the plot 'no/such/folder/curves.png' does not exist" in err and "mkdir -p" in err
    assert not (root / "no").exists()


def test_piping_into_a_reader_that_goes_away_ends_quietly(cli_project):
    read, write_end = os.pipe()
    os.close(read)  # the reader is gone before tfcli writes: like 'tfcli experiment list --json | head -0'
    try:
        result = subprocess.run(
            [sys.executable, "-m", "torchforce", "experiment", "list", "--json"],
            cwd=cli_project,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.stderr == "" and result.returncode == 141


def test_usage_errors(root, capsys):
    assert "the following arguments are required: -e/--experiment" in bad(root, capsys, "experiment", "start")
    assert "invalid choice: 'strat'" in bad(root, capsys, "experiment", "strat", "-e", EXISTING)
    assert "unrecognized arguments: --bogus" in bad(root, capsys, "experiment", "list", "--bogus")


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment", "new", "-n", "q5", *CHEAP, "--fresh"],
        ["experiment", "list", "--bogus"],
        ["experiment", "start", "-e", EXISTING, "extra"],
        ["cluster", "create", "-f", "ray_local", "--bogus"],
        ["experiment", "--bogus"],
    ],
)
def test_an_unknown_argument_points_at_the_help_of_its_command(root, capsys, argv):
    err = bad(root, capsys, *argv)
    command = " ".join(word for word in argv[:2] if not word.startswith("-"))
    assert "unrecognized arguments: " in err
    assert err.endswith(f"See 'tfcli {command} --help'.\n")


def test_cluster_create_help_says_the_name_rule_that_its_error_says(root, capsys):
    err = bad(root, capsys, "cluster", "create", "-f", "ray_local", "-n", "MyRay")
    rule = re.search(r"expected (.*), got \"MyRay\"", err)[1]
    with pytest.raises(SystemExit):
        main(["cluster", "create", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"the cluster's name: {rule}" in help_text


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["-f", "ray_local", "-n", "r2", "--gpus", "2"], "--gpus is not a setting of a ray cluster"),
        (["-f", "ray_local", "--zone", "europe-west1-b"], "--zone is not a setting of a ray cluster"),  # not --location
        (["-f", "ray_local", "-s", "2"], "-s/--size is not a setting of a ray cluster"),  # not --num-nodes
        (["-n", "g1", "--storage", "/tmp/results"], "--storage is not a setting of a gke cluster"),
        # a file without a type is a GKE cluster's: a Ray flag beside it made it a Ray one ('num_nodes' unknown)
        (["-f", "small_cluster", "--cpus", "2"], "--cpus is not a setting of a gke cluster"),
    ],
)
def test_cluster_create_names_a_flag_of_the_other_kind_as_the_user_typed_it(root, capsys, flags, named):
    """'cluster create -f ray_local --gpus 2' said '--gpus-per-node is not a setting of a ray cluster': the spec's
    key, a flag that does not exist. The error names the flag the user gave, and the hint the flags that fit."""
    err = bad(root, capsys, "cluster", "create", *flags, "--dry-run")
    takes = {
        "ray": "--address, --nodes, --cpus, --storage",
        "gke": "-s/--size, -m/--machine-type, --disk-size, --zone, --gpus, --gpu-type, --spot",
    }
    kind = named.rsplit(" ", 2)[-2]
    assert err.splitlines() == [f"tfcli: {named}", f"  A {kind} cluster takes {takes[kind]}."]


# ---------------------------------------------------------------------------------------------- the real command line


def test_bad_input_through_the_real_command_line(cli_project):
    root = cli_project
    write(root / "truncated.json", '{"name": "x", ')
    err = bad_subprocess(root, "experiment", "new", "-f", "truncated.json")
    assert "malformed JSON at line 1, column 15" in err and "truncated.json" in err
    err = bad_subprocess(root, "experiment", "new", "-n", "fresh", "-A", "ppo_cartpol", "-E", "cartpole")
    assert "experiment.agent: no agent config named 'ppo_cartpol'" in err and "Did you mean 'ppo_cartpole'?" in err
    err = bad_subprocess(root, "experiment", "new", "-n", "Fresh Run", *CHEAP)
    assert "experiment.name: not a valid experiment name" in err and "Try 'fresh-run'." in err
    err = bad_subprocess(root, "experiment", "show", "-e", "alpha")
    assert "no experiment named 'alpha'" in err and f"Did you mean '{EXISTING}'?" in err
    err = bad_subprocess(root, "experiment", "start", "-e", EXISTING, "--resume")
    assert "has no checkpoint to resume from" in err
    with fake_worker(root / "experiments" / EXISTING) as pid:
        set_status(root, EXISTING, status="running", pid=pid)
        try:
            err = bad_subprocess(root, "experiment", "start", "-e", EXISTING)
            assert f"is already running (PID {pid})" in err
        finally:
            set_status(root, EXISTING, status="new", pid=None)


def test_debug_shows_the_traceback_before_or_after_the_command(cli_project):
    plain = tfcli(cli_project, "experiment", "show", "-e", "nope")
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    for argv in (["--debug", "experiment", "show", "-e", "nope"], ["experiment", "show", "-e", "nope", "--debug"]):
        debug = tfcli(cli_project, *argv)
        assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr
        assert debug.stderr.rstrip().endswith("Known: alpha_run.")


def test_an_unexpected_failure_is_one_line_with_exit_code_1(root, capsys, monkeypatch):
    from torchforce.client import commands

    def broken(args):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(commands.HANDLERS, ("experiment", "list"), broken)
    assert main(["experiment", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tfcli: unexpected error: RuntimeError: disk on fire") and "Traceback" not in err
    assert "--debug" in err
