"""``evolutionary``: a gradient-free step from random perturbations of the parameters."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from torchforce.core.optimizers.base import (
    Batch,
    Info,
    Objective,
    Optimizer,
    Reference,
    Update,
    add_,
    expect_positive,
    restore,
    snapshot,
)
from torchforce.spec import expect_bool
from torchforce.spec.checks import expect_steps


class Evolutionary(Optimizer):
    """``evolutionary(learning_rate, num_samples=1, unroll_loop=False)``, as in TensorForce 0.4.

    For each sample, a perturbation ``learning_rate * N(0, 1)`` (torch's global RNG) is tried; it counts with sign
    ``sign(loss_before - loss_perturbed)`` (towards it when it lowers the loss, away otherwise). The step is the
    mean of the signed perturbations. ``unroll_loop`` is accepted for 2018 configs and ignored. Info: ``loss``
    (before the step) and ``improved_fraction`` (share of samples that lowered the loss).
    """

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float,
        num_samples: int = 1,
        unroll_loop: bool = False,
    ) -> None:
        super().__init__(parameters)
        self.learning_rate = expect_positive(learning_rate, "learning_rate")
        self.num_samples = expect_steps(num_samples, "num_samples")
        expect_bool(unroll_loop, "unroll_loop")

    @property
    def inner_steps(self) -> int:
        return self.num_samples + 1  # a loss per perturbation, and the one before

    @torch.no_grad()
    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        before = snapshot(self.parameters)
        loss = float(objective.loss(batch, reference))
        deltas = [torch.zeros_like(value) for value in before]
        improved = 0
        for _ in range(self.num_samples):
            perturbation = [torch.randn_like(value) * self.learning_rate for value in before]
            add_(self.parameters, perturbation)
            perturbed_loss = float(objective.loss(batch, reference))
            restore(self.parameters, before)
            direction = (loss > perturbed_loss) - (loss < perturbed_loss)
            improved += loss > perturbed_loss
            for delta, noise in zip(deltas, perturbation, strict=True):
                delta.add_(noise, alpha=direction / self.num_samples)
        add_(self.parameters, deltas)
        info: Info = {"loss": loss, "improved_fraction": improved / self.num_samples}
        return Update(deltas, info)
