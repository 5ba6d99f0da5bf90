"""Acting of small dense policies in NumPy, on the CPU.

A policy whose network is a chain of dense layers (tanh, relu or no activation) and whose heads have a NumPy
sampler (categorical, Bernoulli, Gaussian, deterministic) acts through `HostPolicy`: the same products, activations
and draws as NumPy calls on views of the parameters' own memory, so every in-place change of a parameter (an update,
a restore, a sync, variable noise) is seen at once. Eager PyTorch costs a few microseconds a call whatever the size:
for small MLPs on a few rows that is most of an act (CartPole's 64x64 PPO policy on 16 rows: about 50 us as torch
calls, 18 as NumPy; ``bench/profiles.py floors``). Updates, and acting anywhere else (a GPU, a convolution, a
recurrent layer, mixed precision, an agent that keeps what acting computed, a batch whose products NumPy's BLAS
would thread: ``ONE_THREAD_WORK``), stay in torch.

The draws are torch's, the very numbers the torch path would sample from (``TorchDraws``): the same actions up to
the last bits of float32 arithmetic (which reach a sample only at a near-tie), checkpoints and acting apart
(``ApartRandomness``) as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchforce.core.distributions.base import HostSampler, host_linear

Activation = Callable[[np.ndarray], None]


def _relu(values: np.ndarray) -> None:
    np.maximum(values, 0.0, out=values)


def _tanh(values: np.ndarray) -> None:
    np.tanh(values, out=values)


# a dense layer's ``act`` (the torch function its forward applies) -> the same in place on an array
HOST_ACTIVATIONS: dict[Any, Activation | None] = {None: None, torch.relu: _relu, torch.tanh: _tanh}
#: multiply-adds of one product below which OpenBLAS (NumPy's BLAS) computes on one thread (its SMP threshold,
#: 65,536 x 4): the host path takes only batches whose every product stays below it, so that acting keeps to the
#: one core torch would use with one thread (and where BLAS would thread, torch's one thread is about as fast)
ONE_THREAD_WORK = 262_144


class HostPolicy:
    """A policy as NumPy calls: ``layers`` ``(linear map, activation)`` from the state ``state`` to the embedding
    (feature-major, ``host_linear``), then each action's sampler. ``current`` tells
    whether the views still show what the policy computes with (`Structure`)."""

    def __init__(
        self,
        state: str,
        layers: list[tuple[Callable[[np.ndarray], np.ndarray], Activation | None]],
        samplers: dict[str, HostSampler],
        structure: Structure,
    ) -> None:
        self.state, self.layers, self.samplers = state, layers, tuple(samplers.items())
        self.structure = structure
        self.key = structure.key()
        # the rows of a batch whose largest product stays on one thread
        self.most_rows = (ONE_THREAD_WORK - 1) // max(structure.largest, 1)

    @classmethod
    def of(cls, policy: Any) -> HostPolicy | None:
        """``policy`` as NumPy calls, or None where it acts in torch only (see the module's docstring)."""
        network, structure = policy.network, Structure(policy)
        chain = network.dense_chain() if computes_as(network, "dense_chain", ("forward", "forward_unhooked")) else None
        if chain is None or network.autocast_dtype is not None:
            return None
        if not all(p.device.type == "cpu" and p.dtype == torch.float32 for p in structure.tensors()):
            return None
        state, dense = chain
        if any(layer.act not in HOST_ACTIVATIONS for layer in dense):
            return None
        layers = [(host_linear(layer), HOST_ACTIVATIONS[layer.act]) for layer in dense]
        samplers = {}
        for name, head in policy.heads.items():
            sampler = head.host_sampler() if computes_as(head, "host_sampler", ("forward", "sample")) else None
            if sampler is None:
                return None
            samplers[name] = sampler
        return cls(state, layers, samplers, structure)

    def takes(self, rows: int) -> bool:
        """Whether a batch of ``rows`` states acts here (see ``ONE_THREAD_WORK``): CartPole's 64x64 policy up to 63
        rows, a 256x256 one up to 3."""
        return rows <= self.most_rows

    def current(self) -> bool:
        """Whether the views still show the policy's parameters: none and no module was replaced since."""
        return self.structure.key() == self.key

    def act(self, states: dict[str, np.ndarray], deterministic: bool) -> dict[str, Any]:
        """The actions for a batch of (preprocessed) states, as ``Policy.act_forward`` gives them."""
        x = states[self.state]
        if x.dtype != np.float32:  # torch refuses to multiply them with the float32 weights too
            raise TypeError(f"state '{self.state}' reached the policy as {x.dtype}, expected float32")
        with np.errstate(all="ignore"):  # as torch: an infinite state or weight gives NaN actions, not warnings
            x = x.T  # feature-major, [features, rows] (host_linear)
            for linear, activation in self.layers:
                x = linear(x)
                if activation is not None:
                    activation(x)
            return {name: sample(x, deterministic) for name, sample in self.samplers}


class Structure:
    """What the views depend on: each parameter's memory (a parameter replaced by another Parameter, by
    ``load_state_dict(assign=True)``, or given new memory by ``.data =`` or ``to()``, has other memory) and each
    module's place (a head or layer replaced). ``key()`` costs about 2 us for a small MLP policy, where walking
    ``policy.parameters()`` would cost 11."""

    def __init__(self, policy: Any) -> None:
        modules = list(policy.modules())
        self.parameters = [(m._parameters, name) for m in modules for name, p in m._parameters.items() if p is not None]
        self.children = [(m._modules, name) for m in modules for name in m._modules]
        self.largest = max((p.numel() for p in self.tensors() if p.dim() == 2), default=0)  # a product's weights

    def tensors(self) -> list[Tensor]:
        """The policy's parameters."""
        return [parameters[name] for parameters, name in self.parameters]

    def key(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return (
            tuple(parameters[name].data_ptr() for parameters, name in self.parameters),
            tuple(id(children[name]) for children, name in self.children),
        )


def computes_as(module: Any, method: str, computing: tuple[str, ...]) -> bool:
    """Whether ``module``'s class computes as the class that defined its ``method`` (``host_sampler``,
    ``dense_chain``) does: no subclass below that one overrides ``computing`` (``forward``, ``sample``), whose NumPy
    version the method would not know of."""
    classes = type(module).__mro__
    owner = next(index for index, klass in enumerate(classes) if method in vars(klass))
    return not any(name in vars(klass) for klass in classes[:owner] for name in computing)
