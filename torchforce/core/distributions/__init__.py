"""Action distributions: the heads that turn a network embedding into a policy over one action
(docs/tensorforce-0.4.md, Distributions).

Each action gets its own ``Distribution`` module, which owns the Linear layer(s) from the embedding to its
parameters. The type defaults by action: bool -> ``bernoulli``, int -> ``categorical``, unbounded float ->
``gaussian``, bounded float -> ``beta``; ``deterministic`` (a float action's mu(s), for DDPG and NAF) is new, and
so is ``categorical`` over a bool action (two values, False and True: the Q-learning agents' default, since a Q-value
per value needs a logit per value). The 2018 keyword arguments (``probability``, ``probabilities``, ``mean``,
``log_stddev``, ``alpha``, ``beta``) set the initial biases of those layers.
"""

from __future__ import annotations

from typing import Any

from torchforce.core.distributions.base import Distribution
from torchforce.spec import ActionSpec, Registry

DISTRIBUTIONS = Registry(
    "distribution",
    {
        "bernoulli": "torchforce.core.distributions.bernoulli:Bernoulli",
        "beta": "torchforce.core.distributions.beta:Beta",
        "categorical": "torchforce.core.distributions.categorical:Categorical",
        "deterministic": "torchforce.core.distributions.deterministic:Deterministic",
        "gaussian": "torchforce.core.distributions.gaussian:Gaussian",
    },
    base=Distribution,
)


def default_distribution(action: ActionSpec) -> str:
    """The 2018 default type for an action: bernoulli, categorical, gaussian or (bounded float) beta."""
    if action.type == "bool":
        return "bernoulli"
    if action.type == "int":
        return "categorical"
    return "beta" if action.bounded else "gaussian"


def build_distribution(action: ActionSpec, input_size: int, spec: Any = None, *, path: str) -> Distribution:
    """The distribution head for ``action`` on an embedding of ``input_size`` features.

    ``spec`` is None (the default type for the action), a name, ``{"type": name, **kwargs}``, a user class path
    or a ready ``Distribution``. A type that does not fit the action (``categorical`` for a float) is a SpecError.
    """
    return DISTRIBUTIONS.create(
        spec, path, base=Distribution, default=default_distribution(action), action=action, input_size=input_size
    )


__all__ = ["DISTRIBUTIONS", "Distribution", "build_distribution", "default_distribution"]
