"""Issue 7 ("Hardening") through the real command line: a config file given to ``tfcli experiment new`` (which builds
the environment and the agent to validate them) and a results folder given to ``--resume`` run nothing. Each attack
writes a marker file when it succeeds; the tests run it and show the marker never appears.
"""

from __future__ import annotations

import json
import os
import pickle
import shlex
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import tfcli, wait_until_done
from torchforce.client import Experiment, Project


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    path = tmp_path / "attack-ran"
    yield path
    assert not path.exists(), "the attack ran"


def new_with_environment(project: Project, spec: dict[str, Any]) -> str:
    """``tfcli experiment new -E evil.json``: refused with one clear message (exit code 2); returns stderr."""
    (project.root / "evil.json").write_text(json.dumps(spec))
    result = tfcli(
        project.root, "experiment", "new", "-n", "evil", "-A", "ppo_cartpole", "-E", "evil.json", "-t", "100"
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and not (project.root / "experiments" / "evil").exists()
    return result.stderr


def test_an_environment_file_cannot_run_a_shell_command(project: Project, marker: Path) -> None:
    err = new_with_environment(project, {"type": "os:system", "command": f"touch {shlex.quote(str(marker))}"})
    assert "environment.type: module 'os' belongs to Python's standard library, which holds no environment" in err
    assert "(in evil.json)" in err


def test_an_environment_file_cannot_call_a_function_of_a_users_module(project: Project, marker: Path) -> None:
    # the project's own module (in its modules/ folder) is importable: user classes are code by design; but 'boom'
    # is no Environment class
    module = f"tf_users_module_{uuid.uuid4().hex[:8]}"
    (project.root / "modules").mkdir(exist_ok=True)
    (project.root / "modules" / f"{module}.py").write_text(
        f"from pathlib import Path\n\n\ndef boom(*args, **kwargs):\n    Path({str(marker)!r}).write_text('ran')\n"
    )
    err = new_with_environment(project, {"type": f"{module}:boom", "command": "anything"})
    assert f"environment.type: '{module}:boom' is not an environment class; expected a subclass of " in err


def test_a_gym_id_cannot_import_a_package_that_is_not_built_on_gymnasium(
    project: Project, tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"tf_installed_{uuid.uuid4().hex[:8]}"
    site = tmp_path / "site"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n")
    (site / f"{name}-1.0.dist-info").mkdir()
    (site / f"{name}-1.0.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (site / f"{name}-1.0.dist-info" / "top_level.txt").write_text(name + "\n")
    # installed as a site's packages are (tfcli reads no PYTHONPATH: a sitecustomize there adds the site at start-up)
    (tmp_path / "startup").mkdir()
    (tmp_path / "startup" / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site)!r})\n")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "startup"), os.environ.get("PYTHONPATH")]))
    )
    err = new_with_environment(project, {"type": "gym", "gym_id": f"{name}:CartPole-v1"})
    assert (
        f"environment.gym_id: module '{name}' belongs to the installed package '{name}', which does not depend "
        "on gymnasium" in err
    )


class Attack:
    def __init__(self, marker: Path) -> None:
        self.command = f"touch {shlex.quote(str(marker))}"

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (self.command,)


def test_resuming_a_tampered_checkpoint_runs_nothing(
    project: Project, tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # this user's signing key, for the worker
    experiment = Experiment(
        project, name="tampered", agent="ppo_cartpole", environment="cartpole", total_timesteps=2000, seed=0
    )
    experiment.generate_locally()
    experiment.start()
    assert experiment.pause().status == "paused", experiment.log_tail()
    checkpoints = experiment.results / "checkpoints"
    folder = checkpoints / json.loads((checkpoints / "latest.json").read_text())["folder"]
    payload = pickle.dumps(Attack(marker))  # someone who can write to the results folder plants pickles
    for file in ("runner.pkl", "environments.pkl"):
        (folder / file).write_bytes(payload)
    if (folder / "runner.json").exists():
        record = json.loads((folder / "runner.json").read_text())
        record["environments"]["lengths"] = [len(payload)]
        (folder / "runner.json").write_text(json.dumps(record))
    experiment.start(resume=True)
    wait_until_done(experiment)
    log = (experiment.results / "worker.log").read_text()
    assert "the environments' state (environments.pkl) is not loaded, because it is not signed" in log, log
    assert wait_until_done(experiment) == "finished", experiment.log_tail(20)
    assert not marker.exists()


def test_results_from_someone_else_resume_their_environments_only_when_trusted(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "theirs"))  # they ran and signed it
    experiment = Experiment(
        project, name="received", agent="ppo_cartpole", environment="cartpole", total_timesteps=200_000, seed=0
    )
    experiment.generate_locally()
    experiment.start()
    assert experiment.pause().status == "paused", experiment.log_tail()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "mine"))  # we resume it with our own key
    refused = "the environments' state (environments.pkl) is not loaded"
    experiment.start(resume=True, trust_pickle=True)  # the explicit opt-in: their pickle is loaded
    assert experiment.pause().status == "paused", experiment.log_tail()
    assert refused not in (experiment.results / "worker.log").read_text()
