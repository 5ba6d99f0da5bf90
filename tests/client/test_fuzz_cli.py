"""Fuzzing tfcli: damaged projects and generated argument lists, run in this process through ``cli.main``.

Every run must end with exit code 0 or 2, never with "unexpected error" (exit code 1) or a traceback, and a run
that is refused (exit code 2) must leave the project as it was: its files byte for byte and the state database's
rows. Damage is drawn for the files a project holds (progress.json, episodes.jsonl, experiment.json,
project.json, the checkpoint pointer, state.db): random bytes, truncation, flipped bytes, JSON fields replaced by
values of other types, rows given odd values, files removed.

A few examples per test by default, for CI; ``TORCHFORCE_FUZZ=N`` runs N per test. Commands that start workers or
wait for them (start, pause, watch, logs --follow) are not drawn; nor is plot (matplotlib makes each call slow;
test_damaged.py covers it on a damaged episode log).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from torchforce.client import ClientError, Experiment, Project
from torchforce.client.cli import main
from torchforce.client.store import Store

EXAMPLES = int(os.environ.get("TORCHFORCE_FUZZ", "0")) or None
FUZZ = settings(
    max_examples=EXAMPLES or 60,
    deadline=None,
    database=None,  # no .hypothesis/ folder in the tree
    phases=[Phase.explicit, Phase.generate, Phase.shrink],  # the explain phase reruns failures for minutes
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NAMES = ["alpha", "beta", "gamma", "nothing", "Alpha", "/tmp/x", "../beta", "a" * 300, "", "-e", "alpha beta"]
EPISODE = {"episode": 1, "timesteps": 20, "worker": 0, "return": 20.0, "length": 20, "wall_time": 0.1}
FILES = {
    "progress": "experiments/alpha/results/progress.json",
    "episodes": "experiments/alpha/results/episodes.jsonl",
    "spec": "experiments/alpha/experiment.json",
    "settings": ".tfcli/project.json",
    "checkpoint": "experiments/alpha/results/checkpoints/latest.json",
    "database": ".tfcli/state.db",
}
WEIGHTED = ["progress"] * 3 + ["episodes"] * 3 + ["spec"] * 3 + ["checkpoint", "settings", "database", "database"]


# ---------------------------------------------------------------------------------------------- the project


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a finished experiment (results included) and a new one."""
    root = tmp_path_factory.mktemp("fuzz") / "project"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        project, _ = Project.init(root)
        Experiment(
            project, name="alpha", agent="ppo_cartpole", environment="cartpole", total_timesteps=2000
        ).generate_locally()
        spec = json.loads((root / FILES["spec"]).read_text())
        (root / "experiments" / "beta").mkdir()
        (root / "experiments" / "beta" / "experiment.json").write_text(json.dumps({**spec, "name": "beta"}))
        project.store.add_experiment("beta")
        project.store.update_experiment("alpha", status="finished", ended_at=1.7e9)
    results = root / "experiments" / "alpha" / "results"
    (results / "checkpoints").mkdir(parents=True)
    (results / "checkpoints" / "latest.json").write_text(json.dumps({"timesteps": 2000, "folder": "2000"}))
    progress = {"state": "finished", "pid": 1, "timesteps": 2000, "episodes": 60, "elapsed_seconds": 4.0}
    progress.update({"steps_per_second": 500.0, "mean_return_100": 33.3, "last_return": 40.0, "updated_at": 1.7e9})
    (results / "progress.json").write_text(json.dumps(progress))
    lines = [json.dumps({**EPISODE, "episode": i, "timesteps": 33 * i, "return": float(i)}) for i in range(1, 61)]
    (results / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    (results / "worker.log").write_text("a log line\n")
    return root


@contextlib.contextmanager
def copy_of(template: Path):
    """A fresh copy of the project as the current folder."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tfcli-fuzz-") as folder:
        root = Path(folder) / "project"
        shutil.copytree(template, root, ignore=shutil.ignore_patterns("*-wal", "*-shm"))
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(here)


def snapshot(root: Path) -> tuple[dict[str, bytes | None], object]:
    """Every file's bytes (None for folders) and the database's rows (its bytes where it cannot be read; a missing
    database counts as an empty one, since any command creates it)."""
    files = {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
        if not path.name.startswith("state.db")
    }
    database = root / FILES["database"]
    if not database.exists():
        return files, []
    try:
        return files, [dataclasses.astuple(record) for record in Store(database, timeout=5).experiments()]
    except ClientError:
        return files, database.read_bytes()


def tfcli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:  # argparse: usage errors and --help
            code = exit.code
    return code, out.getvalue(), err.getvalue()


def check(root: Path, argv: list[str]) -> None:
    before = snapshot(root)
    code, out, err = tfcli(argv)
    event(f"exit code {code}")  # seen with --hypothesis-show-statistics
    event(f"{' '.join(argv[:2])}: {(err.replace(str(root), 'ROOT').splitlines() or ['-'])[0][:70]}")
    assert code in (0, 2), (argv, code, out, err)
    assert "unexpected error" not in err, (argv, err)
    assert "Traceback" not in err or "--debug" in argv, (argv, err)
    if code == 2:
        assert snapshot(root) == before, f"the refused 'tfcli {' '.join(argv)}' changed the project: {err}"


# ---------------------------------------------------------------------------------------------- damage

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def damage(data: st.DataObject, root: Path) -> None:
    """One to three kinds of damage, each to one of the project's files."""
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        key = data.draw(st.sampled_from(WEIGHTED), label="file")
        path = root / FILES[key]
        kind = data.draw(st.sampled_from(["bytes", "truncate", "flip", "json", "remove", "append"]), label="kind")
        if key == "database" and kind in ("json", "append"):
            damage_rows(data, path)
            continue
        content = path.read_bytes() if path.is_file() else b""
        if kind == "bytes":
            path.write_bytes(data.draw(st.binary(max_size=64), label="bytes"))
        elif kind == "truncate":
            path.write_bytes(content[: data.draw(st.integers(0, max(len(content) - 1, 0)), label="length")])
        elif kind == "flip" and content:
            changed = bytearray(content)
            for _ in range(data.draw(st.integers(1, 8), label="flips")):
                changed[data.draw(st.integers(0, len(changed) - 1), label="at")] = data.draw(st.integers(0, 255))
            path.write_bytes(bytes(changed))
        elif kind == "json" and key == "episodes":  # one line of the log
            lines = content.decode(errors="replace").splitlines() or [""]
            at = data.draw(st.integers(0, len(lines) - 1), label="line")
            lines[at] = json.dumps(mutate_json(data, lines[at].encode()), allow_nan=True)
            path.write_text("\n".join(lines) + "\n")
        elif kind == "json":
            path.write_text(json.dumps(mutate_json(data, content), allow_nan=True))
        elif kind == "remove":
            path.unlink(missing_ok=True)
        elif kind == "append":
            line = data.draw(st.one_of(json_values.map(json.dumps), st.text(max_size=20)), label="line")
            with open(path, "a") as file:
                file.write(line + data.draw(st.sampled_from(["\n", ""]), label="end"))


def mutate_json(data: st.DataObject, content: bytes) -> object:
    """The file's JSON with one field (maybe nested one level) replaced by another value, or removed."""
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        value = {}
    if not isinstance(value, dict) or not value or data.draw(st.booleans(), label="whole"):
        return data.draw(json_values, label="value")
    key = data.draw(st.sampled_from(sorted(value)), label="key")
    if isinstance(value[key], dict) and value[key] and data.draw(st.booleans(), label="nested"):
        inner = data.draw(st.sampled_from(sorted(value[key])), label="inner")
        value[key] = {**value[key], inner: data.draw(json_values, label="value")}
    elif data.draw(st.booleans(), label="remove"):
        del value[key]
    else:
        value[key] = data.draw(json_values, label="value")
    return value


def damage_rows(data: st.DataObject, path: Path) -> None:
    """Odd values in the experiments' rows (never 'running': that would make commands wait for a worker)."""
    if not path.is_file():
        return
    column = data.draw(st.sampled_from(["status", "backend", "cluster", "pid", "message", "created_at"]))
    values = {
        "status": st.sampled_from(["new", "paused", "stopped", "finished", "failed"]),
        "pid": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=5)),
        "created_at": st.one_of(st.floats(allow_nan=False), st.text(max_size=5), st.none()),
    }.get(column, st.one_of(st.none(), st.text(max_size=20), st.integers(-(2**63), 2**63 - 1)))
    value = data.draw(values, label=column)
    name = data.draw(st.sampled_from(["alpha", "beta"]), label="row")
    try:
        with contextlib.closing(sqlite3.connect(path)) as connection, connection:
            connection.execute(f"UPDATE experiments SET {column} = ? WHERE name = ?", (value, name))
    except sqlite3.DatabaseError:
        pass  # a NOT NULL column, or a file damaged before: left as it is


# ---------------------------------------------------------------------------------------------- arguments

name = st.sampled_from(["alpha", "beta"]) | st.sampled_from(NAMES) | st.text(max_size=10)  # a third: real ones


@st.composite
def commands(draw: st.DrawFn) -> list[str]:
    """A real command line, with names drawn from the project's, unknown ones and garbage."""
    first, second = draw(name), draw(name)
    number = draw(st.sampled_from(["100", "0", "-3", "1e9", "nan", "many", ""]))
    choices = [
        ["experiment", "list"],
        ["experiment", "list", "--json"],
        ["experiment", "show", "-e", first],
        ["experiment", "show", "-e", first, "--json"],
        ["experiment", "compare", first, second],
        ["experiment", "compare", first, second, "--threshold", number, "--json"],
        ["experiment", "logs", "-e", first],
        ["experiment", "download", "-e", first],
        ["experiment", "delete", "-e", first],
        ["experiment", "stop", "-e", first, "--no-download"],
        ["experiment", "new", "-f", FILES["spec"], "-n", first],
        ["experiment", "new", "-n", first, "-A", second, "-E", "cartpole", "-t", number],
        ["project", "repair", "--dry-run"],
        ["project", "repair", "--json"],
        ["project", "repair"],
        ["cluster", "list"],
        ["cluster", "create", "-f", second, "--dry-run"],
        ["init", "-n", first],
    ]
    return draw(st.sampled_from(choices))


garbage_words = st.sampled_from(
    [
        "experiment",
        "project",
        "cluster",
        "init",
        "repair",
        "list",
        "show",
        "new",
        "compare",
        "--json",
        "--dry-run",
        "-e",
        "-n",
        "-f",
        "--debug",
        "--help",
        "-h",
        "--version",
        "alpha",
        "--",
        "-",
        "=",
        "-t=5",
    ]
) | st.text(max_size=8)


@st.composite
def argument_lists(draw: st.DrawFn) -> list[str]:
    """A real command line with words dropped, added or changed, or words at random."""
    words = draw(commands())
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(words)))
        edit = draw(st.sampled_from(["insert", "delete", "replace"]))
        if edit == "insert" or not words[at:]:
            words = [*words[:at], draw(garbage_words), *words[at:]]
        elif edit == "delete":
            words = words[:at] + words[at + 1 :]
        else:
            words = [*words[:at], draw(garbage_words), *words[at + 1 :]]
    return words if draw(st.booleans()) else draw(st.lists(garbage_words, max_size=5))


# ---------------------------------------------------------------------------------------------- the tests


@FUZZ
@given(data=st.data(), argv=commands())
def test_commands_on_a_damaged_project_end_cleanly(template, data, argv):
    with copy_of(template) as root:
        damage(data, root)
        check(root, argv)


@FUZZ
@given(argv=argument_lists())
def test_generated_argument_lists_end_cleanly(template, argv):
    if "--help" in argv or "-h" in argv:
        argv = [word for word in argv if word not in ("--help", "-h")]  # help is printed, not fuzzed
    with copy_of(template) as root:
        check(root, argv)
