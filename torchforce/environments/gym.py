"""The Gymnasium adapter: any Gymnasium environment as a 2018-style Environment (the 2018 ``OpenAIGym``).

It wraps a registered id, a ``gymnasium.Env`` subclass (``"module:Class"``, or the class itself) or a ready
``gymnasium.Env``. Classic control, Box2D, toy text and MuJoCo ids come from Gymnasium itself; Atari ids
(``ALE/Pong-v5`` and the legacy ``Pong-v0``/``PongNoFrameskip-v4`` forms) are registered by ale-py, imported only
when an id is not already known, like the other packages' plugins (``torchforce.environments.names``). Spaces map to
specs as described in ``torchforce.environments.spaces``.

2018 options:
- ``visualize=True`` opens a window (``render_mode="human"``). That needs a display; without one (no ``DISPLAY``
  or ``WAYLAND_DISPLAY``) it is a SpecError rather than a crash deep inside pygame.
- ``monitor=DIR`` appends one JSON line per finished episode to ``DIR/episodes.jsonl`` (``episode``, ``reward``,
  ``length``, ``terminal``, ``seconds``). Records already in ``DIR`` are replaced when the environment is built;
  ``monitor_safe=True`` refuses such a directory instead, and ``monitor_continue=True`` keeps them and appends
  (what SB3's ``Monitor`` does with ``override_existing=False``; tfcli's worker sets it for a run it resumes): the
  episodes go on being numbered from the last record. Episodes are numbered in the order they end, across
  everything that writes to one directory: the copies of a vectorized environment (``make_vector``, in this process
  or in worker processes) append to one file, each record taking the number after the file's last under a lock.
  ``monitor_video=N`` (> 0) also records every N-th episode of each copy as MP4 into ``DIR/videos`` through
  Gymnasium's ``RecordVideo`` (needs the ``moviepy`` package; without it, a SpecError says so); with
  ``monitor_continue`` a single environment's videos are numbered on from the last record too, so that its
  earlier videos are not overwritten (the copies of a vector number their videos each their own way, in one folder).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from torchforce.environments import snapshots
from torchforce.environments.environment import Environment
from torchforce.environments.names import (
    atari_id,
    gym_registry,
    is_gymnasium_env_class,
    is_registered,
    newest_version,
    unknown_id_error,
)
from torchforce.environments.records import EpisodeLog, last_episode, records_file
from torchforce.environments.spaces import actions_from_space, states_from_space
from torchforce.spec import SpecError, did_you_mean, expect_bool, expect_int
from torchforce.spec.errors import describe
from torchforce.spec.registry import check_module, missing_module_hint

# Keyword arguments of gymnasium.make itself (the others go to the environment's constructor).
MAKE_KWARGS = ("disable_env_checker", "render_mode")
# Gymnasium's environments that draw their frames with pygame, which the extra classic-control installs.
PYGAME_DRAWN = ("gymnasium.envs.classic_control", "gymnasium.envs.toy_text")
MONITOR_OPTIONS = ("monitor", "monitor_safe", "monitor_continue", "monitor_video")


def resolve_gym_id(gym_id: Any, path: str = "gym_id") -> str:
    """Check that ``gym_id`` names a Gymnasium environment (registering the installed packages' ids if needed, see
    ``torchforce.environments.names``); return what to make: the bare id, or ``"module:Class"`` for a
    ``gymnasium.Env`` subclass in a module.

    ``"module:Name"`` imports ``module`` first: for environments that register themselves on import, and for classes.
    Importing runs the module's code, so only a module that can hold a Gymnasium environment is imported: one of an
    installed package that is or depends on Gymnasium (ale-py, minigrid, shimmy, ...), or the user's own module
    (importable but not installed: a project's module folder, ``PYTHONPATH``). Standard-library modules, ``__main__``
    modules and modules of other installed packages are SpecErrors, raised before anything is imported (see
    ``torchforce.spec.registry``).
    """
    if not isinstance(gym_id, str) or not gym_id:
        raise SpecError(path, "not a Gymnasium id", got=gym_id, expected="a registered id like 'CartPole-v1'")
    if ":" in gym_id:
        target = gym_id
        module, _, gym_id = gym_id.partition(":")
        if not all(part.isidentifier() for part in module.split(".")):
            raise SpecError(path, "not a module name before ':'", got=target, expected="'package.module:Name-v0'")
        check_module(module, target, path, package="gymnasium", holds="Gymnasium environment")
        try:
            imported = importlib.import_module(module)
        except ModuleNotFoundError as error:
            hint = missing_module_hint(error.name or module)
            raise SpecError(path, f"cannot import module '{module}': {error}", hint=hint) from None
        except ImportError as error:
            raise SpecError(path, f"cannot import module '{module}': {error}") from None
        if gym_id not in gym_registry() and is_gymnasium_env_class(getattr(imported, gym_id, None)):
            return target
    if is_registered(gym_id):
        return gym_id
    raise unknown_id_error(gym_id, path)


def _spec_of(gym_id: str) -> Any:
    """The ``EnvSpec`` that ``gymnasium.make`` builds ``gym_id`` (as ``resolve_gym_id`` returns it) from."""
    if gym_id in gym_registry():
        return gym_registry()[gym_id]
    module, _, name = gym_id.partition(":")
    return _class_spec(getattr(sys.modules[module], name))


def _class_spec(env_class: Any) -> Any:
    """An unregistered ``EnvSpec`` for a ``gymnasium.Env`` subclass, so that ``gymnasium.make`` wraps it as it wraps
    registered ids (time limit, order and environment checks, render mode)."""
    from gymnasium.envs.registration import EnvSpec

    return EnvSpec(id=env_class.__name__, entry_point=env_class)


def _creator(spec: Any) -> Any:
    """What an ``EnvSpec``'s entry point calls: the environment class or function (imported if named by path)."""
    from gymnasium.envs.registration import load_env_creator

    return load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point


def _check_gym_kwargs(gym_id: str, spec: Any, kwargs: dict[str, Any], path: str) -> None:
    """Unknown constructor arguments are SpecErrors with a did-you-mean over what the environment accepts."""
    if not kwargs:
        return
    try:
        parameters = inspect.signature(_creator(spec)).parameters
    except Exception:  # noqa: BLE001 - an entry point we cannot inspect: gymnasium.make will judge the kwargs
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    accepted = [name for name in parameters if name != "self"] + list(MAKE_KWARGS)
    ours = ["max_episode_timesteps", "visualize", *MONITOR_OPTIONS, "seed"]
    for key in kwargs:
        if key not in accepted:
            guess = did_you_mean(key, accepted + ours)
            hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + ", ".join(sorted(set(accepted + ours))) + "."
            raise SpecError(f"{path}.{key}", f"unknown argument for '{gym_id}'", hint=hint)


def _kwarg_error(gym_id: str, spec: Any, kwargs: dict[str, Any], error: TypeError, path: str) -> SpecError:
    """A SpecError for a constructor that rejected a keyword (its signature hides behind ``**kwargs``)."""
    match = re.search(r"unexpected keyword argument '(\w+)'", str(error))
    if match is None or match.group(1) not in kwargs:
        return SpecError(path, f"cannot make '{gym_id}' with {describe(kwargs)}: {error}")
    key, accepted = match.group(1), []
    try:
        creator = _creator(spec)
        for klass in getattr(creator, "__mro__", [creator]):
            parameters = inspect.signature(klass).parameters if callable(klass) else {}
            accepted += [name for name, p in parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    except (TypeError, ValueError, AttributeError, ImportError):
        pass
    guess = did_you_mean(key, accepted + list(MAKE_KWARGS))
    hint = f"Did you mean '{guess}'?" if guess else None
    return SpecError(f"{path}.{key}", f"unknown argument for '{gym_id}'", hint=hint)


def wrapper_chain(env: Any) -> list[Any]:
    """``env`` and the environments it wraps, outermost first."""
    import gymnasium

    chain = [env]
    while isinstance(chain[-1], gymnasium.Wrapper):
        chain.append(chain[-1].env)
    return chain


def _life_wrapper(env: Any) -> Any:
    """The Atari life wrapper (``EpisodicLife``) among ``env``'s wrappers, or None."""
    from torchforce.environments.atari import EpisodicLife

    return next((wrapper for wrapper in wrapper_chain(env) if isinstance(wrapper, EpisodicLife)), None)


def _check_time_limit(env: Any, steps: int, path: str) -> None:
    """A ready environment's own ``TimeLimit`` (``gymnasium.make`` adds one) cuts its episodes before a longer
    ``max_episode_timesteps`` wrapped around it would: refused, rather than silently ignored."""
    import gymnasium

    for layer in wrapper_chain(env):
        if isinstance(layer, gymnasium.wrappers.TimeLimit) and layer._max_episode_steps < steps:
            name = env.spec.id if env.spec is not None else "the environment"
            raise SpecError(
                path,
                f"the ready environment already ends its episodes at {layer._max_episode_steps} steps (its "
                "TimeLimit), so a longer limit would never be reached",
                got=steps,
                expected=f"at most {layer._max_episode_steps}, or the environment made with "
                f"gymnasium.make('{name}', max_episode_steps={steps}) (or given by its id)",
            )


def _make(gym_id: str, spec: Any, max_episode_timesteps: int | None, gym_kwargs: dict[str, Any], path: str) -> Any:
    """``gymnasium.make`` of ``spec`` (named ``gym_id`` in messages) with its failures turned into SpecErrors that say
    what to change."""
    import gymnasium

    _check_gym_kwargs(gym_id, spec, gym_kwargs, path)
    if str(spec.entry_point).startswith("ale_py"):
        import ale_py

        # its banner goes to standard output when a game loads, into the middle of tfcli's tables (as in atari.py)
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    if str(spec.entry_point).startswith("ale_py") and not gym_id.startswith("ALE/"):
        atari = atari_id(gym_id)
        if atari is not None:
            warnings.warn(
                f"'{gym_id}' is a legacy Atari id with the old defaults (sticky actions, random frame skip for -v0);"
                f" Gymnasium's maintained id is '{atari}'.",
                UserWarning,
                stacklevel=4,
            )
    if str(spec.entry_point).startswith("gymnasium.envs.mujoco"):
        _route_mujoco_warnings()
    try:
        # a registered id by its name, so that Gymnasium says when a newer version exists
        made = gym_id if gym_id in gym_registry() else spec
        return gymnasium.make(made, max_episode_steps=max_episode_timesteps, **gym_kwargs)
    except (gymnasium.error.Error, ImportError) as error:
        newest = newest_version(gym_id)
        hint = f"The newest version of this environment is '{newest}'." if newest else None
        if isinstance(error, gymnasium.error.DependencyNotInstalled) and str(spec.entry_point).startswith(
            "gymnasium.envs.mujoco"
        ):
            hint = "pip install 'torchforce[mujoco]'"
        raise SpecError(f"{path}.gym_id", f"cannot make '{gym_id}': {error}", hint=hint) from None
    except TypeError as error:
        raise _kwarg_error(gym_id, spec, gym_kwargs, error, path) from None


def _route_mujoco_warnings() -> None:
    """MuJoCo's warnings into Python's logging (logger ``torchforce.mujoco``), unless the process set a handler of
    its own: by default MuJoCo prints each to stderr and appends it to ``MUJOCO_LOG.TXT`` in the working folder (a
    project's, a results folder), and Gymnasium's v5 models raise one on every build ("compiler attribute
    'settotalmass' is deprecated"), which is about Gymnasium's model file, not the user's spec: deprecations go to
    the debug level, every other warning (an unstable simulation, a full contact buffer) to the warning level,
    which reaches stderr without a logging setup and the worker's log with one."""
    try:
        import mujoco
    except ImportError:
        return  # gymnasium.make says what to install
    if mujoco.get_mju_user_warning() is not None:
        return
    log = logging.getLogger("torchforce.mujoco")

    def handle(message: str) -> None:
        log.log(logging.DEBUG if "is deprecated" in message else logging.WARNING, "MuJoCo: %s", message)

    mujoco.set_mju_user_warning(handle)


def _seed(seed: Any, path: str) -> int | None:
    """A seed as Gymnasium takes it: an integer >= 0, or None."""
    return expect_int(seed, path, minimum=0, allow_none=True)


def check_monitor(monitor: Any, monitor_continue: Any, path: str) -> bool:
    """Check ``monitor`` (a directory, or None) and ``monitor_continue`` (which needs one) at ``path``, where they are
    ``monitor`` and ``monitor_continue``; returns the checked ``monitor_continue``."""
    monitor_continue = expect_bool(monitor_continue, f"{path}monitor_continue")
    if monitor is not None and (not isinstance(monitor, (str, os.PathLike)) or not str(monitor)):
        raise SpecError(f"{path}monitor", "not a directory", got=monitor, expected="a directory path, or null")
    if monitor_continue and monitor is None:
        raise SpecError(f"{path}monitor_continue", "needs monitor, the directory whose records it continues")
    return monitor_continue


def _check_options(
    path: str,
    visualize: Any,
    monitor: Any,
    monitor_safe: Any,
    monitor_continue: Any,
    monitor_video: Any,
    gym_kwargs: dict[str, Any],
) -> tuple[bool, bool, int]:
    """Check the 2018 options and set ``render_mode`` in ``gym_kwargs`` from them; returns the checked
    ``monitor_safe``, ``monitor_continue`` and ``monitor_video``."""
    visualize = expect_bool(visualize, f"{path}.visualize")
    monitor_safe = expect_bool(monitor_safe, f"{path}.monitor_safe")
    monitor_continue = check_monitor(monitor, monitor_continue, f"{path}.")
    monitor_video = expect_int(monitor_video, f"{path}.monitor_video", minimum=0)
    render_mode = gym_kwargs.get("render_mode")
    if render_mode is not None and (not isinstance(render_mode, str) or not render_mode):
        raise SpecError(
            f"{path}.render_mode",
            "not a render mode",
            got=render_mode,
            expected='a mode name like "rgb_array" or "human", or null',
        )
    if monitor_video and monitor is None:
        raise SpecError(f"{path}.monitor_video", "needs monitor, the directory the videos go to")
    if visualize:
        if monitor_video:
            raise SpecError(f"{path}.visualize", "a window and monitor_video exclude each other")
        if "render_mode" in gym_kwargs:
            raise SpecError(f"{path}.visualize", "give either visualize or render_mode, not both")
        if not has_display():
            raise SpecError(
                f"{path}.visualize",
                "visualize=true needs a display and none was found (DISPLAY is not set)",
                hint="Record videos instead with monitor=DIR and monitor_video=N.",
            )
        gym_kwargs["render_mode"] = "human"
    if monitor_video and gym_kwargs.get("render_mode") is None:
        gym_kwargs["render_mode"] = "rgb_array"
    return monitor_safe, monitor_continue, monitor_video


def _check_renderer(env: Any, gym_id: str, path: str, option: str | None) -> None:
    """Gymnasium imports pygame only when it draws a frame: without it, a render mode of an environment drawn with
    pygame is refused here (naming ``option``, the 2018 option that asked for frames, else ``render_mode``), rather
    than failing at the first step."""
    drawn_with_pygame = type(env.unwrapped).__module__.startswith(PYGAME_DRAWN)
    if env.render_mode in ("human", "rgb_array") and drawn_with_pygame and importlib.util.find_spec("pygame") is None:
        env.close()
        raise SpecError(
            f"{path}.{option or 'render_mode'}",
            f"rendering '{gym_id}' (render_mode '{env.render_mode}') needs pygame",
            hint="pip install 'torchforce[classic-control]'",
        )


def has_display() -> bool:
    """Whether a window can open here (Linux needs DISPLAY or WAYLAND_DISPLAY)."""
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class Gym(Environment):
    """A Gymnasium environment with the 2018 API.

    Args:
        gym_id: any registered Gymnasium id (``CartPole-v1``, ``HalfCheetah-v5``, ``ALE/Pong-v5``),
            ``"module:Name-v0"`` to import a module that registers it (a Gymnasium package's or your own; see
            ``resolve_gym_id``), ``"module:Class"`` or the class itself for a ``gymnasium.Env`` subclass, or a ready
            ``gymnasium.Env`` (wrapped as it is: it takes no constructor arguments).
        max_episode_timesteps: the time limit (Gymnasium's ``max_episode_steps``); episodes cut by it end with
            terminal 2. None keeps the id's registered limit.
        visualize: render to a window (needs a display).
        monitor, monitor_safe, monitor_continue, monitor_video: episode records (and videos) in a directory; see
            the module doc.
        seed: the seed of the first ``reset`` (and of the action space).
        gym_kwargs: passed to ``gymnasium.make`` (environment arguments such as ``frameskip``, ``render_mode``,
            ``disable_env_checker``); unknown names are SpecErrors.
    """

    def __init__(
        self,
        gym_id: Any = None,
        *,
        max_episode_timesteps: int | None = None,
        visualize: bool = False,
        monitor: str | None = None,
        monitor_safe: bool = False,
        monitor_continue: bool = False,
        monitor_video: int = 0,
        seed: int | None = None,
        **gym_kwargs: Any,
    ) -> None:
        import gymnasium

        path = "environment"
        if gym_id is None:  # the argument is required; its default only lets a spec without it fail clearly
            raise SpecError(path, "a Gym environment needs 'gym_id'", expected="a Gymnasium id like 'CartPole-v1'")
        max_episode_timesteps = expect_int(
            max_episode_timesteps, f"{path}.max_episode_timesteps", minimum=1, allow_none=True
        )
        seed = _seed(seed, f"{path}.seed")
        monitor_safe, monitor_continue, monitor_video = _check_options(
            path, visualize, monitor, monitor_safe, monitor_continue, monitor_video, gym_kwargs
        )
        if isinstance(gym_id, gymnasium.Env):
            if gym_kwargs:
                raise SpecError(path, "a ready Gymnasium environment takes no constructor arguments", got=gym_kwargs)
            env = gym_id
            self.gym_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
            if max_episode_timesteps is not None:
                _check_time_limit(env, max_episode_timesteps, f"{path}.max_episode_timesteps")
                env = gymnasium.wrappers.TimeLimit(env, max_episode_timesteps)
        elif is_gymnasium_env_class(gym_id):
            self.gym_id = f"{gym_id.__module__}:{gym_id.__qualname__}"
            env = _make(self.gym_id, _class_spec(gym_id), max_episode_timesteps, gym_kwargs, path)
        else:
            self.gym_id = resolve_gym_id(gym_id, f"{path}.gym_id")
            env = _make(self.gym_id, _spec_of(self.gym_id), max_episode_timesteps, gym_kwargs, path)
        frames_for = "visualize" if visualize else "monitor_video" if monitor_video else None
        _check_renderer(env, self.gym_id, path, frames_for)
        if monitor is not None:
            env = _monitored(env, Path(monitor), monitor_safe, monitor_continue, monitor_video, path)
        self.gym = env
        self._lives = _life_wrapper(env)
        try:
            self._states, self._read = states_from_space(env.observation_space, f"{path}.observation_space")
            self._actions, self._write, self._single_action = actions_from_space(
                env.action_space, f"{path}.action_space"
            )
        except SpecError:
            env.close()
            raise
        self._step = env.step
        self._next_seed: int | None = None
        self.info: dict[str, Any] = {}
        if seed is not None:
            self.seed(seed)

    def __str__(self) -> str:
        return f"Gym({self.gym_id})"

    @property
    def states(self) -> dict[str, Any]:
        return self._states

    @property
    def actions(self) -> dict[str, Any]:
        return self._actions

    def seed(self, seed: int | None) -> int | None:
        """The next ``reset`` calls ``reset(seed=seed)``; the action space is seeded too."""
        seed = _seed(seed, "seed")
        self._next_seed = seed
        if seed is not None:
            self.gym.action_space.seed(seed)
        return seed

    def reset(self) -> Any:
        seed, self._next_seed = self._next_seed, None
        observation, self.info = self.gym.reset(seed=seed)
        return self._read(observation)

    def execute(self, actions: Any) -> tuple[Any, int, float]:
        try:
            action = self._write(actions)
        except (KeyError, TypeError, ValueError) as error:
            form = "one bare action" if self._single_action else "a dict keyed by action name"
            raise ValueError(
                f"{self}: cannot use actions {describe(actions)} for the actions spec {self._actions} "
                f"(expected {form}): {error!r}"
            ) from None
        observation, reward, terminated, truncated, self.info = self._step(action)
        return self._read(observation), (1 if terminated else 2 if truncated else 0), float(reward)

    def close(self) -> None:
        self.gym.close()

    @property
    def game_goes_on(self) -> bool:
        """Whether the last step lost a life and the game goes on: an Atari game with episodic life (``atari_env``'s
        ``EpisodicLife`` anywhere in the environment's wrappers, however it was built)."""
        return self._lives is not None and self._lives.life_lost

    @property
    def resumable(self) -> bool:
        return snapshots.resumable(self.gym.unwrapped)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with what pickling the Gymnasium environment leaves out (``snapshots.take``: MuJoCo's physics,
        ALE's emulator), so that a copy goes on with the episode in progress."""
        return {**self.__dict__, "_snapshot": snapshots.take(self.gym.unwrapped)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        snapshot = state.pop("_snapshot", None)
        self.__dict__.update(state)
        if snapshot is not None:
            snapshots.put(self.gym.unwrapped, snapshot)


def _monitored(env: Any, directory: Path, safe: bool, keep: bool, video: int, path: str) -> Any:
    import gymnasium

    try:
        file = records_file(directory, keep=keep, safe=safe, path=f"{path}.monitor")
    except SpecError:
        env.close()
        raise
    if video:
        try:
            env = gymnasium.wrappers.RecordVideo(
                env,
                str(directory / "videos"),
                episode_trigger=lambda episode: episode % video == 0,
                disable_logger=True,
            )
        except gymnasium.error.DependencyNotInstalled:
            env.close()
            raise SpecError(
                f"{path}.monitor_video", "recording videos needs the moviepy package", hint="pip install moviepy"
            ) from None
        if keep and file.exists():  # it counts episodes from 0: on from the records', no earlier video overwritten
            with file.open("rb") as stream:
                env.episode_id = last_episode(stream)

    return log_episodes(env, EpisodeLog(file))


def log_episodes(env: Any, log: EpisodeLog) -> Any:
    """``env`` (a Gymnasium environment) wrapped so that each of its episodes goes to ``log``."""
    import gymnasium

    class Monitor(gymnasium.Wrapper):
        episode_log = log  # found by episode_logs

        def reset(self, **kwargs: Any) -> Any:
            log.reset()
            return self.env.reset(**kwargs)

        def step(self, action: Any) -> Any:
            result = self.env.step(action)
            log.step(result[1], result[2], result[3])
            return result

    return Monitor(env)


def episode_logs(environment: Any) -> list[EpisodeLog]:
    """The monitors' logs among the wrappers of ``environment`` (a Gym adapter, or a Gymnasium environment),
    outermost first; none for another environment."""
    chain = wrapper_chain(getattr(environment, "gym", environment))
    return [layer.episode_log for layer in chain if isinstance(getattr(layer, "episode_log", None), EpisodeLog)]


def retarget_logs(restored: Any, built: Any) -> None:
    """The monitors of ``restored`` (an environment unpickled from a checkpoint) write where those of ``built`` (the
    same environment, built now for the run that resumes) do: the file a checkpoint pickled may be another
    machine's, or a project's that has moved since."""
    for now, saved in zip(episode_logs(built), episode_logs(restored), strict=False):
        saved.file = now.file
