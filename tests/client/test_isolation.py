"""The project folder is never on a worker's import path, and user classes come from the project's ``modules/``
folder only: the same for validation (``experiment new``) and for the worker (``start``)."""

from __future__ import annotations

import json

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
