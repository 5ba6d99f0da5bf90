"""The 2018 Environment API: ``reset() -> states`` and ``execute(actions) -> (states, terminal, reward)``.

``terminal`` is an int: 0 = the episode goes on, 1 = a true terminal state (no bootstrap), 2 = the episode was cut
without reaching a terminal state (time-limit truncation): learners bootstrap from the returned state. 2 is truthy,
so 2018 code written as ``if terminal:`` keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torchforce.spec import SpecError, check_kwargs, load_spec

# A Gymnasium id ("CartPole-v1", "ALE/Pong-v5") named as a whole environment spec.
GYM_ID = re.compile(r"^(?:[\w.-]+/)?[\w.:-]+-v\d+$")


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

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def from_spec(spec: Any, kwargs: Mapping[str, Any] | None = None, *, path: str = "environment") -> Environment:
        """Build an environment from a spec.

        ``spec`` is an Environment instance, an Environment class, a registry name (``"gym"``, ``"minimal"``), a
        Gymnasium id (``"CartPole-v1"``), ``{"type": ..., **kwargs}``, a ``.json``/``.yaml`` file holding one of
        these, ``"package.module:Class"``, or the 2018 type ``"tensorforce.contrib.openai_gym.OpenAIGym"``.
        ``kwargs`` are extra constructor arguments; they override those of the spec. A class named by path must be
        an Environment subclass, checked before it is called (see ``torchforce.spec.registry`` on what a spec may
        import).
        """
        from torchforce.environments import ENVIRONMENTS

        spec, file = load_spec(spec)
        try:
            if isinstance(spec, Environment):
                if kwargs:
                    raise SpecError(path, "kwargs cannot be applied to an environment that is already built")
                return spec
            if isinstance(spec, type):
                check_kwargs(spec, kwargs or {}, path)
                return ENVIRONMENTS.create(spec, path, base=Environment, **(kwargs or {}))
            if isinstance(spec, str):
                spec = {"type": spec}
            if isinstance(spec, Mapping):
                spec = {**spec, **(kwargs or {})}
                name = spec.get("type")
                if isinstance(name, str) and ENVIRONMENTS.canonical(name) is None and GYM_ID.match(name):
                    spec = {**spec, "type": "gym", "gym_id": name}
            return ENVIRONMENTS.create(spec, path, base=Environment)
        except SpecError as error:
            if file:
                error.with_file(file)
            raise
