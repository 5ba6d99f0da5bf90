"""Environment names: what a string that names an environment means, wherever one is named (``make``,
``make_vector``, ``Environment.from_spec``, an experiment's ``environment``, ``tfcli experiment new -E``).

A name is, in this order:

1. a torchforce environment type, or one of its 2018 names (``"minimal"``, ``"gym"``, ``"openai_gym"``);
2. ``"module:Name"``: ``module`` is imported, and ``Name`` is a torchforce ``Environment`` subclass (built with the
   spec's arguments), a ``gymnasium.Env`` subclass (built through the Gym adapter, which adds the 2018 options and
   maps the spaces), or, Gymnasium's own form, an id that importing ``module`` registers (``"my_package:MyEnv-v0"``);
   what a spec may import is limited as for any class named by path (see ``torchforce.spec.registry``);
3. a Gymnasium id: one Gymnasium ships (``"CartPole-v1"``, ``"HalfCheetah-v5"``), one of ale-py (``"ALE/Pong-v5"``),
   or one an installed package registers through a ``gymnasium.envs`` entry point.

Gymnasium 1.x has no plugin system: a package registers its ids when it is imported, which is what ``"package:Id"``
is for. Gymnasium 0.26 to 0.29 imported every package declaring a ``gymnasium.envs`` entry point; packages written
for them still declare one, so before an id is called unknown, ``register_installed`` loads those entry points (and
ale-py) as those versions did.

``spec_for_name`` turns a name into the spec that builds it, the form an experiment stores so that its worker
rebuilds the very same environment: ``{"type": "gym", "gym_id": "HalfCheetah-v5"}``, ``{"type": "minimal"}``,
``{"type": "my_module:MyEnvironment"}``, ``{"type": "gym", "gym_id": "my_module:MyGymnasiumEnv"}``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import inspect
import re
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from torchforce.spec import SpecError, did_you_mean, import_path
from torchforce.spec.errors import describe, what_it_is
from torchforce.spec.registry import check_module, installed_packages

# A versioned Gymnasium id ("CartPole-v1", "ALE/Pong-v5", "my_package:MyEnv-v0"): the Gym adapter builds it.
GYM_ID = re.compile(r"^(?:[\w.-]+/)?[\w.:-]+-v\d+$")

# The entry point group of Gymnasium 0.26-0.29's plugins, and its names that register outside any namespace.
PLUGIN_GROUP = "gymnasium.envs"
ROOT_PLUGINS = ("__root__", "__internal__")

LIST_IDS = 'List the registered ids with: python -c "import gymnasium; gymnasium.pprint_registry()".'
PACKAGE_IDS = "An id of a package that registers its ids when imported is named 'package:Id-v0'."
ATARI_EXTRA = "Atari ids ('ALE/Pong-v5') come with ale-py: pip install 'torchforce[atari]'."

_loaded_plugins: set[str] = set()


def gym_registry() -> Mapping[str, Any]:
    """Gymnasium's registry of ids (imports Gymnasium)."""
    import gymnasium

    return gymnasium.registry


def gymnasium_env() -> type | None:
    """``gymnasium.Env``, or None while Gymnasium is not imported (then no object can be one)."""
    gymnasium = sys.modules.get("gymnasium")
    return getattr(gymnasium, "Env", None)


def is_gymnasium_env(value: Any) -> bool:
    env = gymnasium_env()
    return env is not None and isinstance(value, env)


def is_gymnasium_env_class(value: Any) -> bool:
    env = gymnasium_env()
    return env is not None and inspect.isclass(value) and issubclass(value, env)


def register_installed() -> None:
    """Register the ids of installed packages that Gymnasium 1.x leaves unregistered until they are imported: ale-py's
    Atari games, and those of packages declaring a ``gymnasium.envs`` entry point (see the module doc). Each entry
    point is loaded once; one that fails is skipped with a warning, so that a broken package hides no other."""
    try:
        import ale_py
    except ImportError:
        pass
    else:
        import gymnasium

        gymnasium.register_envs(ale_py)
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        key = f"{entry.name}={entry.value}"
        if key not in _loaded_plugins:
            _loaded_plugins.add(key)
            _load_plugin(entry)


def _load_plugin(entry: importlib.metadata.EntryPoint) -> None:
    """Run one ``gymnasium.envs`` entry point: import its module and call its function, if it names one, with the
    ids it registers put in the namespace named by the entry point (none for ``__root__``)."""
    from gymnasium.envs.registration import namespace

    where = f"the {PLUGIN_GROUP} entry point '{entry.name} = {entry.value}'"
    try:
        check_module(entry.module, entry.value, where, package="gymnasium", holds="Gymnasium environment")
        with contextlib.nullcontext() if entry.name in ROOT_PLUGINS else namespace(entry.name):
            loaded = entry.load()
            if entry.attr is not None and callable(loaded):
                loaded()
    except Exception as error:  # noqa: BLE001 - a package's broken plugin must not stop the lookup of an id
        warnings.warn(f"{where} failed, its ids are not registered: {error}", UserWarning, stacklevel=4)


def is_registered(gym_id: str) -> bool:
    """Whether Gymnasium knows ``gym_id``, once the installed packages have registered theirs."""
    if gym_id in gym_registry():
        return True
    register_installed()
    return gym_id in gym_registry()


def gym_ids() -> list[str]:
    """Every registered Gymnasium id, the installed packages' included."""
    register_installed()
    return sorted(gym_registry())


def _closest(name: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate, compared without case (``cartpole`` is close to ``CartPole-v1``)."""
    by_lower: dict[str, str] = {}
    for candidate in candidates:
        by_lower.setdefault(candidate.lower(), candidate)
    guess = did_you_mean(name.lower(), by_lower)
    return by_lower[guess] if guess is not None else None


def atari_id(gym_id: str) -> str | None:
    """'ALE/<Game>-v5' for any spelling of an Atari game name (2018 'SpaceInvaders-v0', 'breakout-v3'...)."""
    base = gym_id.rsplit("/", 1)[-1].split("-v")[0]
    base = re.sub(r"(NoFrameskip|Deterministic)$", "", base).lower()
    for known in gym_registry():
        if known.startswith("ALE/") and known.split("/", 1)[1].split("-v")[0].lower() == base:
            return known.split("-v")[0] + "-v5"
    return None


def newest_version(gym_id: str) -> str | None:
    """The highest registered version of the same environment name, if it is not ``gym_id`` itself."""
    stem = gym_id.rsplit("-v", 1)[0]
    versions = [k for k in gym_registry() if k.rsplit("-v", 1)[0] == stem and k.rsplit("-v", 1)[-1].isdigit()]
    newest = max(versions, key=lambda k: int(k.rsplit("-v", 1)[1]), default=None)
    return newest if newest != gym_id else None


def unknown_id_error(gym_id: str, path: str, *, configs: Sequence[str] | None = None) -> SpecError:
    """The error for an id Gymnasium does not know: the Atari id for an Atari game, else the closest id (or, with
    ``configs``, the names of the environment configs the caller looked in first, the closest config)."""
    register_installed()
    hints = []
    atari = atari_id(gym_id)
    if atari is not None:
        hints.append(f"Atari games are '{atari}' in Gymnasium (ale-py).")
    ale_missing = importlib.util.find_spec("ale_py") is None  # then no Atari id is known, nor atari_id's answer
    if ale_missing and gym_id.startswith("ALE/"):
        hints.append(ATARI_EXTRA)
    guess = _closest(gym_id, [*gym_registry(), *(configs or ())])
    if guess and guess != atari:
        hints.append(f"Did you mean '{guess}'?")
    if not hints:
        hints += [PACKAGE_IDS, LIST_IDS, *([ATARI_EXTRA] if ale_missing else [])]
    if configs is None:
        message = f"unknown Gymnasium id '{gym_id}'"
    else:
        message = f"no environment config named '{gym_id}', nor a Gymnasium id of that name"
    return SpecError(path, message, hint=" ".join(hints))


def unknown_name_error(name: str, path: str, *, configs: Sequence[str] | None = None) -> SpecError:
    """The error for a name that is no environment type, no Gymnasium id and no ``module:Name``; it suggests the
    closest of them all (with ``configs``, of the environment configs the caller looked in first too)."""
    from torchforce.environments import ENVIRONMENTS

    types = ENVIRONMENTS.names()
    guess = _closest(name, [*(configs or ()), *types, *ENVIRONMENTS.aliases, *gym_ids()])
    forms = "a Gymnasium id ('CartPole-v1', 'ALE/Pong-v5') or 'module:Class'"
    if configs is None:
        message = f"unknown environment {describe(name)}"
        hint = f"Environment types: {', '.join(types)}; or {forms}."
    else:
        message = f"no environment config named '{name}', nor a Gymnasium id or environment type of that name"
        known = f"Environment configs: {', '.join(configs)}." if configs else "configs/environments/ is empty."
        hint = f"{known} Or {forms}; environment types: {', '.join(types)}."
    return SpecError(path, message, hint=hint + (f" Did you mean '{guess}'?" if guess else f" {LIST_IDS}"))


def spec_for_name(name: str, path: str = "environment", *, configs: Sequence[str] | None = None) -> dict[str, Any]:
    """The spec of the environment ``name`` names (see the module doc), as an experiment stores it.

    A Gymnasium id must be registered, unless it is ``"module:Id"``: its module is imported by the Gym adapter, which
    says what is wrong with it. ``configs`` are given by a caller that looked for an environment config of that name
    first (``tfcli experiment new -E``): an unknown name's error then says so and suggests among the configs too.
    """
    from torchforce.environments import ENVIRONMENTS

    if not isinstance(name, str) or not name.strip():
        raise SpecError(path, "not an environment name", got=name, expected="a name like 'CartPole-v1' or 'minimal'")
    if ENVIRONMENTS.canonical(name) is not None:
        return {"type": name}
    if GYM_ID.match(name):
        if ":" not in name and not is_registered(name):
            raise unknown_id_error(name, path, configs=configs)
        return {"type": "gym", "gym_id": name}
    if ":" in name:
        return _module_spec(name, path)
    if "." in name:  # the 2018 dotted path of a class, "package.module.Class"
        return {"type": name}
    if is_registered(name):  # an id registered without a version
        return {"type": "gym", "gym_id": name}
    raise unknown_name_error(name, path, configs=configs)


def _module_spec(target: str, path: str) -> dict[str, Any]:
    """The spec of ``"module:Name"``: a torchforce Environment class, a gymnasium.Env class or an id the module
    registers. The module is checked before it is imported (see ``_check_module``), the class before it is built."""
    from torchforce.environments.environment import Environment

    module_name, _, attribute = target.partition(":")
    _check_module(module_name, target, path)
    try:
        value = import_path(target, path, kind="environment")
    except SpecError:
        if module_name in sys.modules and is_registered(attribute):
            return {"type": "gym", "gym_id": target}
        raise
    if inspect.isclass(value) and issubclass(value, Environment):
        return {"type": target}
    if is_gymnasium_env_class(value):
        return {"type": "gym", "gym_id": target}
    raise SpecError(
        path,
        f"'{target}' is not an environment class",
        got=what_it_is(value),
        expected="a subclass of torchforce.environments.Environment or of gymnasium.Env",
    )


def _check_module(module_name: str, target: str, path: str) -> None:
    """Refuse, before importing it, a module that cannot hold an environment: one of the standard library, a
    ``__main__`` module, or one of an installed package that depends on neither torchforce nor Gymnasium."""
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise SpecError(path, "not an importable path", got=target, expected="'package.module:Class'")
    check_module(module_name, target, path, holds="environment")
    installed = installed_packages(module_name)
    if not installed:
        return  # the user's own module
    torchforce = installed_packages(__name__)
    for package in (torchforce[0] if torchforce else None, "gymnasium"):
        try:
            check_module(module_name, target, path, package=package, holds="environment")
            return
        except SpecError:
            continue
    raise SpecError(
        path,
        f"module '{module_name}' belongs to the installed package '{installed[0]}', which depends on neither "
        "torchforce nor gymnasium and so holds no environment",
        got=target,
        hint="Importing a module runs its code, so a config may name only modules of packages built on torchforce "
        "or gymnasium, and your own modules.",
    )
