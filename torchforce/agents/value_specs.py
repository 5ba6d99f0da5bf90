"""Spec defaults and checks of the value-based agents (DQN, DQN n-step, DQfD; DDPG and NAF): which head each action
gets, whether the heads built have Q-values, and how large the default replay memory is. Pure functions of specs
and heads: none takes or changes an agent.

Q-values are the raw outputs of each action's categorical head (docs/tensorforce-0.4.md, Distributions):
``num_actions`` per element of an
int action, two (False, True) per element of a bool action, which is stored as a bool.

Bool actions, clean rather than faithful: 2018 gave a bool action its ``bernoulli`` head, one logit l per element,
and read the Q-values off it as l + log P(True) and l + log P(False). Both then hang on the one number l, and
Q(s, False) = -softplus(-l) can never be positive, so that head cannot hold two independent Q-values (CartPole's
are near 100). Here a bool action gets a ``categorical`` head over its two values by default (``q_value_heads``),
and an explicit head without Q-values (``bernoulli``) is a SpecError (``check_q_heads``).

The deterministic-policy agents (DDPG, NAF) act with a ``deterministic`` head per float action by default: mu(s),
tanh-scaled into a bounded action's range (``deterministic_heads``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from torchforce.core.distributions import Distribution
from torchforce.core.named import NamedModules
from torchforce.spec import ActionSpec, SpecError, expect_dict


def check_discrete_actions(actions: Mapping[str, ActionSpec]) -> None:
    """Only bool and int actions: the Q agents pick an action by argmax over its Q-values."""
    for name, action in actions.items():
        if action.type not in ("bool", "int"):
            raise SpecError(
                f"actions.{name}.type",
                "DQN picks actions by argmax over Q-values, so only bool and int actions work",
                got=action.type,
                expected='"bool" or "int"',
                hint="Use naf or ddpg for float actions, or ppo.",
            )


def q_value_heads(actions: Mapping[str, ActionSpec], distributions: Any) -> dict[str, Any]:
    """The ``distributions`` spec of a Q agent: a ``categorical`` head, a Q-value per action value, for every
    bool action not given one (2018 defaulted it to ``bernoulli``, see above); the rest as given."""
    specs = {} if distributions is None else expect_dict(distributions, "distributions")
    return {**{name: "categorical" for name, action in actions.items() if action.type == "bool"}, **specs}


@runtime_checkable
class QHead(Protocol):
    """An action head with Q-values, one per action value (``categorical``): what the Q agents read off a head."""

    def q_values(self, params: Any) -> Tensor: ...


def q_values(head: Distribution, params: Any) -> Tensor:
    """Q(s, .) off ``head``, one of the heads ``check_q_heads`` accepted, from its ``params``."""
    if not isinstance(head, QHead):
        raise TypeError(f"a {type(head).__name__.lower()} head has no Q-values")
    return head.q_values(params)


def check_q_heads(heads: NamedModules[Distribution], agent: str) -> None:
    """Every head has Q-values (``q_values(params)``), which the agent named ``agent`` reads off it."""
    for name, head in heads.items():
        if not callable(getattr(head, "q_values", None)):
            raise SpecError(
                f"distributions.{name}",
                f"a {type(head).__name__.lower()} head has no Q-values, and "
                f"the {agent} agent reads its Q-values off the action's head",
                expected='"categorical" (or leave it out)',
                hint="A categorical head has one Q-value per action value: two for a bool action.",
            )


def deterministic_heads(actions: Mapping[str, ActionSpec], distributions: Any) -> dict[str, Any]:
    """The ``distributions`` spec of DDPG and NAF: a ``deterministic`` head, mu(s), for every action not given
    another; the rest as given."""
    specs = {} if distributions is None else expect_dict(distributions, "distributions")
    return {**{name: "deterministic" for name in actions}, **specs}


def replay_capacity(update_mode: Any, default_batch_size: int) -> int:
    """2018's default memory size of the value-based agents: room for 1000 batches of ``update_mode.batch_size``
    (``default_batch_size`` when it gives none; a bad one is the update_mode check's to report)."""
    size = update_mode.get("batch_size", default_batch_size) if isinstance(update_mode, dict) else default_batch_size
    return 1000 * (size if isinstance(size, int) and size > 0 else default_batch_size)
