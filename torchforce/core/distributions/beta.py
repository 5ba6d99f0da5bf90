"""Beta distribution for bounded float actions, rescaled from [0, 1] to [min_value, max_value]."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from torchforce.core.distributions.base import Distribution, Params, affine
from torchforce.spec import ActionSpec, SpecError
from torchforce.spec.checks import expect_float32

#: actions are kept this far inside (0, 1) before taking logs, so a sample on a bound has a finite log-probability
EPSILON = 1e-6


def standard_gamma(concentration: Tensor) -> Tensor:
    """Samples of Gamma(concentration, 1) for concentrations >= 1 (Marsaglia and Tsang, 2000).

    Draw ``x ~ N(0, 1)``, ``v = (1 + c·x)^3`` with ``d = k - 1/3``, ``c = 1/sqrt(9d)``; accept ``d·v`` when
    ``log U < x²/2 + d - d·v + d·log v``. Acceptance is above 95% for k >= 1, so the loop ends after a few rounds.
    (Beta's concentrations are softplus + 1 >= 1, so the k < 1 boost is not needed.)
    """
    d = concentration - 1.0 / 3.0
    c = torch.rsqrt(9.0 * d)
    result = concentration.clone()  # non-finite concentrations (a diverged network) pass through, not loop forever
    pending = torch.isfinite(concentration)
    while bool(pending.any()):
        x = torch.randn_like(concentration)
        v = (1.0 + c * x) ** 3
        log_u = torch.rand_like(concentration).log()
        accept = pending & (v > 0) & (log_u < 0.5 * x.square() + d - d * v + d * v.clamp_min(1e-30).log())
        result = torch.where(accept, d * v, result)
        pending = pending & ~accept
    return result


class Beta(Distribution):
    """``Beta(alpha, beta)`` on [0, 1] for each element of a bounded float action, mapped to [min, max].

    ``alpha = softplus(·) + 1`` and ``beta = softplus(·) + 1`` come from Linear heads (so both are >= 1 and the
    density is unimodal); ``alpha`` and ``beta`` (2018 kwargs, default 0.0) are those heads' initial biases.
    ``params = (alpha, beta)``, each ``[B, *shape]``. A sample ``x = G_a / (G_a + G_b)`` with ``G ~ Gamma`` is
    rescaled to ``min + x·(max - min)``; the deterministic action is the mean ``alpha / (alpha + beta)`` rescaled.
    This is the textbook parameterization (2018 named the two heads the other way round, consistently, which only
    swaps what the ``alpha``/``beta`` biases mean). ``log_prob`` and ``entropy`` are those of the [0, 1] variable
    (no ``-log(max - min)`` Jacobian term; it cancels in likelihood ratios).
    """

    action_types = ("float",)

    def __init__(
        self, action: ActionSpec, input_size: int, *, alpha: float = 0.0, beta: float = 0.0, weights: Any = None
    ) -> None:
        super().__init__(action, input_size, weights)
        if not action.bounded:
            raise SpecError(
                "type",
                f"a beta distribution needs a bounded action, and '{action.name}' has no min_value/max_value",
                hint="Give the action min_value and max_value, or use 'gaussian'.",
            )
        low, high = action.bounds
        self.low = float(low)
        self.span = float(high) - self.low
        self.alpha = self.linear(1, expect_float32(alpha, "alpha"))
        self.beta = self.linear(1, expect_float32(beta, "beta"))

    def forward(self, embedding: Tensor) -> Params:
        batch = embedding.shape[0]
        alpha = F.softplus(affine(self.alpha, embedding).view(batch, *self.shape)) + 1.0
        beta = F.softplus(affine(self.beta, embedding).view(batch, *self.shape)) + 1.0
        return alpha, beta

    def sample(self, params: Params, deterministic: bool = False) -> Tensor:
        alpha, beta = params
        if deterministic:
            unit = alpha / (alpha + beta)
        else:
            gamma_alpha, gamma_beta = standard_gamma(torch.stack((alpha, beta)))  # one rejection loop for both
            unit = gamma_alpha / (gamma_alpha + gamma_beta)
        return (self.low + unit * self.span).clamp(self.low, self.low + self.span)

    def log_prob(self, params: Params, action: Tensor) -> Tensor:
        alpha, beta = params
        unit = ((action - self.low) / self.span).clamp(EPSILON, 1.0 - EPSILON)
        return (alpha - 1.0) * unit.log() + (beta - 1.0) * torch.log1p(-unit) - log_beta_function(alpha, beta)

    def entropy(self, params: Params) -> Tensor:
        alpha, beta = params
        total = alpha + beta
        return (
            log_beta_function(alpha, beta)
            - (alpha - 1.0) * torch.digamma(alpha)
            - (beta - 1.0) * torch.digamma(beta)
            + (total - 2.0) * torch.digamma(total)
        )

    def kl_divergence(self, params_a: Params, params_b: Params) -> Tensor:
        (alpha_a, beta_a), (alpha_b, beta_b) = params_a, params_b
        return (
            log_beta_function(alpha_b, beta_b)
            - log_beta_function(alpha_a, beta_a)
            + (alpha_a - alpha_b) * torch.digamma(alpha_a)
            + (beta_a - beta_b) * torch.digamma(beta_a)
            + (alpha_b - alpha_a + beta_b - beta_a) * torch.digamma(alpha_a + beta_a)
        )


def log_beta_function(alpha: Tensor, beta: Tensor) -> Tensor:
    """``log B(alpha, beta) = lgamma(alpha) + lgamma(beta) - lgamma(alpha + beta)``."""
    return torch.lgamma(alpha) + torch.lgamma(beta) - torch.lgamma(alpha + beta)
