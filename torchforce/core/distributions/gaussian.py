"""Gaussian distribution for float actions: a state-dependent mean and log standard deviation per element."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn, special

from torchforce.core.distributions.base import Distribution, HostSampler, Params, TorchDraws, affine, host_linear
from torchforce.spec import ActionSpec, expect_bool, expect_float
from torchforce.spec.checks import expect_float32

#: log std is clipped to [-LOG_STD_BOUND, LOG_STD_BOUND], i.e. std in [1e-6, 1e6], as in 2018
LOG_STD_BOUND = -math.log(1e-6)
HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


class Gaussian(Distribution):
    """``N(mean, exp(log_std)^2)`` independently for each element of a float action.

    Both the mean and the log std come from Linear heads on the embedding, so the std is **state-dependent**
    (as in 2018). ``state_dependent_std=False`` makes the log std one learned parameter per element instead, the
    same in every state (SB3's Gaussian, its ``log_std_init`` being ``log_stddev``): under PPO a state-dependent std
    can shrink in the states the updates favour until their ratios overflow. ``params = (mean, log_std)``, each
    ``[B, *shape]``, with ``log_std`` clipped to ``±log(1e-6)``. ``mean`` and ``log_stddev`` (2018 kwargs) are the
    initial biases (``log_stddev``: the parameter's initial value). For a bounded action, samples (deterministic
    ones too) are clipped to ``[min_value, max_value]``, and the log-probability is that of the clipped
    distribution: the density inside the bounds, the tail's mass ``log Φ`` at a bound (where 2018 took the density,
    whose likelihood ratios overflow once the mean drifts past a bound: PPO on Hopper diverged to NaN actions).
    """

    action_types = ("float",)

    def __init__(
        self,
        action: ActionSpec,
        input_size: int,
        *,
        mean: float = 0.0,
        log_stddev: float = 0.0,
        state_dependent_std: bool = True,
        weights: Any = None,
    ) -> None:
        super().__init__(action, input_size, weights)
        mean = expect_float32(mean, "mean")
        log_stddev = expect_float(log_stddev, "log_stddev", minimum=-LOG_STD_BOUND, maximum=LOG_STD_BOUND)
        self.state_dependent_std = expect_bool(state_dependent_std, "state_dependent_std")
        self.mean = self.linear(1, mean)
        self.log_stddev: nn.Linear | nn.Parameter = (
            self.linear(1, log_stddev)
            if self.state_dependent_std
            else nn.Parameter(torch.full((self.size,), log_stddev))
        )

    def forward(self, embedding: Tensor) -> Params:
        batch = embedding.shape[0]
        mean = affine(self.mean, embedding)
        reshape = embedding.dim() != 2 or len(self.shape) != 1  # a vector action's rows are F.linear's [B, size]
        if reshape:
            mean = mean.view(batch, *self.shape)
        if isinstance(self.log_stddev, nn.Linear):
            log_std = affine(self.log_stddev, embedding)
            log_std = (log_std.view(batch, *self.shape) if reshape else log_std).clamp(-LOG_STD_BOUND, LOG_STD_BOUND)
        else:  # one value per element, clipped once and shared by the rows: the same numbers and gradients
            log_std = self.log_stddev.clamp(-LOG_STD_BOUND, LOG_STD_BOUND).view(self.shape).expand(batch, *self.shape)
        return mean, log_std

    def sample(self, params: Params, deterministic: bool = False) -> Tensor:
        mean, log_std = params
        value = mean if deterministic else mean + log_std.exp() * torch.randn_like(mean)
        if self.action.bounded:
            value = value.clamp(self.action.min_value, self.action.max_value)
        return value

    def host_sampler(self) -> HostSampler:
        mean_linear, shape = host_linear(self.mean), self.shape
        bounds = self.action.bounds if self.action.bounded else None
        normal = TorchDraws(Tensor.normal_)
        if isinstance(self.log_stddev, nn.Linear):
            std_linear = host_linear(self.log_stddev)

            def log_std_of(embedding: np.ndarray) -> np.ndarray:
                return std_linear(embedding).T.reshape(embedding.shape[1], *shape)

        else:
            shared = self.log_stddev.detach().numpy().reshape(shape)  # one value per element, for every row

            def log_std_of(embedding: np.ndarray) -> np.ndarray:
                return shared

        def sample(embedding: np.ndarray, deterministic: bool) -> np.ndarray:
            rows = embedding.shape[1]
            mean = mean_linear(embedding).T.reshape(rows, *shape)
            if deterministic:
                value = np.ascontiguousarray(mean)
            else:
                log_std = log_std_of(embedding)
                value = np.exp(np.clip(log_std, -LOG_STD_BOUND, LOG_STD_BOUND)) * normal.draw(mean.shape)
                value += mean  # mean + exp(log_std) * noise, as sample
            if bounds is not None:
                np.clip(value, *bounds, out=value)
            return value

        return sample

    def log_prob(self, params: Params, action: Tensor) -> Tensor:
        mean, log_std = params
        z = (action - mean) * torch.exp(-log_std)
        density = -0.5 * z.square() - log_std - HALF_LOG_TWO_PI
        if not self.action.bounded:
            return density
        # An action at a bound stands for every sample clipped to it: its probability is the tail's mass, which
        # stays finite and smooth when the mean wanders past the bound (the density there falls off quadratically,
        # and likelihood ratios of such actions overflow).
        low, high = self.action.bounds
        above, below = action >= high, action <= low
        return torch.where(above, special.log_ndtr(-z), torch.where(below, special.log_ndtr(z), density))

    def entropy(self, params: Params) -> Tensor:
        _, log_std = params
        return log_std + (0.5 + HALF_LOG_TWO_PI)

    def kl_divergence(self, params_a: Params, params_b: Params) -> Tensor:
        (mean_a, log_std_a), (mean_b, log_std_b) = params_a, params_b
        variance_ratio = torch.exp(2.0 * (log_std_a - log_std_b))
        mean_term = (mean_a - mean_b).square() * torch.exp(-2.0 * log_std_b)
        return log_std_b - log_std_a + 0.5 * (variance_ratio + mean_term - 1.0)
