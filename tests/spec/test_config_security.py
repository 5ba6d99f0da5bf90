"""Issue 7 ("Hardening"), library level: a config, a checkpoint or a results folder runs nothing but what the user
chose to run. Each attack writes a marker file when it succeeds; the tests run it and show the marker never appears.

- A type path names only a subclass of its registry's base class, checked before anything is called; modules of the
  standard library, ``__main__`` modules and installed packages that cannot hold the class are not even imported.
- ``gym_id``'s ``"module:Id"`` imports only a Gymnasium package's module (or the user's own).
- Resuming unpickles nothing but the environments' state this user signed (or ``trust_pickle=True``); the runner
  state is JSON plus tensors loaded with ``weights_only=True``; nothing is followed out of the checkpoints folder.
- Checkpoint files get the usual permissions (0666 less the umask), like every other results file.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import shlex
import shutil
import stat
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from torch import nn

from torchforce.agents import create_agent
from torchforce.client.checkpoints import Checkpoints
from torchforce.core.baselines import build_baseline
from torchforce.core.distributions import build_distribution
from torchforce.core.explorations import build_explorations
from torchforce.core.memories import build_memory
from torchforce.core.networks import build_network
from torchforce.core.optimizers import build_optimizer
from torchforce.core.optimizers.synchronization import build_synchronization
from torchforce.core.preprocessors import build_preprocessing
from torchforce.environments import make, make_vector
from torchforce.execution import Runner
from torchforce.spec import ActionSpec, SpecError, StateSpec

STATES = {"state": StateSpec("state", (4,), "float")}
INT = ActionSpec("move", "int", (), num_actions=3)
MINIMAL = make("minimal")
PPO = {
    "type": "ppo",
    "network": [{"type": "dense", "size": 8}],
    "update_mode": {"unit": "episodes", "batch_size": 2},
    "seed": 3,
}


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "attack-ran"
    yield path
    assert not path.exists(), "the attack ran"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def users_module(tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The user's own module (on sys.path, not installed): importing it is fine (user classes are code by design),
    but calling ``boom`` or building ``Boom`` writes the marker."""
    name = unique("tf_users_module")
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / f"{name}.py").write_text(
        f"from pathlib import Path\n\nMARKER = Path({str(marker)!r})\n\n\n"
        "def boom(*args, **kwargs):\n    MARKER.write_text('ran')\n\n\n"
        "class Boom:\n    def __init__(self, *args, **kwargs):\n        MARKER.write_text('ran')\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    return name


def installed_package(site: Path, code: str, requires: tuple[str, ...] = (), main: str | None = None) -> str:
    """A package "installed" in ``site`` (a dist-info with METADATA and top_level.txt); its import runs ``code``."""
    name = unique("tf_installed")
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(code)
    if main is not None:
        (site / name / "__main__.py").write_text(main)
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    (info / "METADATA").write_text(metadata + "".join(f"Requires-Dist: {name}\n" for name in requires))
    (info / "top_level.txt").write_text(name + "\n")
    return name


def touch(marker: Path) -> str:
    return f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"


# -- item 1: a path names a subclass of the registry's base, or nothing runs -----------------------------------------

BUILDERS: dict[str, tuple[str, str, Callable[[str], Any]]] = {
    # kind: (where the error points, the kind's word, build from a type path)
    "environment": ("environment.type", "environment", lambda path: make({"type": path})),
    "agent": (
        "agent.type",
        "agent",
        lambda path: create_agent({"type": path}, states=MINIMAL.states, actions=MINIMAL.actions),
    ),
    "memory": ("memory.type", "memory", lambda path: build_memory({"type": path}, {}, rng=np.random.default_rng(0))),
    "optimizer": (
        "optimizer.type",
        "optimizer",
        lambda path: build_optimizer({"type": path}, [nn.Parameter(torch.zeros(2))]),
    ),
    "exploration": ("actions_exploration", "exploration", lambda path: build_explorations(path, {"move": INT})),
    "preprocessor": ("states_preprocessing", "preprocessor", lambda path: build_preprocessing(path, STATES)),
    "distribution": (
        "distributions.move.type",
        "distribution",
        lambda path: build_distribution(INT, 4, {"type": path}, path="distributions.move"),
    ),
    "baseline": ("baseline.type", "baseline", lambda path: build_baseline({"type": path}, STATES)),
    "layer": ("network[0].type", "layer", lambda path: build_network([{"type": path}], STATES)),
    "synchronization": (
        "synchronization.type",
        "synchronization",
        lambda path: build_synchronization({"type": path}, [], []),
    ),
}


@pytest.mark.parametrize("attribute", ["boom", "Boom"])
@pytest.mark.parametrize("kind", BUILDERS)
def test_a_type_path_to_anything_but_a_component_class_is_refused_before_it_is_called(
    kind: str, attribute: str, users_module: str, marker: Path
) -> None:
    where, word, build = BUILDERS[kind]
    target = f"{users_module}:{attribute}"
    with pytest.raises(SpecError) as caught:
        build(target)
    what = "function" if attribute == "boom" else "class"
    assert re.fullmatch(
        rf"{re.escape(where)}: '{re.escape(target)}' is not an? {word} class; expected a subclass of [\w. ]+, "
        rf"got the {what} {users_module}\.{attribute}\.",
        str(caught.value),
    ), str(caught.value)


@pytest.mark.parametrize("spec", ["{module}:boom", "{module}:Boom", {"type": "{module}:Boom"}])
def test_a_network_path_must_name_a_module_class(spec: Any, users_module: str, marker: Path) -> None:
    spec = (
        {"type": spec["type"].format(module=users_module)}
        if isinstance(spec, dict)
        else spec.format(module=users_module)
    )
    with pytest.raises(SpecError, match="not a network class|cannot be built"):
        build_network(spec, STATES)


def test_an_environment_spec_cannot_run_a_shell_command(marker: Path) -> None:
    spec = {"type": "os:system", "command": f"touch {shlex.quote(str(marker))}"}
    with pytest.raises(SpecError) as caught:
        make(spec)
    assert str(caught.value) == (
        "environment.type: module 'os' belongs to Python's standard library, which holds no environment; "
        'got "os:system".\n  Name a module of your own, or one of an installed package built on torchforce.'
    )


def test_create_agent_builds_only_agents() -> None:
    with pytest.raises(SpecError, match=r"^agent\.type: module 'types' belongs to Python's standard library"):
        create_agent("types:SimpleNamespace", states=MINIMAL.states, actions=MINIMAL.actions)
    with pytest.raises(SpecError, match=r"^agent\.type: 'torchforce\.environments:Minimal' is not an agent class"):
        create_agent("torchforce.environments:Minimal", states=MINIMAL.states, actions=MINIMAL.actions)


@pytest.mark.parametrize("target", ["os:system", "subprocess:Popen", "builtins:eval", "pip.__main__:Thing"])
def test_no_standard_library_or_main_module_is_imported_for_a_spec(target: str) -> None:
    with pytest.raises(SpecError, match="standard library|program's entry point"):
        create_agent({"type": target}, states=MINIMAL.states, actions=MINIMAL.actions)


@pytest.mark.parametrize("target", ["test.autotest:Thing", "__hello__:Thing", "_testcapi:Thing"])
def test_modules_that_come_with_python_but_are_not_named_as_its_library_are_refused_too(target: str) -> None:
    """``sys.stdlib_module_names`` leaves out CPython's test suite (``test``: importing ``test.autotest`` runs the
    test runner) and helpers such as ``_testcapi``; they come with the interpreter all the same, and are refused
    before anything is imported."""
    module = target.partition(":")[0]
    assert module not in sys.modules
    with pytest.raises(SpecError, match=r"^agent\.type: module '[\w.]+' belongs to Python's standard library"):
        create_agent({"type": target}, states=MINIMAL.states, actions=MINIMAL.actions)
    assert module not in sys.modules


@pytest.mark.parametrize("spec", ["{name}:Thing", {"type": "{name}:Thing"}])
def test_a_network_class_is_imported_only_from_a_package_built_on_torch(
    spec: Any, tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network's type path skipped the package check that every other registry makes: a module of any installed
    package was imported (its code run) before the class was found not to be a network."""
    name = installed_package(tmp_path / "site", touch(marker) + "class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = {"type": spec["type"].format(name=name)} if isinstance(spec, dict) else spec.format(name=name)
    with pytest.raises(SpecError, match=rf"module '{name}' belongs to the installed package '{name}', which does not"):
        build_network(spec, STATES)
    assert name not in sys.modules


def test_an_installed_package_that_cannot_hold_the_class_is_not_imported(
    tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = installed_package(tmp_path / "site", touch(marker) + "class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(SpecError) as caught:
        make({"type": f"{name}:Thing"})
    assert str(caught.value) == (
        f"environment.type: module '{name}' belongs to the installed package '{name}', which depends on neither "
        f'torchforce nor gymnasium and so holds no environment; got "{name}:Thing".\n  Importing a module runs its '
        "code, so a config may name only modules of packages built on torchforce or gymnasium, and your own modules."
    )


def test_the_2018_dotted_types_of_the_shipped_configs_still_load() -> None:
    environment = make({"type": "tensorforce.contrib.openai_gym.OpenAIGym", "gym_id": "CartPole-v1"})
    assert str(environment) == "Gym(CartPole-v1)"
    environment.close()
    assert type(make({"type": "torchforce.environments.minimal.Minimal"})).__name__ == "Minimal"  # dotted user path


# -- item 1: gym_id's "module:Id" imports only a Gymnasium package's module ------------------------------------------


def test_a_gym_id_cannot_import_a_module_of_the_standard_library() -> None:
    with pytest.raises(SpecError) as caught:
        make("os:CartPole-v1")
    assert str(caught.value) == (
        "environment.gym_id: module 'os' belongs to Python's standard library, which holds no Gymnasium "
        'environment; got "os:CartPole-v1".\n  Name a module of your own, or one of an installed package built on '
        "gymnasium."
    )


def test_a_gym_id_cannot_import_a_package_that_is_not_built_on_gymnasium(
    tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = installed_package(tmp_path / "site", touch(marker), requires=("numpy>=1",))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(
        SpecError,
        match=rf"^environment\.gym_id: module '{name}' belongs to the installed package "
        rf"'{name}', which does not depend on gymnasium",
    ):
        make(f"{name}:CartPole-v1")


def test_a_gym_id_cannot_import_a_main_module(tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = installed_package(tmp_path / "site", "", requires=("gymnasium>=1",), main=touch(marker))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(SpecError, match="is a program's entry point"):
        make(f"{name}.__main__:CartPole-v1")


def test_a_gymnasium_package_may_register_its_environments_on_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_id = f"TfRegisteredOnImport{uuid.uuid4().hex[:6]}-v0"
    code = (
        f"import gymnasium\ngymnasium.register(id={env_id!r}, "
        "entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv')\n"
    )
    name = installed_package(tmp_path / "site", code, requires=("gymnasium[classic-control]>=1.0",))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    try:
        environment = make(f"{name}:{env_id}")
        assert environment.gym_id == env_id
        environment.close()
    finally:
        gymnasium.registry.pop(env_id, None)


# -- item 2: resuming unpickles only what this user signed ----------------------------------------------------------


class Attack:
    """A pickle that runs a shell command when it is loaded."""

    def __init__(self, marker: Path) -> None:
        self.command = f"touch {shlex.quote(str(marker))}"

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (self.command,)


def plant(folder: Path, marker: Path) -> None:
    """What someone who can write to a results folder does: every pickle in the checkpoint becomes an attack (the
    runner.json bookkeeping adjusted to match, as they can write that too)."""
    payload = pickle.dumps(Attack(marker))
    for file in ("runner.pkl", "environments.pkl"):
        (folder / file).write_bytes(payload)
    runner = folder / "runner.json"
    if runner.exists():
        record = json.loads(runner.read_text())
        record["environments"]["lengths"] = [len(payload)]
        runner.write_text(json.dumps(record))


@pytest.fixture
def user_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This user's data folder (holding the checkpoint signing key), in the test's temporary folder."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


def build() -> tuple[Any, Any, Runner]:
    environments = make_vector("minimal", 2, seed=1)
    agent = create_agent(PPO, states=environments.states, actions=environments.actions)
    return environments, agent, Runner(agent, environments)


def save(folder: Path, steps: int = 36) -> tuple[Path, Runner]:
    """A run of ``steps`` steps in two environments, checkpointed mid-episode; returns the checkpoint folder."""
    environments, agent, runner = build()
    runner.run(num_timesteps=steps)
    state = {
        "runner": runner.state_dict(),
        "environments": environments.get_state(),
        "elapsed": 1.5,
        "recent": [1.0, 2.0],
        "episode_log_bytes": 7,
    }
    pointer = Checkpoints(folder).save(agent, state, {"timesteps": runner.global_timestep, "episodes": 3})
    return folder / pointer["folder"], runner


def test_resuming_never_unpickles_a_planted_environment_state(
    tmp_path: Path, user_data: Path, marker: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, _ = save(tmp_path / "checkpoints")
    plant(folder, marker)
    _, agent, _ = build()
    with caplog.at_level(logging.WARNING, "torchforce.worker"):
        pointer, state = Checkpoints(tmp_path / "checkpoints").load(agent)
    assert state["environments"] is None and state["runner"]["rows"] is None  # fresh environments, new episodes
    assert state["elapsed"] == 1.5 and state["recent"] == [1.0, 2.0] and state["runner"]["global_timestep"] == 36
    assert (
        "the environments' state (environments.pkl) is not loaded, because it is not signed with this user's key"
        in caplog.text
        and "starting new episodes" in caplog.text
    )


def test_a_checkpoint_signed_by_someone_else_starts_new_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "their-data"))
    save(tmp_path / "checkpoints")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "my-data"))
    _, agent, _ = build()
    with caplog.at_level(logging.WARNING, "torchforce.worker"):
        _, state = Checkpoints(tmp_path / "checkpoints").load(agent)
    assert state["environments"] is None and state["runner"]["rows"] is None
    assert "not signed with this user's key" in caplog.text
    _, trusted = Checkpoints(tmp_path / "checkpoints").load(agent, trust_pickle=True)  # the user's explicit opt-in
    assert isinstance(trusted["environments"], list) and trusted["runner"]["rows"] is not None


def test_trust_pickle_false_never_reads_the_environments_state(
    tmp_path: Path, user_data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save(tmp_path / "checkpoints")
    _, agent, runner = build()
    with caplog.at_level(logging.WARNING, "torchforce.worker"):
        _, state = Checkpoints(tmp_path / "checkpoints").load(agent, trust_pickle=False)
    assert state["environments"] is None and "because trust_pickle is False" in caplog.text
    runner.load_state_dict(state["runner"])
    runner.run(num_timesteps=10)  # new episodes in the fresh environments; the counters go on
    assert runner.global_timestep == 46


def test_a_signed_checkpoint_resumes_exactly(tmp_path: Path, user_data: Path) -> None:
    folder, straight = save(tmp_path / "checkpoints")
    straight.run(num_timesteps=30, resume=True)
    environments, agent, runner = build()
    _, state = Checkpoints(tmp_path / "checkpoints").load(agent)
    runner.load_state_dict(state["runner"])
    environments.set_state(state["environments"])
    runner.run(num_timesteps=30, resume=True)
    assert runner.episode_rewards == straight.episode_rewards and runner.global_timestep == 66
    assert stat.S_IMODE((user_data / "torchforce" / "checkpoint.key").stat().st_mode) == 0o600


def test_the_runner_state_is_plain_data(tmp_path: Path, user_data: Path) -> None:
    folder, runner = save(tmp_path / "checkpoints")
    assert sorted(path.name for path in folder.iterdir()) == [
        "checkpoint",
        "environments.pkl",
        "model.json",
        "model.pt",
        "runner.json",
        "runner.pt",
    ]
    record = json.loads((folder / "runner.json").read_text())
    assert record["state"]["runner"]["episode_rewards"] == runner.state_dict()["episode_rewards"]
    assert record["state"]["recent"] == [1.0, 2.0]
    arrays = torch.load(folder / "runner.pt", weights_only=True)
    assert all(isinstance(value, torch.Tensor) for value in arrays.values())
    assert re.fullmatch(r"[0-9a-f]{64}", record["environments"]["hmac"])


@pytest.mark.parametrize("escape", ["relative", "absolute", "symlinked folder", "symlinked file", "symlinked pointer"])
def test_a_checkpoint_is_never_followed_out_of_the_checkpoints_folder(
    escape: str, tmp_path: Path, user_data: Path, marker: Path
) -> None:
    checkpoints = tmp_path / "results" / "checkpoints"
    folder, _ = save(checkpoints)
    outside = tmp_path / "elsewhere"
    shutil.copytree(folder, outside)
    plant(outside, marker)
    pointer = json.loads((checkpoints / "latest.json").read_text())
    if escape == "relative":
        pointer["folder"] = os.path.relpath(outside, checkpoints)
    elif escape == "absolute":
        pointer["folder"] = str(outside)
    elif escape == "symlinked folder":
        shutil.rmtree(folder)
        folder.symlink_to(outside, target_is_directory=True)
    elif escape == "symlinked file":
        for name in ("runner.pkl", "environments.pkl"):
            (folder / name).unlink(missing_ok=True)
            (folder / name).symlink_to(outside / name)
    else:
        (tmp_path / "latest.json").write_text(json.dumps({**pointer, "folder": str(outside)}))
        (checkpoints / "latest.json").unlink()
        (checkpoints / "latest.json").symlink_to(tmp_path / "latest.json")
    if escape in ("relative", "absolute"):
        (checkpoints / "latest.json").write_text(json.dumps(pointer))
    _, agent, _ = build()
    with pytest.raises(ValueError, match="out of the checkpoints folder|never followed out of the results folder"):
        Checkpoints(checkpoints).load(agent)


def test_a_pickled_runner_state_of_the_first_format_loads_only_when_trusted(
    tmp_path: Path, user_data: Path, marker: Path
) -> None:
    folder, _ = save(tmp_path / "checkpoints")
    (folder / "runner.json").unlink(missing_ok=True)  # the first format: the whole runner state as runner.pkl
    (folder / "runner.pt").unlink(missing_ok=True)
    plant(folder, marker)
    _, agent, _ = build()
    with pytest.raises(ValueError, match=r"written by an earlier torchforce: its runner state is a pickle"):
        Checkpoints(tmp_path / "checkpoints").load(agent)


# -- item 3: one permission policy: results get 0666 / 0777 less the umask -------------------------------------------


@pytest.mark.parametrize(("umask", "file_mode", "folder_mode"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_checkpoints_and_agent_files_get_the_usual_permissions(
    umask: int, file_mode: int, folder_mode: int, tmp_path: Path, user_data: Path
) -> None:
    previous = os.umask(umask)
    try:
        folder, _ = save(tmp_path / "checkpoints")
        _, agent, _ = build()
        agent.save_model(tmp_path / "saver")
    finally:
        os.umask(previous)
    files = [*(tmp_path / "checkpoints").rglob("*"), *(tmp_path / "saver").rglob("*")]
    for path in files:
        expected = folder_mode if path.is_dir() else file_mode
        assert stat.S_IMODE(path.stat().st_mode) == expected, path
    assert {path.name for path in files} >= {"model.pt", "runner.json", "runner.pt", "environments.pkl", "latest.json"}
    assert stat.S_IMODE((user_data / "torchforce" / "checkpoint.key").stat().st_mode) == 0o600  # a secret: private
