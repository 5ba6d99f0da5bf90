"""``natural_gradient``: a trust-region step along F^-1 (-grad L), with the Fisher matrix F of the policy's KL.

The Fisher-vector product ``F v`` is the Hessian-vector product of ``kl_fn`` (KL from the reference policy, zero
with zero gradient at the current parameters) by double backprop. Conjugate gradient solves
``(F + cg_damping I) x = -grad L``; with ``c = 1/2 xT F x`` (the predicted KL of step x) the step is
``x * sqrt(learning_rate / c)``, so its predicted KL equals ``learning_rate`` (TRPO's max_kl). A non-positive
``c`` gives a zero step. The predicted loss decrease ``-gradT step`` is passed on as the estimated improvement
for ``optimized_step``'s line search (TRPO = ``optimized_step(natural_gradient)``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

from torchforce.core.optimizers.base import (
    Batch,
    Info,
    Objective,
    Optimizer,
    Reference,
    Update,
    add_,
    expect_positive,
    gradients,
)
from torchforce.core.optimizers.solvers import conjugate_gradient
from torchforce.spec import expect_bool, expect_float
from torchforce.spec.checks import expect_steps


def flatten(tensors: Sequence[Tensor]) -> Tensor:
    return torch.cat([tensor.reshape(-1) for tensor in tensors])


def unflatten(vector: Tensor, like: Sequence[Tensor]) -> list[Tensor]:
    pieces, offset = [], 0
    for tensor in like:
        pieces.append(vector[offset : offset + tensor.numel()].view_as(tensor))
        offset += tensor.numel()
    return pieces


class NaturalGradient(Optimizer):
    """``natural_gradient(learning_rate, cg_max_iterations=20, cg_damping=1e-3, cg_unroll_loop=False)``.

    ``learning_rate`` is the KL bound of the step; ``cg_unroll_loop`` is accepted for 2018 configs and ignored.
    Needs ``kl_fn``. Info: ``loss`` (before the step), ``kl_estimate`` (1/2 stepT F step, = learning_rate unless
    the step is zero) and ``estimated_improvement``.
    """

    needs_kl = True

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float,
        cg_max_iterations: int = 20,
        cg_damping: float = 1e-3,
        cg_unroll_loop: bool = False,
    ) -> None:
        super().__init__(parameters)
        self.learning_rate = expect_positive(learning_rate, "learning_rate")
        self.cg_max_iterations = expect_steps(cg_max_iterations, "cg_max_iterations")
        self.cg_damping = expect_float(cg_damping, "cg_damping", minimum=0.0)
        expect_bool(cg_unroll_loop, "cg_unroll_loop")

    @property
    def inner_steps(self) -> int:
        return self.cg_max_iterations + 1  # a Fisher-vector product per iteration, and the gradient

    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        loss = objective.loss(batch, reference)
        gradient = flatten(gradients(loss, self.parameters)).detach()
        kl = objective.kl(batch, reference)
        kl_gradient = flatten(gradients(kl, self.parameters, create_graph=True, name="the KL divergence"))

        def fisher_product(vector: Tensor) -> Tensor:
            if not kl_gradient.requires_grad:
                return torch.zeros_like(vector)
            product = gradients(
                torch.dot(kl_gradient, vector), self.parameters, retain_graph=True, name="the KL gradient"
            )
            return flatten(product).detach()

        x = conjugate_gradient(
            lambda vector: fisher_product(vector) + self.cg_damping * vector,
            -gradient,
            max_iterations=self.cg_max_iterations,
        )
        c = 0.5 * float(torch.dot(x, fisher_product(x)))
        if c > 0.0 and math.isfinite(c):
            step = x * math.sqrt(self.learning_rate / c)
            kl_estimate = self.learning_rate
        else:
            step = torch.zeros_like(x)
            kl_estimate = 0.0
        estimated_improvement = -float(torch.dot(gradient, step))
        deltas = [delta.clone() for delta in unflatten(step, self.parameters)]
        add_(self.parameters, deltas)
        info: Info = {
            "loss": float(loss.detach()),
            "kl_estimate": kl_estimate,
            "estimated_improvement": estimated_improvement,
        }
        return Update(deltas, info, estimated_improvement)
