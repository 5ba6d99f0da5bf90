"""The Distribution base class: the contract every action head follows (docs/internals.md, "Distributions")."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchforce.core.networks.layers import init_weight
from torchforce.spec import ActionSpec, SpecError
from torchforce.spec.checks import expect_elements

Params = tuple[Tensor, ...]
#: a head's sampling as NumPy calls (``core/host_acting.py``): (the embedding feature-major, ``[D, B]`` float32,
#: deterministic) to the actions ``[B, *shape]``, as ``forward`` then ``sample`` give them
HostSampler = Callable[[np.ndarray, bool], np.ndarray]


def affine(layer: nn.Linear, embedding: Tensor) -> Tensor:
    """``layer(embedding)`` without ``Module.__call__`` and its attribute lookups, a few microseconds that acting
    pays on every step (forward hooks on a head's linear maps do not run)."""
    parameters = layer._parameters
    return F.linear(embedding, cast(Tensor, parameters["weight"]), parameters["bias"])


def host_linear(layer: nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """A linear map as NumPy calls on views of its parameters' memory (a CPU float32 layer's), which follow every
    in-place change of them: feature-major, ``[in, B]`` to ``[out, B]`` (a new array). ``weight @ x`` multiplies
    the weight as it lies in memory, where ``x @ weight.T`` multiplies a transposed one, twice as slow in OpenBLAS
    at 16x256x256."""
    parameters = layer._parameters
    weight = cast(Tensor, parameters["weight"]).detach().numpy()
    bias = None if parameters["bias"] is None else parameters["bias"].detach().numpy().reshape(-1, 1)

    def linear(x: np.ndarray) -> np.ndarray:
        y = weight @ x
        if bias is not None:
            y += bias
        return y

    return linear


class TorchDraws(threading.local):
    """Draws of torch's generator for sampling in NumPy: ``draw(shape)`` fills a buffer of this thread's in place
    with ``fill`` (``torch.Tensor.uniform_`` or ``normal_``), the very numbers ``torch.rand_like``/``randn_like`` of
    that shape would be (so acting on the host samples as the torch path does, and a checkpoint's generator states
    go on as they would have), and returns it as an array: read it before the next draw."""

    def __init__(self, fill: Callable[[Tensor], Tensor]) -> None:
        self.fill = fill
        self.shape: tuple[int, ...] = ()
        self.buffer, self.array = torch.empty(()), np.empty(())

    def draw(self, shape: tuple[int, ...]) -> np.ndarray:
        if shape != self.shape:  # float32, the logits' dtype, whatever torch's default
            self.shape, self.buffer = shape, torch.empty(shape, dtype=torch.float32)
            self.array = self.buffer.numpy()
        self.fill(self.buffer)
        return self.array


class Distribution(nn.Module):
    """A policy head for one action of shape ``action.shape``.

    ``forward(embedding [B, D]) -> params`` (a tuple of tensors shaped ``[B, *shape, ...]``), then
    ``sample``, ``log_prob``, ``entropy`` and ``kl_divergence`` work on those params, all per action element
    (``[B, *shape]``); agents reduce over elements themselves. Sampling uses torch's global RNG.

    ``weights`` (ours, every distribution takes it) initializes the head's linear maps as a layer's ``weights`` does
    (e.g. ``{"name": "orthogonal", "gain": 0.01}``: a near-uniform first policy, as SB3's ``ortho_init``); null
    keeps torch's default for ``nn.Linear``.
    """

    #: action types this distribution can model; subclasses narrow it
    action_types: tuple[str, ...] = ()

    def __init__(self, action: ActionSpec, input_size: int, weights: Any = None) -> None:
        super().__init__()
        if action.type not in self.action_types:
            kind = type(self).__name__.lower()
            raise SpecError(
                "type",
                f"a {kind} distribution cannot model {action.type} action '{action.name}'",
                expected="a distribution for " + " or ".join(self.action_types) + " actions",
                hint=f"Leave the type out to get the default for {action.type} actions.",
            )
        if isinstance(input_size, bool) or not isinstance(input_size, int) or input_size < 1:
            raise ValueError(f"input_size must be a positive integer, got {input_size!r}")
        self.action = action
        self.input_size = input_size
        self.shape = tuple(action.shape)
        self.size = math.prod(self.shape)
        self.weights_init = weights

    def linear(self, per_element: int, bias: float | Tensor) -> nn.Linear:
        """A Linear from the embedding to ``per_element`` outputs for every action element, bias set to ``bias``."""
        expect_elements(self.input_size * self.size * per_element, "", f"the weights of action '{self.action.name}'")
        layer = nn.Linear(self.input_size, self.size * per_element)
        if self.weights_init is not None:
            init_weight(layer.weight, self.weights_init, "weights")
        with torch.no_grad():
            if isinstance(bias, Tensor):
                layer.bias.copy_(bias.repeat(self.size))
            else:
                layer.bias.fill_(bias)
        return layer

    def forward(self, embedding: Tensor) -> Params:
        raise NotImplementedError

    def host_sampler(self) -> HostSampler | None:
        """``forward`` then ``sample`` as NumPy calls on views of the head's parameters, drawing what ``sample``
        draws from torch's generator (``TorchDraws``), called under ``np.errstate(all="ignore")``
        (``core/host_acting.py``); None for a head that acts in torch only. A subclass that overrides ``forward`` or
        ``sample`` acts in torch unless it overrides this too."""
        return None

    def sample(self, params: Params, deterministic: bool = False) -> Tensor:
        raise NotImplementedError

    def log_prob(self, params: Params, action: Tensor) -> Tensor:
        raise NotImplementedError

    def entropy(self, params: Params) -> Tensor:
        raise NotImplementedError

    def kl_divergence(self, params_a: Params, params_b: Params) -> Tensor:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"action={self.action.name!r}, shape={self.shape}, input_size={self.input_size}"
