"""Categorical distribution for int actions, one logit per action value and action element; also for bool actions
as two values (False, True), which is how the Q-learning agents model them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchforce.core.distributions.base import Distribution, HostSampler, Params, TorchDraws, affine, host_linear
from torchforce.spec import ActionSpec, SpecError, expect_float


class Categorical(Distribution):
    """Softmax over ``num_actions`` logits for each element of an int action, or over the two values False, True
    (in that order: index 0 is False) of a bool action, whose samples are then bools.

    ``params = (logits,)`` shaped ``[B, *shape, num_actions]``. As in 2018 the logits double as Q-values
    (``q_values``): 2018's ``state_action_value = logsumexp(logits) + log_softmax(logits)`` is the raw logit.
    ``probabilities`` (2018 kwarg) sets the initial softmax: the bias is ``log(probabilities)``. Over a bool
    action the head is a Bernoulli with two logits, ``P(True) = sigmoid(logit_True - logit_False)``: the
    ``bernoulli`` head's one logit cannot hold two Q-values (see ``agents/value_specs.py``).
    """

    action_types = ("int", "bool")

    def __init__(
        self, action: ActionSpec, input_size: int, *, probabilities: Sequence[float] | None = None, weights: Any = None
    ) -> None:
        super().__init__(action, input_size, weights)
        self.as_bool = action.type == "bool"
        self.num_actions = int(action.num_values)
        bias: float | Tensor = 0.0
        if probabilities is not None:
            bias = torch.log(self._check_probabilities(probabilities))
        self.logits = self.linear(self.num_actions, bias)

    def _check_probabilities(self, probabilities: Sequence[float]) -> Tensor:
        if not isinstance(probabilities, Sequence) or isinstance(probabilities, str):
            raise SpecError("probabilities", "not a list", got=probabilities, expected=f"{self.num_actions} numbers")
        if len(probabilities) != self.num_actions:
            raise SpecError(
                "probabilities",
                f"needs one probability per action value ({self.num_actions})",
                got=list(probabilities),
            )
        values = [expect_float(p, f"probabilities[{i}]", minimum=0.0) for i, p in enumerate(probabilities)]
        total = sum(values)
        if not math.isclose(total, 1.0, rel_tol=1e-3) or min(values) <= 0.0:
            raise SpecError(
                "probabilities", "must be positive and sum to 1", got=list(probabilities), expected="e.g. [0.5, 0.5]"
            )
        return torch.tensor(values, dtype=torch.float32) / total

    def forward(self, embedding: Tensor) -> Params:
        logits = affine(self.logits, embedding)
        if self.shape or embedding.dim() != 2:  # one value per row is F.linear's [B, num_actions] as it is
            logits = logits.view(embedding.shape[0], *self.shape, self.num_actions)
        return (logits,)

    def sample(self, params: Params, deterministic: bool = False) -> Tensor:
        (logits,) = params
        if deterministic:
            index = logits.argmax(dim=-1)
        else:
            # Gumbel-max: argmax(logits + G) with G = -log(-log U) is a sample of softmax(logits).
            # log(-log U) - logits is -(logits + G) exactly, so its argmin is the sample, in one buffer
            index = torch.rand_like(logits).log_().neg_().log_().sub_(logits).argmin(dim=-1)
        return index.bool() if self.as_bool else index

    def host_sampler(self) -> HostSampler:
        linear, shape, as_bool = host_linear(self.logits), (*self.shape, self.num_actions), self.as_bool
        uniform = TorchDraws(Tensor.uniform_)

        def sample(embedding: np.ndarray, deterministic: bool) -> np.ndarray:
            logits = linear(embedding).T.reshape(embedding.shape[1], *shape)
            if deterministic:
                index = logits.argmax(axis=-1)
            else:  # Gumbel-max as ``sample`` (U = 0 gives +inf there too: never the argmin)
                noise = np.log(uniform.draw(logits.shape))
                np.negative(noise, out=noise)
                np.log(noise, out=noise)
                noise -= logits
                index = noise.argmin(axis=-1)
            return index.astype(bool) if as_bool else index.astype(np.int64, copy=False)

        return sample

    def log_prob(self, params: Params, action: Tensor) -> Tensor:
        (logits,) = params
        log_probabilities = torch.log_softmax(logits, dim=-1)
        return log_probabilities.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, params: Params) -> Tensor:
        (logits,) = params
        log_probabilities = torch.log_softmax(logits, dim=-1)
        return -(log_probabilities.exp() * log_probabilities).sum(dim=-1)

    def kl_divergence(self, params_a: Params, params_b: Params) -> Tensor:
        log_a = torch.log_softmax(params_a[0], dim=-1)
        log_b = torch.log_softmax(params_b[0], dim=-1)
        return (log_a.exp() * (log_a - log_b)).sum(dim=-1)

    def q_values(self, params: Params) -> Tensor:
        """The raw logits ``[B, *shape, num_actions]``, read as Q-values by DQN-style agents."""
        return params[0]

    def probabilities(self, params: Params) -> Tensor:
        """``softmax(logits)`` ``[B, *shape, num_actions]``."""
        return torch.softmax(params[0], dim=-1)
