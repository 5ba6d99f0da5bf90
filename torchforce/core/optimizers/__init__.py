"""Optimizers: 2018 TensorForce names over torch, meta optimizers, and target-network synchronization.

``build_optimizer(spec, parameters, path="optimizer")`` builds one from a spec such as
``{"type": "multi_step", "num_steps": 10, "optimizer": {"type": "adam", "learning_rate": 1e-3}}``.
The contract (``step``, ``compute_deltas``, ``apply_deltas``, callbacks) is documented in ``base``.
"""

from torchforce.core.optimizers.base import (
    OPTIMIZERS,
    Info,
    MetaOptimizer,
    Objective,
    Optimizer,
    Update,
    build_optimizer,
)
from torchforce.core.optimizers.evolutionary import Evolutionary
from torchforce.core.optimizers.meta import ClippedStep, GlobalOptimizer, MultiStep, OptimizedStep, SubsamplingStep
from torchforce.core.optimizers.natural_gradient import NaturalGradient
from torchforce.core.optimizers.solvers import LineSearchResult, backtracking_line_search, conjugate_gradient
from torchforce.core.optimizers.synchronization import Synchronization, build_synchronization
from torchforce.core.optimizers.torch_optimizers import (
    Adadelta,
    Adagrad,
    Adam,
    GradientDescent,
    Momentum,
    Nadam,
    RMSProp,
    TorchOptimizer,
    minimize_each,
)

__all__ = [
    "OPTIMIZERS",
    "Adadelta",
    "Adagrad",
    "Adam",
    "ClippedStep",
    "Evolutionary",
    "GlobalOptimizer",
    "GradientDescent",
    "Info",
    "LineSearchResult",
    "MetaOptimizer",
    "Momentum",
    "MultiStep",
    "Nadam",
    "NaturalGradient",
    "Objective",
    "OptimizedStep",
    "Optimizer",
    "RMSProp",
    "SubsamplingStep",
    "Synchronization",
    "TorchOptimizer",
    "Update",
    "backtracking_line_search",
    "build_optimizer",
    "build_synchronization",
    "conjugate_gradient",
    "minimize_each",
]
