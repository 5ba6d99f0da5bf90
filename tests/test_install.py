"""A fresh install of the core package, as a user gets it: ``pip install torchforce`` without extras into a new
virtual environment (torch pinned through constraints.txt, as the Makefile and CI pin it), then, from a folder
outside the repository, the README's first library example (on a smaller budget: tests/test_readme_library.py runs
it verbatim) and its tfcli quick start. The optional packages (MuJoCo, ale-py, pygame, Ray) must not come along,
and using what needs them must say which extra to install.

pip resolves every dependency for real (the configured package indexes), so this takes a few minutes: marked slow.
It installs with ``--no-compile`` and lets Python write the bytecode of the modules it imports on first use: pip
would byte-compile every file of torch, half of the install here (75 s against 38), for the few this test imports.
Everything it makes lives in pytest's temporary folder, and the environment is removed afterwards; the package is
built from a copy of its source, so no ``build/`` or ``*.egg-info`` is left in the repository."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("mujoco", "ale_py", "pygame", "ray")  # modules of the extras mujoco, atari, classic-control, ray
INSTALL_SECONDS = 1200
# Each optional feature, used in the core install: it must fail with an error that names its extra.
MISSING_EXTRAS = """
import json
from torchforce.environments import Gym
from torchforce.spec import SpecError

uses = {
    "atari": lambda: Gym("ALE/Pong-v5"),
    "mujoco": lambda: Gym("HalfCheetah-v5"),
    "classic-control": lambda: Gym("CartPole-v1", render_mode="rgb_array"),
}
errors = {}
for extra, use in uses.items():
    try:
        use()
    except SpecError as error:
        errors[extra] = str(error)
try:
    from torchforce.execution import DistributedRunner

    DistributedRunner(None, "CartPole-v1")
except ImportError as error:
    errors["ray"] = str(error)
print(json.dumps(errors))
"""
RUN_SECONDS = 600


def readme_block(heading: str, language: str) -> str:
    """The first ``language`` code block after the README's ``heading`` line."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    match = re.compile(rf"^```{language}\n(.*?)^```$", re.S | re.M).search(text, start)
    assert match is not None, f"README.md has no ```{language} block after '{heading}'"
    return match.group(1)


def quick_start() -> list[list[str]]:
    """``tfcli init``, ``experiment new`` (with a small budget) and ``experiment start --follow`` as the README's
    client block writes them."""
    lines = [line.split("#", 1)[0].strip() for line in readme_block("## The client", "bash").splitlines()]
    wanted = [
        next(line for line in lines if line.startswith(prefix))
        for prefix in ("tfcli init", "tfcli experiment new ", "tfcli experiment start ")
    ]
    assert "--follow" in wanted[2], wanted[2]
    wanted[1] = re.sub(r"(-t|--timesteps) \d+", r"\1 2000", wanted[1])
    assert "-t 2000" in wanted[1] or "--timesteps 2000" in wanted[1], wanted[1]
    return [shlex.split(line)[1:] for line in wanted]


def constraint(name: str) -> str:
    """The version constraints.txt pins ``name`` to."""
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip().startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"constraints.txt pins no {name}")


def run(command: list, cwd: Path, env: dict, timeout: int = RUN_SECONDS) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture
def venv(tmp_path):
    """A new virtual environment's folder, removed after the test (about 1.2 GB, most of it torch)."""
    folder = tmp_path / "venv"
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_core_install_runs_the_readme_without_the_optional_packages(tmp_path, venv):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "torchforce", source / "torchforce", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    unset = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")  # bytecode: see the docstring
    env = {key: value for key, value in os.environ.items() if key not in unset}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), MPLBACKEND="Agg", PIP_NO_INPUT="1")
    run([sys.executable, "-m", "venv", venv], tmp_path, env)
    python, tfcli = venv / "bin" / "python", venv / "bin" / "tfcli"
    run(
        [python, "-m", "pip", "install", "-q", "--no-compile", "-c", ROOT / "constraints.txt", source],
        tmp_path,
        env,
        timeout=INSTALL_SECONDS,
    )

    listed = json.loads(run([python, "-m", "pip", "list", "--format=json"], tmp_path, env))
    installed = {entry["name"].lower() for entry in listed}
    assert {"torchforce", "torch", "gymnasium", "tensorboard", "matplotlib"} <= installed
    assert not installed & {"mujoco", "ale-py", "pygame", "pygame-ce", "ray"}, sorted(installed)
    probe = (
        "import importlib.util, json, torch\n"
        f"print(json.dumps([torch.__version__, [m for m in {list(OPTIONAL)!r} if importlib.util.find_spec(m)]]))"
    )
    version, importable = json.loads(run([python, "-c", probe], tmp_path, env))
    assert importable == []
    assert version.split("+")[0] == constraint("torch")
    errors = json.loads(run([python, "-c", MISSING_EXTRAS], tmp_path, env))
    assert sorted(errors) == ["atari", "classic-control", "mujoco", "ray"], errors
    for extra, message in errors.items():
        assert f"pip install 'torchforce[{extra}]'" in message, message

    example = tmp_path / "example"
    example.mkdir()
    code, changed = re.subn(r"num_timesteps=[\d_]+", "num_timesteps=4_000", readme_block("## The library", "python"))
    assert changed == 1, code
    (example / "readme_library.py").write_text(code)
    run([python, "readme_library.py"], example, env)

    project = tmp_path / "project"
    project.mkdir()
    commands = quick_start()
    for arguments in commands:
        run([tfcli, *arguments], project, env)
    name = commands[1][commands[1].index("-n") + 1]
    listing = run([tfcli, "experiment", "list"], project, env)
    assert re.search(rf"^{re.escape(name)}\s.*\bfinished\b", listing, re.M), listing
    assert name in run([tfcli, "experiment", "compare", name], project, env)
    run([tfcli, "experiment", "plot", "-e", name], project, env)
    results = project / "experiments" / name / "results"
    assert (results / "learning_curve.png").stat().st_size > 0
    assert list((results / "summaries").glob("events.out.tfevents.*"))  # TensorBoard, from the core
