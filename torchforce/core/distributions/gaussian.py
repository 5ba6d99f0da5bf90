"""Gaussian distribution for float actions: a state-dependent mean and log standard deviation per element."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torchforce.core.distributions.base import Distribution, Params
from torchforce.spec import ActionSpec, expect_float
from torchforce.spec.checks import expect_float32

#: log std is clipped to [-LOG_STD_BOUND, LOG_STD_BOUND], i.e. std in [1e-6, 1e6], as in 2018
LOG_STD_BOUND = -math.log(1e-6)
HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


class Gaussian(Distribution):
    """``N(mean, exp(log_std)^2)`` independently for each element of a float action.

    Both the mean and the log std come from Linear heads on the embedding, so the std is **state-dependent**
    (as in 2018; there is no free-standing log-std parameter). ``params = (mean, log_std)``, each ``[B, *shape]``,
    with ``log_std`` clipped to ``±log(1e-6)``. ``mean`` and ``log_stddev`` (2018 kwargs) are the initial biases.
    For a bounded action, samples (deterministic ones too) are clipped to ``[min_value, max_value]``; the
    log-probability is that of the unclipped density at the given action.
    """

    action_types = ("float",)

    def __init__(self, action: ActionSpec, input_size: int, *, mean: float = 0.0, log_stddev: float = 0.0) -> None:
        super().__init__(action, input_size)
        mean = expect_float32(mean, "mean")
        log_stddev = expect_float(log_stddev, "log_stddev", minimum=-LOG_STD_BOUND, maximum=LOG_STD_BOUND)
        self.mean = self.linear(1, mean)
        self.log_stddev = self.linear(1, log_stddev)

    def forward(self, embedding: Tensor) -> Params:
        batch = embedding.shape[0]
        mean = self.mean(embedding).view(batch, *self.shape)
        log_std = self.log_stddev(embedding).view(batch, *self.shape).clamp(-LOG_STD_BOUND, LOG_STD_BOUND)
        return mean, log_std

    def sample(self, params: Params, deterministic: bool = False) -> Tensor:
        mean, log_std = params
        value = mean if deterministic else mean + log_std.exp() * torch.randn_like(mean)
        if self.action.bounded:
            value = value.clamp(self.action.min_value, self.action.max_value)
        return value

    def log_prob(self, params: Params, action: Tensor) -> Tensor:
        mean, log_std = params
        z = (action - mean) * torch.exp(-log_std)
        return -0.5 * z.square() - log_std - HALF_LOG_TWO_PI

    def entropy(self, params: Params) -> Tensor:
        _, log_std = params
        return log_std + (0.5 + HALF_LOG_TWO_PI)

    def kl_divergence(self, params_a: Params, params_b: Params) -> Tensor:
        (mean_a, log_std_a), (mean_b, log_std_b) = params_a, params_b
        variance_ratio = torch.exp(2.0 * (log_std_a - log_std_b))
        mean_term = (mean_a - mean_b).square() * torch.exp(-2.0 * log_std_b)
        return log_std_b - log_std_a + 0.5 * (variance_ratio + mean_term - 1.0)
