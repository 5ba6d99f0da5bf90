"""Live, durable logs: each finished episode is in ``results/episodes.jsonl`` within a second (not only at the next
checkpoint), a crash loses none of them, a resumed run cuts the log back to its checkpoint exactly, and every
reader of the JSON-lines results leaves out a last line that is still being written."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests.client.conftest import wait_for
from tests.client.worker_runs import new_experiment, new_project, records, run, set_fields, without_wall_time
from torchforce.client import Project, report
from torchforce.client.checkpoints import Checkpoints
from torchforce.client.cli import main
from torchforce.client.report import JsonLines, drop_after, read_episodes, read_evaluations
from torchforce.plots import read_episode_log, read_evaluation_log

EPISODES = [
    {"episode": i, "timesteps": 20 * i, "worker": 0, "return": float(i), "length": 20, "wall_time": 0.5 * i}
    for i in range(1, 6)
]
ROUND = {"std_return": 0.5, "returns": [2.5, 3.5]}
EVALUATIONS = [
    {"timesteps": 40 * i, "episodes": 2 * i, "mean_return": 3.0 * i, **ROUND, "wall_time": 1.0 * i} for i in range(1, 4)
]
CUT_EPISODE = '{"episode": 6, "timesteps": 120, "worker": 0, "ret'  # a line being written: no newline yet
CUT_EVALUATION = '{"timesteps": 160, "episodes": 8, "mean_return": 1'


def jsonl(rows: list[dict], tail: str = "") -> str:
    return "".join(json.dumps(row) + "\n" for row in rows) + tail


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return new_project(tmp_path / "project")


# ---------------------------------------------------------------------------------------------- writing


def test_records_reach_the_file_within_the_flush_interval(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(report.time, "monotonic", lambda: clock[0])
    path = tmp_path / "episodes.jsonl"
    log = JsonLines(path)
    log.append(EPISODES[0])
    assert path.read_text() == ""  # just opened: not due yet
    clock[0] += report.FLUSH_SECONDS
    log.append(EPISODES[1])  # due: both go, as whole lines
    assert path.read_text() == jsonl(EPISODES[:2])
    clock[0] += 0.1
    log.append(EPISODES[2])
    log.flush(due_only=True)
    assert path.read_text() == jsonl(EPISODES[:2])  # written 0.1 s ago: it waits
    clock[0] += report.FLUSH_SECONDS
    log.flush(due_only=True)  # what the worker calls after every step
    assert path.read_text() == jsonl(EPISODES[:3])
    log.append(EPISODES[3])
    log.close()  # the end of a run (and a checkpoint's flush) writes at once
    assert path.read_text() == jsonl(EPISODES[:4])


@pytest.mark.slow
def test_a_killed_worker_keeps_its_episodes_and_a_resumed_run_cuts_back_to_the_checkpoint(project):
    folder = new_experiment(project, "crashed", total_timesteps=1_000_000, saver_frequency="3s")
    log = folder / "results" / "episodes.jsonl"
    checkpoints = Checkpoints(folder / "results" / "checkpoints")

    def past_a_checkpoint() -> bool:
        pointer = checkpoints.latest()
        lines = log.read_text().splitlines() if pointer is not None else []
        return bool(lines) and json.loads(lines[-1])["episode"] > pointer["episodes"]

    command = [sys.executable, "-I", "-m", "torchforce.client.worker", str(folder), "--log-file"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(past_a_checkpoint, 60, 0.02, "episodes logged after the first checkpoint, before the next")
        progress = json.loads((folder / "results" / "progress.json").read_text())  # written whole
        time.sleep(1.0)  # every episode the progress file counts is in the log a second later
        os.kill(process.pid, signal.SIGKILL)  # (the next checkpoint is due seconds later)
    finally:
        process.kill()
        process.wait()
    pointer = checkpoints.latest()
    before = log.read_bytes()
    logged = records(log)
    assert progress["state"] == "running" and len(logged) >= progress["episodes"] > 0
    assert [e["episode"] for e in logged] == list(range(1, len(logged) + 1))
    assert logged[-1]["episode"] > pointer["episodes"]  # logged after the checkpoint: the resumed run drops them
    with open(log, "a") as file:
        file.write(CUT_EPISODE)  # and a line the kill cut off
    set_fields(folder, total_timesteps=pointer["timesteps"] + 500)
    assert run(folder, resume=True) == "finished"
    resumed = records(log)
    kept = before.splitlines(keepends=True)[: pointer["episodes"]]
    assert log.read_bytes().startswith(b"".join(kept))  # the checkpoint's episodes, as they were
    assert [e["episode"] for e in resumed] == list(range(1, len(resumed) + 1))
    # an exact resume plays the episodes after the checkpoint again as the killed run played them
    replayed = [
        e for e in logged if e["episode"] > pointer["episodes"] and e["timesteps"] <= pointer["timesteps"] + 500
    ]
    assert replayed and without_wall_time(resumed[pointer["episodes"] : len(logged)]) == without_wall_time(replayed)


# ---------------------------------------------------------------------------------------------- cutting back


def test_drop_after_cuts_the_lines_past_the_checkpoint_and_a_cut_off_one(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text(jsonl(EPISODES, "garbage\n" + CUT_EPISODE))
    assert drop_after(path, "episode", 3) == 4  # episodes 4 and 5, the garbage, the cut-off line
    assert path.read_text() == jsonl(EPISODES[:3])
    assert drop_after(path, "episode", 3) == 0 and path.read_text() == jsonl(EPISODES[:3])  # nothing past it
    assert drop_after(path, "episode", 0) == 3 and path.read_text() == ""
    assert drop_after(tmp_path / "absent.jsonl", "episode", 0) == 0


def test_drop_after_reads_back_in_blocks_smaller_than_a_line(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "SCAN_BYTES", 7)
    path = tmp_path / "evaluations.jsonl"
    path.write_text(jsonl(EVALUATIONS, CUT_EVALUATION))
    assert drop_after(path, "timesteps", 80) == 2
    assert path.read_text() == jsonl(EVALUATIONS[:2])


# ---------------------------------------------------------------------------------------------- every reader


def test_read_episodes_leaves_out_a_cut_off_last_line_without_a_warning(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text(jsonl(EPISODES, CUT_EPISODE))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_episodes(path) == EPISODES
    path.write_text(jsonl(EPISODES, "garbage\n" + CUT_EPISODE))  # a damaged whole line is still reported
    with pytest.warns(UserWarning, match="1 damaged line skipped"):
        assert read_episodes(path) == EPISODES


def test_read_evaluations_leaves_out_a_cut_off_last_line(tmp_path):
    path = tmp_path / "evaluations.jsonl"
    path.write_text(jsonl(EVALUATIONS, CUT_EVALUATION))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_evaluations(path) == EVALUATIONS
        assert read_evaluations(tmp_path / "absent.jsonl") == []
    path.write_text(jsonl([*EVALUATIONS, {**EVALUATIONS[0], "returns": "many"}]))
    with pytest.warns(UserWarning, match="1 damaged line skipped"):
        assert read_evaluations(path) == EVALUATIONS


def test_an_evaluation_whose_result_is_no_number_is_a_record_not_damage(tmp_path):
    # what the worker writes for a diverged policy (json.dumps: NaN), and a writer without NaN (null)
    nan = {"timesteps": 160, "episodes": 8, "mean_return": math.nan, "std_return": math.nan, "returns": [math.nan, 1.0]}
    null = {**nan, "timesteps": 200, "mean_return": None, "std_return": None, "returns": [None, 1.0]}
    infinite = {**nan, "timesteps": 240, "mean_return": -math.inf, "returns": [-math.inf, 1.0]}
    rounds = [{**row, "wall_time": 4.0} for row in (nan, null, infinite)]
    path = tmp_path / "evaluations.jsonl"
    path.write_text(jsonl([*EVALUATIONS, *rounds]))
    assert "NaN" in path.read_text() and "-Infinity" in path.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = read_evaluations(path)
    assert read[:3] == EVALUATIONS and [r["timesteps"] for r in read[3:]] == [160, 200, 240]
    for record in read[3:5]:
        assert math.isnan(record["mean_return"]) and math.isnan(record["std_return"])
        assert math.isnan(record["returns"][0]) and record["returns"][1] == 1.0
    assert read[5]["mean_return"] == -math.inf and math.isnan(read[5]["std_return"])
    assert [r["timesteps"] for r in read_evaluation_log(path)] == [40, 80, 120, 160, 200, 240]
    # a line that is no record stays damage
    damaged = [
        {**EVALUATIONS[0], "mean_return": "nan"},
        {**EVALUATIONS[0], "std_return": -0.5},
        {**EVALUATIONS[0], "std_return": -math.inf},
        {**EVALUATIONS[0], "returns": [1.0, "two"]},
        {**EVALUATIONS[0], "returns": None},
        {**EVALUATIONS[0], "wall_time": math.nan},
        {key: value for key, value in EVALUATIONS[0].items() if key != "mean_return"},
    ]
    path.write_text(jsonl([*EVALUATIONS, *damaged]))
    with pytest.warns(UserWarning, match="7 damaged lines skipped"):
        assert read_evaluations(path) == EVALUATIONS


def test_the_plot_readers_leave_out_a_cut_off_last_line(tmp_path):
    (tmp_path / "episodes.jsonl").write_text(jsonl(EPISODES, '{"episode": 6, "timesteps": 120, "return": 6.0}'))
    assert read_episode_log(tmp_path / "episodes.jsonl") == EPISODES  # even one that parses: its newline is missing
    (tmp_path / "evaluations.jsonl").write_text(jsonl(EVALUATIONS, CUT_EVALUATION))
    assert read_evaluation_log(tmp_path / "evaluations.jsonl") == EVALUATIONS
    assert read_evaluation_log(tmp_path / "absent.jsonl") == []


def test_best_json_cut_off_reads_as_none(tmp_path):
    checkpoints = Checkpoints(tmp_path)
    (tmp_path / "best.json").write_text('{"timesteps": 100, "mean_return": 3.0, "folder": "0000000')
    assert checkpoints.best() is None
    checkpoints.mark_best(100, 3.0)
    assert checkpoints.best() == {"timesteps": 100, "mean_return": 3.0, "folder": "000000000100"}


@pytest.mark.parametrize(
    "content",
    ['{"timesteps": 100, "folder": "0000000', '{"timesteps": 100, "folder": "../elsewhere"}', '{"folder": "x"}', "[]"],
)
def test_a_damaged_latest_json_is_an_error_naming_it_not_a_run_without_checkpoints(tmp_path, content):
    # None would make --resume-if-any start over the run's checkpoints and logs, and the supervisor crash
    checkpoints = Checkpoints(tmp_path)
    assert checkpoints.latest() is None  # none yet
    (tmp_path / "latest.json").write_text(content)
    with pytest.raises(ValueError, match=r"latest.json is damaged"):
        checkpoints.latest()


def test_tfcli_show_and_compare_read_a_log_being_written(project, capsys):
    new_experiment(project, "live")
    results = project.experiment_folder("live") / "results"
    results.mkdir()
    (results / "episodes.jsonl").write_text(jsonl(EPISODES, CUT_EPISODE))
    assert main(["experiment", "compare", "live", "--json"]) == 0
    out, err = capsys.readouterr()
    (summary,) = json.loads(out)
    assert (summary["episodes"], summary["timesteps"], summary["final_mean_return"], err) == (5, 100, 3.0, "")
    assert main(["experiment", "show", "-e", "live"]) == 0
    out, err = capsys.readouterr()
    assert "Recent       1, 2, 3, 4, 5" in out and err == ""


def test_a_checkpoint_saved_again_at_its_timestep_stays_whole_until_the_new_one_has_its_name(tmp_path, monkeypatch):
    from torchforce.agents import create_agent

    agent = create_agent("random", states={"type": "float", "shape": (2,)}, actions={"type": "int", "num_actions": 2})
    checkpoints = Checkpoints(tmp_path)
    first = checkpoints.save(agent, {"step": 1}, {"timesteps": 10, "episodes": 1})
    folder = tmp_path / first["folder"]
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    rename = os.replace

    def full_disk(source, target):  # the new checkpoint cannot take its name
        if str(source).endswith(".partial"):
            raise OSError(28, "No space left on device")
        return rename(source, target)

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        checkpoints.save(agent, {"step": 2}, {"timesteps": 10, "episodes": 1})
    monkeypatch.setattr(os, "replace", rename)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before  # the one latest.json names
    assert checkpoints.latest()["folder"] == first["folder"]
    checkpoints.save(agent, {"step": 3}, {"timesteps": 10, "episodes": 1})
    assert sorted(path.name for path in tmp_path.iterdir()) == [first["folder"], "latest.json"]
