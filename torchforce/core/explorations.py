"""Action explorations (docs/tensorforce-0.4.md, Explorations), spec key ``actions_exploration``.

Two families:

- **epsilon** explorations (``constant``, ``epsilon_anneal`` / ``linear_decay``, ``epsilon_decay``) give a
  probability ε(t) of the global timestep t. Each action element is replaced, with probability ε, by a uniform
  random value: any of ``num_actions`` for int actions, a coin flip for bool actions, a uniform value in
  ``[min_value, max_value]`` for bounded float actions. (2018 added ε to float actions and flipped bools per batch
  row; we replace per element. Unbounded float actions have nothing uniform to draw from: an epsilon exploration
  does not apply to them.)
- **noise** explorations (``gaussian_noise``, ``ornstein_uhlenbeck``) add noise to float actions, which are then
  clipped to ``[min_value, max_value]`` if bounded. They do not apply to int or bool actions. Their ``sigma`` may
  be a schedule of the global timestep (ours; 2018 took a constant): ``{"type": "linear", "initial": 0.3,
  "final": 0.1, "timesteps": 300000}`` narrows the noise over a run, as RLlib's ``scale_timesteps`` does.

``build_explorations`` takes one spec for all actions (it is applied where it fits, with a warning for the actions
it does not fit) or a dict keyed by action name (each entry must fit its action). The per-action dict works: 2018
silently ignored it (docs/tensorforce-0.4.md, Quirks: faithful or fixed).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from torchforce.core.schedules import Schedule, build_schedule
from torchforce.spec import ActionSpec, Registry, SpecError, expect_float, unknown_name_error, warn_spec
from torchforce.spec.checks import MAX_TIMESTEP, expect_limited_int
from torchforce.spec.errors import what_it_is

EXPLORATIONS = Registry(
    "exploration",
    {
        "constant": "torchforce.core.explorations:Constant",
        "epsilon_anneal": "torchforce.core.explorations:EpsilonAnneal",
        "epsilon_decay": "torchforce.core.explorations:EpsilonDecay",
        "gaussian_noise": "torchforce.core.explorations:GaussianNoise",
        "ornstein_uhlenbeck": "torchforce.core.explorations:OrnsteinUhlenbeck",
    },
    aliases={"linear_decay": "epsilon_anneal"},
    base="torchforce.core.explorations:Exploration",
)


class Exploration:
    """Base class. Epsilon explorations implement ``epsilon(timestep)``, noise explorations ``noise(shape, rng)``."""

    is_noise = False

    def fits(self, action: ActionSpec) -> bool:
        """Whether this exploration means something for ``action``."""
        if self.is_noise:
            return action.type == "float"
        return action.type in ("int", "bool") or action.bounded

    def epsilon(self, timestep: int) -> float:
        raise NotImplementedError

    def noise(self, shape: tuple[int, ...], rng: np.random.Generator, timestep: int = 0) -> np.ndarray:
        raise NotImplementedError

    def reset(self, rows: Any = None) -> None:
        """Clear per-row state (episode starts); stateless explorations have none."""

    def apart(self) -> Exploration:
        """The exploration for acting apart from the training rows (evaluation): this one where it keeps no state,
        else a copy with a state of its own, fresh."""
        return self

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


def _probability(value: Any, path: str) -> float:
    return expect_float(value, path, minimum=0.0, maximum=1.0)


class Constant(Exploration):
    """A constant ε (``constant=0.0`` explores nothing)."""

    def __init__(self, *, constant: float = 0.0) -> None:
        self.constant = _probability(constant, "constant")

    def epsilon(self, timestep: int) -> float:
        return self.constant


class EpsilonAnneal(Exploration):
    """Linear ε: ``initial`` before ``start_timestep``, ``final`` after ``start_timestep + timesteps``.

    ``ε(t) = initial + (final - initial) · (t - start) / timesteps`` in between.
    """

    def __init__(
        self,
        *,
        initial_epsilon: float = 1.0,
        final_epsilon: float = 0.1,
        timesteps: int = 10000,
        start_timestep: int = 0,
    ) -> None:
        self.initial_epsilon = _probability(initial_epsilon, "initial_epsilon")
        self.final_epsilon = _probability(final_epsilon, "final_epsilon")
        # timestep counts beyond int64 are never reached, and would not convert to floats (10^400)
        self.timesteps = expect_limited_int(timesteps, "timesteps", minimum=1, maximum=MAX_TIMESTEP)
        self.start_timestep = expect_limited_int(start_timestep, "start_timestep", minimum=0, maximum=MAX_TIMESTEP)

    def epsilon(self, timestep: int) -> float:
        fraction = min(max((timestep - self.start_timestep) / self.timesteps, 0.0), 1.0)
        return self.initial_epsilon + (self.final_epsilon - self.initial_epsilon) * fraction


class EpsilonDecay(EpsilonAnneal):
    """Exponential ε, halving the distance to ``final`` every ``timesteps / half_lives`` steps after the start.

    ``ε(t) = final + 2^(-(t - start) / (timesteps / half_lives)) · (initial - final)`` for ``t >= start``, and
    ``initial`` before. Fixed quirk: 2018 jumped to ``final`` at ``start + timesteps`` (a step of
    ``2^-half_lives · (initial - final)``); here the curve stays continuous and keeps approaching ``final``.
    """

    def __init__(
        self,
        *,
        initial_epsilon: float = 1.0,
        final_epsilon: float = 0.1,
        timesteps: int = 10000,
        start_timestep: int = 0,
        half_lives: float = 10,
    ) -> None:
        super().__init__(
            initial_epsilon=initial_epsilon,
            final_epsilon=final_epsilon,
            timesteps=timesteps,
            start_timestep=start_timestep,
        )
        self.half_lives = expect_float(half_lives, "half_lives", minimum=0.0)
        if self.half_lives == 0.0:
            raise SpecError("half_lives", "must be positive", got=half_lives)

    def epsilon(self, timestep: int) -> float:
        if timestep < self.start_timestep:
            return self.initial_epsilon
        half_life = self.timesteps / self.half_lives
        decay = math.pow(2.0, -(timestep - self.start_timestep) / half_life)
        return self.final_epsilon + decay * (self.initial_epsilon - self.final_epsilon)


class GaussianNoise(Exploration):
    """Independent ``N(mu, sigma²)`` noise added to each float action element; ``sigma`` a number or a schedule of
    the timestep."""

    is_noise = True

    def __init__(self, *, sigma: float | dict = 0.3, mu: float = 0.0) -> None:
        self.sigma: Schedule = build_schedule(sigma, "sigma")
        self.mu = expect_float(mu, "mu")

    def noise(self, shape: tuple[int, ...], rng: np.random.Generator, timestep: int = 0) -> np.ndarray:
        return self.mu + self.sigma.value(timestep) * rng.standard_normal(shape)


class OrnsteinUhlenbeck(Exploration):
    """Temporally correlated noise: ``x ← x + θ(μ - x) + σ·N(0, 1)``, added to the action; starts at ``x = μ``;
    ``σ`` a number or a schedule of the timestep.

    The state ``x`` is kept per batch row and action element (shape ``[B, *shape]``), so parallel environments
    get independent processes; ``reset(rows)`` puts those rows back to ``μ`` (at their episode starts). A call
    with a different batch shape starts a fresh state.
    """

    is_noise = True

    def __init__(self, *, sigma: float | dict = 0.3, mu: float = 0.0, theta: float = 0.15) -> None:
        self.sigma: Schedule = build_schedule(sigma, "sigma")
        self.mu = expect_float(mu, "mu")
        self.theta = expect_float(theta, "theta", minimum=0.0)
        self.state: np.ndarray | None = None

    def noise(self, shape: tuple[int, ...], rng: np.random.Generator, timestep: int = 0) -> np.ndarray:
        if self.state is None or self.state.shape != shape:
            self.state = np.full(shape, self.mu)
        self.state += self.theta * (self.mu - self.state) + self.sigma.value(timestep) * rng.standard_normal(shape)
        return self.state.copy()

    def apart(self) -> OrnsteinUhlenbeck:
        fresh = copy.copy(self)  # the same settings; reset() rebinds the state, so none is shared
        fresh.reset()
        return fresh

    def reset(self, rows: Any = None) -> None:
        if rows is None or self.state is None:
            self.state = None
            return
        rows = np.asarray(rows)
        if rows.dtype == np.bool_:
            rows = np.flatnonzero(rows)
        self.state[rows[rows < len(self.state)]] = self.mu  # rows beyond the state start at mu anyway

    def state_dict(self) -> dict[str, Any]:
        return {"state": None if self.state is None else self.state.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        value = state["state"]
        self.state = None if value is None else np.array(value, dtype=np.float64)


def build_explorations(
    spec: Any, actions: Mapping[str, ActionSpec], *, path: str = "actions_exploration"
) -> dict[str, Exploration]:
    """The exploration of each action that has one, keyed by action name.

    ``spec`` is None (no exploration: ``{}``), one spec for all actions (a name, ``{"type": ...}`` or an
    ``Exploration``; each action gets its own copy, applied only where it fits, with a warning for the others), or
    a dict ``{action_name: spec or None}`` (unknown names and entries that do not fit their action are SpecErrors).
    """
    if spec is None:
        return {}
    if isinstance(spec, (list, tuple)):
        raise SpecError(
            path, "a list is not an exploration spec", got=spec, expected="one spec, or {action_name: spec}"
        )
    if isinstance(spec, Mapping) and "type" not in spec:
        explorations = {}
        for name, entry in spec.items():
            if name not in actions:
                raise unknown_name_error(f"{path}.{name}", "action", name, actions)
            if entry is None:
                continue
            exploration = _create(entry, f"{path}.{name}")
            if not exploration.fits(actions[name]):
                raise SpecError(f"{path}.{name}", _misfit(exploration, actions[name]), got=entry)
            explorations[name] = copy.deepcopy(exploration) if exploration is entry else exploration
        return explorations
    explorations = {}
    for name, action in actions.items():
        exploration = _create(spec, path)
        if exploration.fits(action):
            explorations[name] = copy.deepcopy(exploration) if exploration is spec else exploration
        else:
            warn_spec(f"{path}: {_misfit(exploration, action)}; it is not applied there.")
    if not explorations:
        raise SpecError(path, "this exploration fits none of the actions: " + _misfit(exploration, action), got=spec)
    return explorations


def _create(spec: Any, path: str) -> Exploration:
    exploration = EXPLORATIONS.create(spec, path, base=Exploration)
    if not isinstance(exploration, Exploration):
        raise SpecError(path, "not an Exploration", got=what_it_is(exploration), expected="a subclass of Exploration")
    return exploration


def _misfit(exploration: Exploration, action: ActionSpec) -> str:
    kind = re.sub(r"(?<!^)(?=[A-Z])", "_", type(exploration).__name__).lower()  # GaussianNoise -> gaussian_noise
    if exploration.is_noise:
        return f"{kind} adds noise to float actions, and action '{action.name}' is {action.type}"
    return (
        f"{kind} replaces actions by uniform random ones, which needs bounds, "
        f"and float action '{action.name}' has no min_value/max_value (use gaussian_noise or ornstein_uhlenbeck)"
    )


def explore(
    action: ActionSpec,
    values: np.ndarray,
    exploration: Exploration,
    *,
    timestep: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``values`` ``[B, *shape]`` with ``exploration`` applied (a new array; the input is left alone).

    int: each element is, with probability ε(timestep), a uniform random action in ``[0, num_actions)``;
    bool: likewise a fair coin flip; bounded float (epsilon): likewise a uniform value in ``[min, max]``;
    float (noise): ``values + noise``, clipped to ``[min, max]`` if bounded.
    """
    values = np.asarray(values)
    if exploration.is_noise:
        if action.type != "float":
            raise ValueError(_misfit(exploration, action))
        explored = (values + exploration.noise(values.shape, rng, timestep)).astype(values.dtype, copy=False)
        if action.bounded:
            np.clip(explored, action.min_value, action.max_value, out=explored)
        return explored
    if not exploration.fits(action):
        raise ValueError(_misfit(exploration, action))
    return replace_drawn(values, draw_epsilon(action, values.shape, exploration, timestep=timestep, rng=rng))


Drawn = tuple[np.ndarray, np.ndarray]  # an epsilon exploration's draw: the replaced elements (a mask), their values


def draw_epsilon(
    action: ActionSpec, shape: tuple[int, ...], exploration: Exploration, *, timestep: int, rng: np.random.Generator
) -> Drawn | None:
    """Which elements of a ``[B, *shape]`` batch of ``action`` the epsilon ``exploration`` replaces, each with
    probability ε(timestep), and the uniform random values they get; None when ε is 0. It needs no actions, so an
    agent can draw before acting and leave out the policy's pass where every row is replaced (``explore`` makes the
    same draws in the same order)."""
    epsilon = exploration.epsilon(timestep)
    if epsilon <= 0.0:
        return None
    mask = rng.random(shape) < epsilon
    count = int(np.count_nonzero(mask))
    if not count:
        return mask, np.empty(0)
    if action.type == "int":
        return mask, rng.integers(0, action.num_actions, size=count)
    if action.type == "bool":
        return mask, rng.random(count) < 0.5
    return mask, rng.uniform(*action.bounds, size=count)


def replace_drawn(values: np.ndarray, drawn: Drawn | None) -> np.ndarray:
    """``values`` (a new array) with the elements ``drawn`` replaced by their drawn values."""
    explored = values.copy()
    if drawn is not None and len(drawn[1]):
        explored[drawn[0]] = drawn[1]
    return explored


def check_random_timesteps(count: int, actions: Mapping[str, ActionSpec]) -> int:
    """``random_timesteps`` (DDPG, NAF) once the actions are known: a uniform draw needs every action's bounds."""
    for name, action in actions.items():
        if count and not action.bounded:
            raise SpecError(
                "random_timesteps",
                f"acts uniformly within the actions' bounds, and the action '{name}' has none",
                got=count,
                expected="0 for an unbounded action",
                hint=f"Give actions.{name} min_value and max_value, or leave random_timesteps out.",
            )
    return count


def uniform_actions(actions: Mapping[str, ActionSpec], rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``rows`` actions drawn uniformly within the bounds of each (bounded float) action."""
    return {
        name: rng.uniform(*action.bounds, size=(rows, *action.shape)).astype(np.float32)
        for name, action in actions.items()
    }
