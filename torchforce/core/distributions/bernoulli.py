"""Bernoulli distribution for bool actions: one logit per action element."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from torchforce.core.distributions.base import Distribution, HostSampler, Params, TorchDraws, affine, host_linear
from torchforce.spec import ActionSpec, SpecError, expect_float


class Bernoulli(Distribution):
    """``P(True) = sigmoid(logit)`` for each element of a bool action.

    ``params = (logits,)`` shaped ``[B, *shape]``; the log-probabilities are ``log p = -softplus(-logit)`` and
    ``log(1 - p) = -softplus(logit)``, exact for any logit. ``probability`` (2018 kwarg, default 0.5) sets the
    initial ``P(True)``: the bias is its logit ``log(p / (1 - p))``.
    """

    action_types = ("bool",)

    def __init__(self, action: ActionSpec, input_size: int, *, probability: float = 0.5, weights: Any = None) -> None:
        super().__init__(action, input_size, weights)
        probability = expect_float(probability, "probability", minimum=0.0, maximum=1.0)
        if probability in (0.0, 1.0):
            raise SpecError("probability", "must be strictly between 0 and 1", got=probability)
        self.logit = self.linear(1, math.log(probability / (1.0 - probability)))

    def forward(self, embedding: Tensor) -> Params:
        return (affine(self.logit, embedding).view(embedding.shape[0], *self.shape),)

    def sample(self, params: Params, deterministic: bool = False) -> Tensor:
        (logits,) = params
        if deterministic:
            return logits > 0.0  # p > 0.5
        return torch.rand_like(logits) < torch.sigmoid(logits)

    def host_sampler(self) -> HostSampler:
        linear, shape, uniform = host_linear(self.logit), self.shape, TorchDraws(Tensor.uniform_)

        def sample(embedding: np.ndarray, deterministic: bool) -> np.ndarray:
            logits = linear(embedding).T.reshape(embedding.shape[1], *shape)
            if deterministic:
                return logits > 0.0
            probability = np.exp(-logits)  # sigmoid(logits) = 1 / (1 + exp(-logits))
            probability += 1.0
            np.reciprocal(probability, out=probability)
            return uniform.draw(logits.shape) < probability

        return sample

    def log_prob(self, params: Params, action: Tensor) -> Tensor:
        (logits,) = params
        return torch.where(action.bool(), -F.softplus(-logits), -F.softplus(logits))

    def entropy(self, params: Params) -> Tensor:
        (logits,) = params
        probability = torch.sigmoid(logits)
        return probability * F.softplus(-logits) + (1.0 - probability) * F.softplus(logits)

    def kl_divergence(self, params_a: Params, params_b: Params) -> Tensor:
        (logits_a,), (logits_b,) = params_a, params_b
        probability_a = torch.sigmoid(logits_a)
        log_true = F.softplus(-logits_b) - F.softplus(-logits_a)  # log p_a - log p_b
        log_false = F.softplus(logits_b) - F.softplus(logits_a)  # log(1 - p_a) - log(1 - p_b)
        return probability_a * log_true + (1.0 - probability_a) * log_false

    def probabilities(self, params: Params) -> Tensor:
        """``P(True)`` per element, ``[B, *shape]``."""
        return torch.sigmoid(params[0])
