"""A deterministic policy head for float actions: ``mu(s)``, differentiable, within the action's bounds.

What the deterministic-policy agents (DDPG, NAF) act with. An unbounded action is a Linear head's output; a
bounded one is squashed into ``[min_value, max_value]`` by ``tanh``, so actions always lie in the bounds and the
gradient of a critic still flows through them. Sampling returns ``mu`` whatever ``deterministic`` says (exploring
is the ``actions_exploration`` noise's job). It has no density: log-probabilities, entropy and KL divergence are
errors, so a policy-gradient agent cannot be given one by mistake unnoticed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchforce.core.distributions.base import Distribution, HostSampler, Params, affine, host_linear
from torchforce.spec import ActionSpec, expect_float
from torchforce.spec.checks import expect_float32


class Deterministic(Distribution):
    """``mu(s)`` per element of a float action; ``mean`` (the initial bias) sets where it starts, inside the
    bounds for a bounded action (its midpoint by default)."""

    action_types = ("float",)
    low: Tensor  # buffers of a bounded action
    half_range: Tensor

    def __init__(self, action: ActionSpec, input_size: int, *, mean: float | None = None, weights: Any = None) -> None:
        super().__init__(action, input_size, weights)
        if action.bounded:
            low, high = (float(bound) for bound in action.bounds)
            start = expect_float(mean, "mean", minimum=low, maximum=high, allow_none=True)
            start = (low + high) / 2 if start is None else start
            fraction = min(max((start - low) / (high - low) * 2 - 1, -0.999), 0.999)
            self.register_buffer("low", torch.tensor(low), persistent=False)
            self.register_buffer("half_range", torch.tensor((high - low) / 2), persistent=False)
            bias = float(torch.atanh(torch.tensor(fraction)))
        else:
            bias = expect_float32(mean, "mean", allow_none=True) or 0.0
        self.mean = self.linear(1, bias)

    def forward(self, embedding: Tensor) -> Params:
        mu = affine(self.mean, embedding).view(embedding.shape[0], *self.shape)
        if self.action.bounded:
            mu = self.low + (torch.tanh(mu) + 1.0) * self.half_range
        return (mu,)

    def sample(self, params: Params, deterministic: bool = False) -> Tensor:
        return params[0]

    def host_sampler(self) -> HostSampler:
        linear, shape = host_linear(self.mean), self.shape
        squash = (float(self.low), float(self.half_range)) if self.action.bounded else None

        def sample(embedding: np.ndarray, deterministic: bool) -> np.ndarray:
            mu = linear(embedding).T.reshape(embedding.shape[1], *shape)
            if squash is not None:  # low + (tanh(mu) + 1) * half_range, as forward
                np.tanh(mu, out=mu)
                mu += 1.0
                mu *= squash[1]
                mu += squash[0]
            return np.ascontiguousarray(mu)

        return sample

    def _no_density(self, what: str) -> Tensor:
        raise TypeError(f"a deterministic policy has no {what}; policy-gradient agents need a gaussian or beta head")

    def log_prob(self, params: Params, action: Tensor) -> Tensor:
        return self._no_density("log-probability")

    def entropy(self, params: Params) -> Tensor:
        return self._no_density("entropy")

    def kl_divergence(self, params_a: Params, params_b: Params) -> Tensor:
        return self._no_density("KL divergence")
