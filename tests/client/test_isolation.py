"""The project folder is never on a worker's import path, and user classes come from the project's ``modules/``
folder only: the same for validation (``experiment new``) and for the worker (``start``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.client.conftest import tfcli, wait_until_done
from torchforce.client import Experiment

SHADOW = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"
LAYER = '''
from torchforce.core.networks.layers import Dense


class Wide(Dense):
    """A dense layer of the user's, found in the project's modules/ folder."""
'''


def test_a_module_in_the_project_folder_shadows_nothing_and_user_classes_load_from_modules(project, tmp_path):
    marker = tmp_path / "shadowed"
    for name in ("tqdm", "numpy", "json"):  # what tfcli and the worker import: never these files
        (project.root / f"{name}.py").write_text(SHADOW.format(marker=str(marker)))
    (project.root / "modules").mkdir()
    (project.root / "modules" / "userlayers.py").write_text(LAYER)
    agent = json.loads((project.root / "configs" / "agents" / "vpg_cartpole.json").read_text())
    agent["network"] = [{"type": "userlayers:Wide", "size": 16}]
    (project.root / "wide.json").write_text(json.dumps(agent))
    created = tfcli(project.root, "experiment", "new", "-n", "wide", "-A", "wide.json", "-E", "cartpole", "-t", "600")
    assert created.returncode == 0, created.stderr
    experiment = Experiment.load(project, "wide")
    experiment.start()
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    assert not marker.exists()


ENVIRONMENT = '''
from gymnasium.envs.classic_control import CartPoleEnv


class Renamed(CartPoleEnv):
    """CartPole under a name of the user's."""
'''


def test_experiment_new_refuses_a_module_only_on_pythonpath_which_the_worker_never_reads(project, tmp_path):
    """The worker runs 'python -I' (no PYTHONPATH): a module found by 'experiment new' through PYTHONPATH made an
    experiment that failed at once on start ("cannot import module"). tfcli reads no PYTHONPATH either, and says
    where the module is and where it belongs; in the project's modules/ folder it is found by both."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "userenvs.py").write_text(ENVIRONMENT)
    environment = {**os.environ, "PYTHONPATH": str(elsewhere)}
    command = [sys.executable, "-m", "torchforce", "experiment", "new", "-n", "renamed", "-A", "ppo_cartpole"]
    command += ["-E", "userenvs:Renamed", "-t", "600"]
    refused = subprocess.run(command, cwd=project.root, env=environment, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "cannot import module 'userenvs'" in refused.stderr
    assert f"'userenvs' is in {elsewhere}, on PYTHONPATH" in refused.stderr and "modules/ folder" in refused.stderr
    assert project.store.experiment("renamed") is None and not (project.root / "experiments" / "renamed").exists()
    (project.root / "modules").mkdir()
    (project.root / "modules" / "userenvs.py").write_text(ENVIRONMENT)
    created = subprocess.run(command, cwd=project.root, env=environment, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    experiment = Experiment.load(project, "renamed")
    experiment.start()
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
