"""Acting of small dense policies in NumPy, on the CPU.

A policy whose network is a chain of dense layers (tanh, relu or no activation) and whose heads have a NumPy
sampler (categorical, Gaussian, deterministic) acts through `HostPolicy`: the same products, activations and draws
as NumPy calls on views of the parameters' own memory, so every in-place change of a parameter (an update, a
restore, a sync, variable noise) is seen at once. Eager PyTorch costs a few microseconds a call whatever the size:
for the MLPs of classic control and MuJoCo that is most of an act (CartPole's 64x64 PPO policy on 16 rows: about
50 us as torch calls, 18 as NumPy; ``bench/profiles.py floors``). Updates, and acting anywhere else (a GPU, a
convolution, a recurrent layer, mixed precision, an agent that keeps what acting computed), stay in torch.

The draws are torch's, the very numbers the torch path would sample from (``TorchDraws``): the same actions up to
the last bits of float32 arithmetic (which reach a sample only at a near-tie), checkpoints and acting apart
(``ApartRandomness``) as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchforce.core.distributions.base import HostSampler, host_affine

Activation = Callable[[np.ndarray], None]


def _relu(values: np.ndarray) -> None:
    np.maximum(values, 0.0, out=values)


def _tanh(values: np.ndarray) -> None:
    np.tanh(values, out=values)


# a dense layer's ``act`` (the torch function its forward applies) -> the same in place on an array
HOST_ACTIVATIONS: dict[Any, Activation | None] = {None: None, torch.relu: _relu, torch.tanh: _tanh}


class HostPolicy:
    """A policy as NumPy calls: ``layers`` ``(weight [in, out], bias [out] or None, activation)`` from the state
    ``state`` to the embedding, then each action's sampler. ``parameters`` are the tensors viewed, and ``key`` what
    `current` compares to tell that they are still the ones acting reads (same memory, no autocast)."""

    def __init__(
        self,
        state: str,
        layers: list[tuple[np.ndarray, np.ndarray | None, Activation | None]],
        samplers: dict[str, HostSampler],
        parameters: list[Tensor],
    ) -> None:
        self.state, self.layers, self.samplers = state, layers, tuple(samplers.items())
        self.parameters = parameters
        self.key = _key(parameters)

    @classmethod
    def of(cls, policy: Any) -> HostPolicy | None:
        """``policy`` as NumPy calls, or None where it acts in torch only (see the module's docstring)."""
        parameters = list(policy.parameters())
        chain = policy.network.dense_chain()
        if chain is None or policy.network.autocast_dtype is not None:
            return None
        if not all(p.device.type == "cpu" and p.dtype == torch.float32 for p in parameters):
            return None
        state, dense = chain
        layers = []
        for layer in dense:
            if layer.act not in HOST_ACTIVATIONS:
                return None
            layers.append((*host_affine(layer), HOST_ACTIVATIONS[layer.act]))
        samplers = {name: head.host_sampler() for name, head in policy.heads.items()}
        if any(sampler is None for sampler in samplers.values()):
            return None
        return cls(state, layers, {name: sampler for name, sampler in samplers.items() if sampler}, parameters)

    def current(self) -> bool:
        """Whether the views still show the parameters: none was replaced (``.data =``, ``to()``) since."""
        return _key(self.parameters) == self.key

    def act(self, states: dict[str, np.ndarray], deterministic: bool) -> dict[str, Any]:
        """The actions for a batch of (preprocessed, float32) states, as ``Policy.act_forward`` gives them."""
        with np.errstate(all="ignore"):  # as torch: an infinite state or weight gives NaN actions, not warnings
            x = states[self.state]
            for weight, bias, activation in self.layers:
                x = x @ weight
                if bias is not None:
                    x += bias
                if activation is not None:
                    activation(x)
            return {name: sample(x, deterministic) for name, sample in self.samplers}


def _key(parameters: list[Tensor]) -> tuple[int, ...]:
    return tuple(parameter.data_ptr() for parameter in parameters)
