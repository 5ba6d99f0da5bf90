"""Damaged files and lost data (issue 7, "Hardening"): a damaged progress file or episode log, a YAML alias bomb or a
too deeply nested spec, a database locked by another process, a lost state database, and names and shapes that no
project can hold. Each gets a clear answer (a view that survives, or one error block with exit code 2) and leaves
the project as it was.

Commands run through ``cli.main`` in this process; what could hang or eat memory on a regression runs in a
subprocess with a time and memory limit instead.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.client.conftest import copied_project, fake_worker, template_project, wait_until_done
from torchforce.client import ClientError, Experiment, Project
from torchforce.client import store as store_module
from torchforce.client.cli import main
from torchforce.client.experiment_run import ExperimentRun
from torchforce.client.store import Store

FIRST, SECOND = "alpha", "beta"
EPISODE = {"episode": 1, "timesteps": 20, "worker": 0, "return": 20.0, "length": 20, "wall_time": 0.1}


# ---------------------------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with two experiments (the agent built once), copied afresh for every test."""
    root = template_project(tmp_path_factory, FIRST, 2000)
    spec = json.loads((root / "experiments" / FIRST / "experiment.json").read_text())
    (root / "experiments" / SECOND).mkdir()
    (root / "experiments" / SECOND / "experiment.json").write_text(json.dumps({**spec, "name": SECOND}))
    Project(root).store.add_experiment(SECOND)
    return root


@pytest.fixture
def root(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return copied_project(template, tmp_path, monkeypatch)


def rows(root: Path) -> list[tuple] | None:
    database = root / ".tfcli" / "state.db"
    if not database.is_file():
        return None
    try:
        return [dataclasses.astuple(record) for record in Store(database).experiments()]
    except ClientError:
        return None


def snapshot(root: Path) -> tuple[dict[str, bytes | None], list[tuple] | None]:
    """Every path under ``root`` with its bytes (None for folders; the database by its rows), and the rows."""
    files = {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
        if not path.name.startswith("state.db")
    }
    return files, rows(root)


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture, *argv: str) -> tuple[str, str]:
    code, out, err = run(capsys, *argv)
    assert code == 0, (out, err)
    assert "unexpected error" not in err and "Traceback" not in err, err
    return out, err


def bad(root: Path, capsys: pytest.CaptureFixture, *argv: str) -> str:
    """``tfcli argv`` must fail with one clear block (exit code 2, no traceback) and change nothing."""
    before = snapshot(root)
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert out == "" and "Traceback" not in err and "unexpected error" not in err, err
    lines = err.rstrip("\n").split("\n")
    assert lines[0].startswith("tfcli: ") and len(lines) <= 2, err
    assert snapshot(root) == before, f"tfcli {' '.join(argv)} changed the project"
    return err


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def limited_python(code: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with at most 2 GiB of memory: a regression fails instead of hanging."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=limit
    )


# ---------------------------------------------------------------------------------------------- 1. progress.json


@pytest.mark.parametrize(
    ("content", "damaged"),
    [
        ("garbage{", "all"),
        ('{"timesteps": 1200, "episodes": 3', "all"),  # truncated
        ('{"timesteps": "a lot", "episodes": 3}', ["timesteps"]),
        ("[1, 2]", "all"),
        ('{"timesteps": 500, "mean_return_100": "x", "steps_per_second": [1], "elapsed_seconds": {}}', None),
        ('{"timesteps": -5, "episodes": true}', ["timesteps", "episodes"]),
        ("[" * 100_000 + "]" * 100_000, "all"),  # nested past the JSON parser's depth
    ],
)
def test_a_damaged_progress_file_shows_question_marks_and_every_view_survives(root, capsys, content, damaged):
    write(root / "experiments" / FIRST / "results" / "progress.json", content)
    out, _ = ok(capsys, "experiment", "list")
    first, second = (line for line in out.splitlines() if line.startswith((FIRST, SECOND)))
    assert "?" in first and "?" not in second and "0%" in second
    listed = json.loads(ok(capsys, "experiment", "list", "--json")[0])
    assert listed[1]["progress_damaged"] == []
    if damaged == "all":
        assert listed[0]["progress"] is None and listed[0]["timesteps"] is None
    elif damaged:
        assert set(damaged) <= set(listed[0]["progress_damaged"])
        assert all(listed[0][field] is None for field in damaged)
    else:
        assert listed[0]["timesteps"] == 500 and listed[0]["mean_return_100"] is None
        assert {"mean_return_100", "steps_per_second", "elapsed_seconds"} <= set(listed[0]["progress_damaged"])
    shown, _ = ok(capsys, "experiment", "show", "-e", FIRST)
    assert "Damaged      experiments/alpha/results/progress.json" in shown
    ok(capsys, "experiment", "show", "-e", FIRST, "--json")


def strict_json(text: str) -> object:
    """``text`` parsed as strict JSON, which has no NaN or Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_diverged_runs_progress_shows_nan_returns_not_damage(root, capsys):
    progress = root / "experiments" / FIRST / "results" / "progress.json"
    (root / "experiments" / FIRST / "results" / "episodes.jsonl").unlink(missing_ok=True)  # the progress file alone
    # the worker writes a NaN return as null, which strict JSON parsers read
    run = ExperimentRun(root / "experiments" / FIRST, resume=False)
    run.runner, run.threaded = SimpleNamespace(global_timestep=60, global_episode=3), False
    run.recent.extend([20.0, math.nan, 12.0])
    run.write_progress("running", force=True)
    written = strict_json(progress.read_text())
    assert written["mean_return_100"] is None and written["last_return"] == 12.0
    # it reads as NaN: shown as nan, not as damage; so does a bare NaN (Python's json writes it) or an infinity
    for returns in ({}, {"mean_return_100": math.nan, "last_return": math.nan}, {"last_return": -math.inf}):
        write(progress, json.dumps({**written, **returns}))
        shown, _ = ok(capsys, "experiment", "show", "-e", FIRST)
        assert "Mean return  nan (last 100)" in shown and "Damaged" not in shown and "?" not in shown
        listed = json.loads(ok(capsys, "experiment", "list", "--json")[0])[0]
        assert listed["progress_damaged"] == [] and listed["mean_return_100"] is None  # --json: NaN as null
    # before the first episode a null return is no return yet
    write(progress, json.dumps({**written, "episodes": 0, "last_return": None}))
    shown, _ = ok(capsys, "experiment", "show", "-e", FIRST)
    assert "Mean return  -" in shown and "Damaged" not in shown


# ---------------------------------------------------------------------------------------------- 2. episodes.jsonl


def damaged_log(root: Path) -> Path:
    good = [json.dumps({**EPISODE, "episode": i, "timesteps": 20 * i, "return": float(i)}) for i in range(1, 6)]
    lines = [
        good[0],
        "garbage",
        good[1],
        json.dumps({**EPISODE, "return": "twenty"}),  # a wrong type
        json.dumps([1, 2, 3]),  # an array
        good[2],
        json.dumps({**EPISODE, "timesteps": None}),
        good[3],
        good[4],
        '{"episode": 6, "timesteps": 1',  # cut off by a crash, no newline
    ]
    return write(root / "experiments" / FIRST / "results" / "episodes.jsonl", "\n".join(lines))


def test_damaged_lines_of_the_episode_log_are_skipped_and_counted_once(root, capsys):
    damaged_log(root)
    # the last line has no newline: a line being written, left out without a word (the other 4 are damage)
    warning = "tfcli: warning: 4 damaged lines skipped in experiments/alpha/results/episodes.jsonl\n"
    out, err = ok(capsys, "experiment", "show", "-e", FIRST)
    assert "Recent       1, 2, 3, 4, 5" in out and err == warning
    out, err = ok(capsys, "experiment", "compare", FIRST, SECOND, "--json")
    summaries = json.loads(out)
    assert (summaries[0]["episodes"], summaries[0]["timesteps"], summaries[1]["episodes"]) == (5, 100, 0)
    assert err == warning


def test_plot_skips_damaged_lines_of_the_episode_log(root, capsys):
    log = damaged_log(root)
    ok(capsys, "experiment", "plot", "-e", FIRST, "-o", str(root / "curve.png"))
    # lines the tables skip, the plot skips too: a wall time that is no number, a line nested past JSON's depth
    nested = "[" * 100_000 + "]" * 100_000
    log.write_text(log.read_text() + "\n" + json.dumps({**EPISODE, "wall_time": "soon"}) + "\n" + nested + "\n")
    (root / "curve.png").write_bytes(b"an earlier plot")
    ok(capsys, "experiment", "plot", "-e", FIRST, "-o", str(root / "curve.png"))
    assert (root / "curve.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------- 3. spec files

BOMB = textwrap.dedent(
    """\
    - &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    - &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    - &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    - &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    - &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    - &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    - &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    - &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    - &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    """
)


def test_a_yaml_alias_bomb_is_refused_at_once_and_error_messages_stay_short(root):
    assert len(BOMB) < 420
    write(root / "bomb.yaml", BOMB)
    before = snapshot(root)
    result = limited_python(
        "import sys; from torchforce.client.cli import main; "
        "sys.exit(main(['experiment', 'new', '-n', 'boom', '-A', './bomb.yaml', '-E', 'cartpole', '-t', '100']))",
        root,
    )
    assert result.returncode == 2, result.stderr
    assert "experiment.agent: YAML aliases expand this file to 490,329,055 values; expected at most 100,000" in (
        result.stderr
    )
    assert "bomb.yaml" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(root) == before
    # the same value built in Python (shared lists, no YAML): an error message about it renders a bounded prefix
    result = limited_python(
        "from torchforce.spec import SpecError\n"
        "value = ['lol'] * 9\n"
        "for _ in range(9): value = [value] * 9\n"
        "loop = []; loop.append(loop)\n"
        "print(SpecError('agent', 'not a dict', got=value)); print(SpecError('agent', 'bad', got=loop))\n",
        root,
        timeout=30,
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[0].startswith('agent: not a dict; got [[[[[[[[[["lol", "lol"'), result
    assert len(lines[0]) < 160 and lines[1] == "agent: bad; got [[...]]."


@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        ("deep.json", "[" * 100_000, "nested too deeply"),
        ("deep101.json", "[" * 101 + "]" * 101, "nested too deeply"),
        ("deep.yaml", "[" * 100_000, "nested too deeply at line 1"),
        ("loop.yaml", "a: &a [*a]\n", "a YAML alias refers to a value that contains it (line 1)"),
        ("digits.json", '{"type": ' + "1" * 5000 + "}", "a value in the JSON cannot be read: Exceeds the limit"),
    ],
)
def test_a_spec_nested_too_deeply_is_a_spec_error_naming_the_file_and_the_limit(root, capsys, file, text, expected):
    write(root / file, text)
    err = bad(root, capsys, "experiment", "new", "-n", "deep", "-A", f"./{file}", "-E", "cartpole", "-t", "100")
    assert err.startswith(f"tfcli: experiment.agent: {expected}"), err
    assert f"(in {root / file})" in err
    if "deep" in file:
        assert "expected a nesting depth of at most 100" in err


# ---------------------------------------------------------------------------------------------- 4. a locked database


@pytest.fixture
def lock_holder(root):
    """Another process holding the state database's write lock (BEGIN EXCLUSIVE) until the test ends."""
    script = (
        "import sqlite3, sys, time\n"
        "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "connection.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(root / ".tfcli" / "state.db")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_database_locked_too_long_is_a_clear_error_and_delete_changes_nothing(root, capsys, monkeypatch, lock_holder):
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 1.0)
    new = ["experiment", "new", "-n", "gamma", "-A", "ppo_cartpole", "-E", "cartpole", "-t", "1025"]
    for argv in (["experiment", "delete", "-e", FIRST], new):
        err = bad(root, capsys, *argv)
        assert err.startswith(
            f"tfcli: the state database {root / '.tfcli' / 'state.db'} is busy: another process has held its lock "
            "for over 1 s"
        ), err
        assert f"PID {lock_holder.pid} (" in err and "Wait for it to finish" in err
    assert (root / "experiments" / FIRST / "experiment.json").is_file()
    assert not [path for path in (root / "experiments").iterdir() if path.name.startswith(".")]
    lock_holder.kill()
    lock_holder.wait()
    ok(capsys, "experiment", "delete", "-e", FIRST)  # once the lock is gone, the same delete goes through
    assert not (root / "experiments" / FIRST).exists() and [row[0] for row in rows(root)] == [SECOND]
    assert sorted(path.name for path in (root / "experiments").iterdir()) == [SECOND]


def test_the_busy_timeout_is_an_argument_of_the_store_too(tmp_path):
    database = tmp_path / "state.db"
    Store(database).add_experiment("one")
    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute("BEGIN EXCLUSIVE")  # in this process: no other process to name, so the file is named
    try:
        with pytest.raises(ClientError) as caught:
            Store(database, timeout=0.2).update_experiment("one", status="stopped")
    finally:
        connection.execute("ROLLBACK")
        connection.close()
    assert "is busy: another process has held its lock for over 0.2 s" in caught.value.message
    assert "Some other process has state.db locked" in caught.value.hint
    assert Store(database).experiment("one").status == "new"


# ---------------------------------------------------------------------------------------------- 5. a lost database


def results_of(root: Path, name: str, progress: dict | None = None, checkpoint: bool = False) -> None:
    results = root / "experiments" / name / "results"
    if progress is not None:
        write(results / "progress.json", json.dumps(progress))
    if checkpoint:
        write(results / "checkpoints" / "latest.json", json.dumps({"timesteps": 400, "folder": "400"}))


def test_a_lost_state_database_is_reported_and_repair_adopts_the_folders_again(root, capsys):
    spec = json.loads((root / "experiments" / FIRST / "experiment.json").read_text())
    for name in ("done", "halted", "crashed", "ruined"):
        write(root / "experiments" / name / "experiment.json", json.dumps({**spec, "name": name}))
    write(root / "experiments" / "broken" / "experiment.json", '{"name": ')
    (root / "experiments" / "empty").mkdir()
    results_of(root, "done", {"state": "finished", "timesteps": 2000, "updated_at": 1.7e9})
    results_of(root, "halted", {"state": "paused", "timesteps": 400}, checkpoint=True)
    results_of(root, "crashed", {"state": "running", "pid": 999_999_999, "timesteps": 500}, checkpoint=True)
    write(root / "experiments" / "ruined" / "results" / "worker.log", "it died\n")
    for path in (root / ".tfcli").glob("state.db*"):
        path.unlink()
    files = snapshot(root)[0]

    out, err = ok(capsys, "experiment", "list")
    assert "No experiments yet" in out
    assert err.startswith("tfcli: warning: the state database .tfcli/state.db was missing and is new, but ")
    assert "holds 7 experiment folders (alpha, beta, broken, crashed, done and 2 more)" in err
    assert "tfcli project repair" in err

    out, err = ok(capsys, "project", "repair", "--dry-run")
    assert "would adopt" in out and "Would adopt 6 experiment folders, 2 skipped" in out
    assert rows(root) == [] and snapshot(root)[0] == files

    adoptions = Project(root).repair()
    assert {a.name: (a.action, a.status) for a in adoptions} == {
        FIRST: ("adopt", "new"),
        SECOND: ("adopt", "new"),
        "broken": ("skip", None),
        "crashed": ("adopt", "failed"),
        "done": ("adopt", "finished"),
        "empty": ("skip", None),
        "halted": ("adopt", "paused"),
        "ruined": ("adopt", "failed"),
    }
    messages = {a.name: a.message for a in adoptions}
    assert "malformed JSON" in messages["broken"] and messages["empty"] == "it has no experiment.json"
    assert "--resume" in messages["crashed"] and "--fresh" in messages["ruined"]
    assert snapshot(root)[0] == files  # not one file touched
    statuses = {row[0]: row[1] for row in rows(root)}
    assert statuses == {
        FIRST: "new",
        SECOND: "new",
        "crashed": "failed",
        "done": "finished",
        "halted": "paused",
        "ruined": "failed",
    }
    out, err = ok(capsys, "experiment", "list")
    assert err == "" and "finished" in out and "paused" in out
    out, _ = ok(capsys, "project", "repair")  # again: only what it cannot adopt is left
    assert "Adopted 0 experiment folders, 2 skipped" in out


def test_repair_gives_a_run_that_failed_at_build_the_error_its_worker_logged(root, capsys):
    """A worker that failed at build writes no progress.json, only its traceback to results/worker.log; repair
    adopted its run with 'did not end cleanly', the cause unsaid. The last error of the log is in the message now,
    shortened where long; a log with no error keeps the plain message (the test above, 'ruined')."""
    folder = root / "experiments" / FIRST
    worker = [sys.executable, "-m", "torchforce.client.worker", str(folder), "--resume", "--log-file"]  # no checkpoint
    assert subprocess.run(worker, capture_output=True, timeout=300).returncode == 1
    assert sorted(path.name for path in (folder / "results").iterdir()) == ["summaries", "worker.log"]
    long = "ValueError: " + "x" * 300
    write(
        root / "experiments" / SECOND / "results" / "worker.log",
        f"2026-12-07 10:00:00,000 INFO starting\n2026-12-07 10:00:01,000 ERROR {long}\n"
        "2026-12-07 10:00:02,000 INFO after it\n",
    )
    for path in (root / ".tfcli").glob("state.db*"):
        path.unlink()
    capsys.readouterr()

    ok(capsys, "project", "repair")
    first, second = Project(root).store.experiment(FIRST), Project(root).store.experiment(SECOND)
    assert first is not None and second is not None and (first.status, second.status) == ("failed", "failed")
    assert first.message == (
        f"its run failed: FileNotFoundError: no checkpoint in {folder / 'results' / 'checkpoints'} (the last error "
        f"in results/worker.log; re-adopted by 'tfcli project repair'); start it over with 'tfcli experiment start "
        f"-e {FIRST} --fresh'"
    )
    assert second.message is not None and second.message.startswith(f"its run failed: {long[:199]}… (the last")


def test_repair_adopts_a_run_whose_worker_still_lives_as_running(root):
    with fake_worker(root / "experiments" / FIRST) as pid:
        results_of(root, FIRST, {"state": "running", "pid": pid, "timesteps": 100})
        for path in (root / ".tfcli").glob("state.db*"):
            path.unlink()
        adoptions = {a.name: a for a in Project(root).repair()}
        assert (adoptions[FIRST].status, adoptions[FIRST].record.pid) == ("running", pid)
        assert Project(root).store.experiment(FIRST).pid == pid


def test_repair_gives_a_run_the_place_it_last_ran_not_its_specs_cluster(root, capsys):
    """Repair gave every row its spec's cluster: a run of an experiment whose spec names a GKE cluster but that ran
    here ('-c local') was re-adopted as on that cluster, where a resume would then have gone. The folder tells:
    a local start's marks (.worker, its line in worker.log) say here; gke/rayjob.json, unless a local start came
    later, says that GKE cluster and RayJob; nothing (no run yet) keeps what 'experiment new' writes."""
    experiments = root / "experiments"
    for name in ("placed", "unstarted"):
        new = ("experiment", "new", "-n", name, "-A", "ppo_cartpole", "-E", "cartpole", "-t", "500")
        ok(capsys, *new, "--cluster", "small_cluster")
    experiment = Experiment.load(Project(root), "placed")
    assert experiment.spec is not None and experiment.spec["cluster"]["name"] == "small-cluster"
    experiment.start(cluster="local")
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    placed = Project(root).store.experiment("placed")
    assert placed is not None and (placed.backend, placed.cluster) == ("local", None)
    spec = json.loads((experiments / "placed" / "experiment.json").read_text())
    for name, cluster in (("ongke", "big"), ("moved", "small-cluster")):  # a GKE run; one moved here after it
        write(experiments / name / "experiment.json", json.dumps({**spec, "name": name}))
        results_of(root, name, {"state": "finished", "timesteps": 500, "updated_at": 1.7e9})
        job = {"name": f"tf-{name}-0a1b", "cluster": cluster, "zone": "europe-west1-b"}
        write(experiments / name / "gke" / "rayjob.json", json.dumps(job))
    (experiments / "moved" / ".worker").mkdir()
    os.utime(experiments / "moved" / "gke" / "rayjob.json", (1.7e9, 1.7e9))
    shutil.copytree(experiments / "placed", experiments / "copied", ignore=shutil.ignore_patterns(".worker"))
    write(experiments / "copied" / "experiment.json", json.dumps({**spec, "name": "copied"}))
    for path in (root / ".tfcli").glob("state.db*"):
        path.unlink()
    files = snapshot(root)[0]

    ok(capsys, "project", "repair", "--dry-run")
    plan = [a.record for a in Project(root).repair(dry_run=True) if a.record is not None]
    planned = {record.name: (record.backend, record.cluster, record.job) for record in plan}
    assert rows(root) is None and snapshot(root)[0] == files
    ok(capsys, "project", "repair")
    where = {row[0]: (row[2], row[3], row[5]) for row in rows(root) or []}
    expected = {
        FIRST: ("local", None, None),
        SECOND: ("local", None, None),
        "unstarted": ("local", "small-cluster", None),  # no run yet: as 'experiment new' wrote it
        "placed": ("local", None, None),  # ran here with -c local, not on its spec's small-cluster
        "copied": ("local", None, None),  # the local start's line in its worker.log tells, without .worker
        "ongke": ("gke", "big", "tf-ongke-0a1b"),
        "moved": ("local", None, None),  # ran on GKE, then here
    }
    assert where == planned == expected
    adopted = Project(root).store.experiment("placed")
    assert adopted is not None and adopted.status == "finished"
    assert snapshot(root)[0] == files
    out, _ = ok(capsys, "experiment", "show", "-e", "placed")
    assert "this run is on this machine" in out


def test_an_emptied_state_database_is_reported(root, capsys):
    with sqlite3.connect(root / ".tfcli" / "state.db") as connection:
        connection.execute("DELETE FROM experiments")
    _, err = ok(capsys, "experiment", "list")
    assert "the state database .tfcli/state.db is empty, but experiments/ holds 2 experiment folders" in err


def test_a_clusters_table_without_its_columns_is_an_unusable_database_not_a_crash(root, capsys):
    """Found by the damaged-project fuzz test: cluster reads went around the store's error translation."""
    with sqlite3.connect(root / ".tfcli" / "state.db") as connection:
        connection.execute("DROP TABLE clusters")
        connection.execute("CREATE TABLE clusters (name TEXT PRIMARY KEY, spec TEXT NOT NULL, status TEXT NOT NULL)")
    err = bad(root, capsys, "cluster", "list")
    assert "state database" in err and "cannot be used: no such column: created_at" in err


def test_a_schema_byte_that_is_not_utf8_is_an_unusable_database_not_a_crash(root, capsys):
    """Found by the damaged-project fuzz test: one flipped bit in the schema's text (the N of NULL in the status
    column's CHECK) makes SQLite's error message bytes that are not UTF-8, and every command ended in an unexpected
    UnicodeDecodeError while Python built that message."""
    database = root / ".tfcli" / "state.db"
    data = bytearray(database.read_bytes())
    flipped = data.index(b"TEXT NOT NULL CHECK (status IN") + len(b"TEXT NOT ")
    data[flipped] ^= 0x80
    database.write_bytes(bytes(data))
    for command in (["experiment", "list"], ["experiment", "show", "-e", FIRST], ["cluster", "list"]):
        err = bad(root, capsys, *command)
        assert "state.db cannot be used: 'utf-8' codec can't decode byte 0xce" in err


# ---------------------------------------------------------------------------------------------- 6. names and shapes


@pytest.mark.parametrize("command", ["show", "delete", "start", "logs"])
@pytest.mark.parametrize("name", ["/tmp/abs", "a" * 300, "alpha/../beta"])
def test_a_name_that_is_no_folder_name(root, capsys, command, name):
    err = bad(root, capsys, "experiment", command, "-e", name)
    assert "experiment.name: not a valid experiment name" in err


def test_experiments_being_a_file(root, capsys):
    shutil.rmtree(root / "experiments")
    write(root / "experiments", "not a folder")
    err = bad(root, capsys, "experiment", "new", "-n", "gamma", "-A", "ppo_cartpole", "-E", "cartpole", "-t", "100")
    assert "the project's project/experiments is not a folder" in err
    assert "experiment list" not in err
    bad(root, capsys, "experiment", "list")
    (root / "configs" / "agents" / "dqn.json").unlink()  # init would write it: it must not, when it refuses
    err = bad(root, capsys, "init")
    assert f"{root / 'experiments'} is a file, but a project needs a folder there" in err


def test_the_current_folder_deleted_under_the_shell(root, capsys, monkeypatch):
    gone = root / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    err = bad(root, capsys, "experiment", "list")
    assert "the current folder no longer exists" in err


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"run_mode": ["single"]}, "experiment.run_mode: unknown value; expected one of"),
        ({"description": {"a": 1}}, 'experiment.description: not a string; expected a line of text, got {"a": 1}'),
        ({"sources": 5}, "experiment.sources: not the files the configs came from"),
        ({"cluster": {"name": "c", "location": 5}}, "experiment.cluster.location: not a string"),
    ],
)
def test_a_field_of_the_wrong_type_in_an_experiment_file(root, capsys, fields, expected):
    spec = {"name": "gamma", "agent": "ppo_cartpole", "environment": "cartpole", "total_timesteps": 100, **fields}
    write(root / "spec.json", json.dumps(spec))
    err = bad(root, capsys, "experiment", "new", "-f", "spec.json")
    assert err.startswith(f"tfcli: {expected}"), err


@pytest.mark.parametrize(
    ("file", "text", "flags", "expected"),
    [
        ("list.json", "[1, 2]", ["-f", "list.json"], "experiment: not a dict; expected a JSON object, got [1, 2]"),
        ("agent.json", '"ppo"', ["-n", "g", "-A", "agent.json", "-E", "cartpole"], "experiment.agent: not a dict"),
        ("five.json", "5", ["-n", "g", "-A", "ppo_cartpole", "-E", "five.json"], "experiment.environment: not a dict"),
    ],
)
def test_a_file_that_holds_no_object_is_named(root, capsys, file, text, flags, expected):
    # the errors said what arrived, and not which file it came from
    write(root / file, text)
    err = bad(root, capsys, "experiment", "new", *flags)
    assert err.startswith(f"tfcli: {expected}") and f"{file})." in err.splitlines()[0], err


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"location": 5}, "cluster.location: not a string; expected a string or null, got 5."),
        ({"machine_type": ["n1"]}, 'cluster.machine_type: not a string; expected a string or null, got ["n1"].'),
        ({"gpu_type": 7}, "cluster.gpu_type: not a string"),
    ],
)
def test_a_field_of_the_wrong_type_in_a_cluster_file(root, capsys, fields, expected):
    write(root / "cluster.json", json.dumps({"name": "small", **fields}))
    err = bad(root, capsys, "cluster", "create", "-f", "./cluster.json", "--dry-run")
    assert err.startswith(f"tfcli: {expected}"), err


def test_a_stored_spec_edited_down_to_its_fields_still_shows(root, capsys):
    path = root / "experiments" / FIRST / "experiment.json"
    spec = json.loads(path.read_text())
    del spec["run_mode"], spec["num_workers"]
    write(path, json.dumps({**spec, "environment": "cartpole"}))  # a config's name, as a person would write it
    out, _ = ok(capsys, "experiment", "show", "-e", FIRST)
    assert "Environment  CartPole-v1 x 1" in out and "Run mode     single" in out
    ok(capsys, "experiment", "list")


def test_a_gymnasium_id_edited_into_a_stored_spec_is_refused_at_start(root, capsys):
    # the stored spec is checked without building anything (start stays quick), and its environment's id was not
    # checked at all: start said "Started", and the worker's log held a traceback
    path = root / "experiments" / FIRST / "experiment.json"
    spec = json.loads(path.read_text())
    assert spec["environment"]["gym_id"] == "CartPole-v1"
    write(path, json.dumps({**spec, "environment": {**spec["environment"], "gym_id": "CartPole-v7"}}))
    err = bad(root, capsys, "experiment", "start", "-e", FIRST)
    assert err.startswith("tfcli: experiment.environment.gym_id: unknown Gymnasium id 'CartPole-v7'"), err
    assert f"experiments/{FIRST}/experiment.json" in err and "Did you mean 'CartPole-v1'?" in err, err
    assert Project(root).store.experiment(FIRST).status == "new"


def test_list_warns_of_an_experiment_whose_spec_is_damaged(root, capsys):
    # the row showed "-" in every column and nothing said why
    write(root / "experiments" / FIRST / "experiment.json", "{ broken")
    out, err = ok(capsys, "experiment", "list")
    assert [line.split()[0] for line in out.splitlines()[2:]] == [FIRST, SECOND], out
    (line,) = err.splitlines()
    assert line.startswith(f"tfcli: warning: experiment '{FIRST}' is listed without its spec: malformed JSON"), line
    assert line.endswith(f"remove the experiment with 'tfcli experiment delete -e {FIRST}'."), line
    out, err = ok(capsys, "experiment", "list", "--json")
    assert err.startswith("tfcli: warning: ") and json.loads(out)[0]["message"].endswith(")")


def test_the_descriptions_of_the_project_group(capsys):
    code, out, err = run(capsys, "project", "reapir")
    assert code == 2 and "Did you mean 'repair'?" in err
    code, out, _ = run(capsys, "project", "repair", "--help")
    assert code == 0 and "tfcli project repair --dry-run" in out
