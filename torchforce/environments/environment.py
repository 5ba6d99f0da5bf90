"""The 2018 Environment API: ``reset() -> states`` and ``execute(actions) -> (states, terminal, reward)``.

``terminal`` is an int: 0 = the episode goes on, 1 = a true terminal state (no bootstrap), 2 = the episode was cut
without reaching a terminal state (time-limit truncation): learners bootstrap from the returned state. 2 is truthy,
so 2018 code written as ``if terminal:`` keeps working.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from torchforce.spec import SpecError, check_kwargs, load_spec
from torchforce.spec.errors import what_it_is


class Environment:
    """An environment of the 2018 API. Subclasses implement ``reset``, ``execute``, ``states`` and ``actions``.

    ``states``/``actions`` are 2018 spec dicts: the single short form (``{"type": "float", "shape": (4,)}``) or
    named dicts (``{"position": {...}, "velocity": {...}}``). With the single form ``reset``/``execute`` give and
    take bare values; with named dicts, dicts keyed by name.
    """

    def __str__(self) -> str:
        return type(self).__name__

    @property
    def states(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def actions(self) -> dict[str, Any]:
        raise NotImplementedError

    def reset(self) -> Any:
        """Start a new episode and return its first state(s)."""
        raise NotImplementedError

    def execute(self, actions: Any) -> tuple[Any, int, float]:
        """Apply the action(s); return the next state(s), terminal (0, 1 or 2) and the reward."""
        raise NotImplementedError

    def seed(self, seed: int | None) -> int | None:
        """Seed the environment's randomness from the next ``reset`` on; returns the seed used, or None."""
        return None

    def close(self) -> None:
        """Release what the environment holds (windows, processes, files)."""

    @property
    def resumable(self) -> bool:
        """Whether a pickled copy goes on with the episode in progress (checkpoints save episodes in progress only
        then). True for an environment that pickles whole; the Gym adapter says False for a Gymnasium environment
        that pickling builds again from its arguments and that it cannot restore (``snapshots``)."""
        return True

    @property
    def game_goes_on(self) -> bool:
        """After a step that ended the episode: whether the game it was a part of goes on (an Atari game's episodic
        life ends the episode at each lost life, not the game). Evaluation plays on to the end of the game and scores
        whole games, as SB3 scores a Monitor's games. False for environments whose episode is the game."""
        return False

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def from_spec(spec: Any, kwargs: Mapping[str, Any] | None = None, *, path: str = "environment") -> Environment:
        """Build an environment from a spec.

        ``spec`` is a name (a registry name such as ``"minimal"``, a Gymnasium id such as ``"CartPole-v1"``,
        ``"module:Class"``: see ``torchforce.environments.names``), ``{"type": name, **kwargs}``, a ``.json``/``.yaml``
        file holding one of these, or, from Python, an Environment instance or class, a ``gymnasium.Env`` instance
        or subclass (wrapped in the Gym adapter), or a factory: a callable taking no arguments that returns either.
        ``kwargs`` are extra constructor arguments; they override those of the spec (for a built environment, only
        the Gym adapter's options apply: ``max_episode_timesteps``, ``seed``, ``monitor``, ...). A class named by path
        must be an environment class, checked before it is called (see ``torchforce.spec.registry`` on what a spec
        may import).
        """
        from torchforce.environments import ENVIRONMENTS
        from torchforce.environments.gym import Gym
        from torchforce.environments.names import is_gymnasium_env, is_gymnasium_env_class, spec_for_name

        spec, file = load_spec(spec)
        try:
            if isinstance(spec, Environment):
                if kwargs:
                    raise SpecError(path, "kwargs cannot be applied to an environment that is already built")
                return spec
            if is_gymnasium_env(spec) or is_gymnasium_env_class(spec):
                return Gym(spec, **(kwargs or {}))
            if isinstance(spec, type):
                check_kwargs(spec, kwargs or {}, path)
                return ENVIRONMENTS.create(spec, path, base=Environment, **(kwargs or {}))
            if callable(spec):
                return _from_factory(spec, kwargs or {}, path)
            if isinstance(spec, str):
                spec = {**spec_for_name(spec, path), **(kwargs or {})}
            elif isinstance(spec, Mapping):
                spec = {**spec, **(kwargs or {})}
                name = spec.get("type")
                if isinstance(name, str) and ENVIRONMENTS.canonical(name) is None:
                    spec = _named_type(spec, spec_for_name(name, f"{path}.type"), path)
            return ENVIRONMENTS.create(spec, path, base=Environment)
        except SpecError as error:
            if file:
                error.with_file(file)
            raise


def _named_type(spec: dict[str, Any], named: dict[str, Any], path: str) -> dict[str, Any]:
    """``spec`` with its ``type`` replaced by the spec that name stands for (a Gymnasium id or class becomes the Gym
    adapter with that ``gym_id``)."""
    if "gym_id" in named and "gym_id" in spec:
        raise SpecError(
            f"{path}.gym_id",
            f"given twice: the type '{spec['type']}' names a Gymnasium environment already",
            got=spec["gym_id"],
            hint='Give {"type": "gym", "gym_id": ...}, or the id as the type, not both.',
        )
    return {**spec, **named}


def _from_factory(factory: Callable[[], Any], kwargs: Mapping[str, Any], path: str) -> Environment:
    """The environment a factory returns: an Environment as it is, a ``gymnasium.Env`` wrapped in the Gym adapter
    (which takes ``kwargs``: its options)."""
    from torchforce.environments.gym import Gym
    from torchforce.environments.names import is_gymnasium_env

    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # no signature to read (some builtins): calling it will tell
        parameters = []
    required = [p.name for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if required:
        raise SpecError(
            path,
            "an environment factory is called with no arguments, and this one needs "
            + ", ".join(f"'{name}'" for name in required),
            got=what_it_is(factory),
            hint="Bind them first: functools.partial(factory, ...) or lambda: factory(...).",
        )
    built = factory()
    if isinstance(built, Environment):
        if kwargs:
            raise SpecError(path, "kwargs cannot be applied to the environment a factory built", got=dict(kwargs))
        return built
    if is_gymnasium_env(built):
        return Gym(built, **kwargs)
    raise SpecError(
        path,
        "the factory returned no environment",
        got=what_it_is(built),
        expected="a gymnasium.Env or a torchforce Environment",
    )
