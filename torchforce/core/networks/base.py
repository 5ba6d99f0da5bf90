"""What every layer shares: the build-time description of a tensor (`Value`), the `Layer` base class and the
small spec helpers the layers use (activations, windows, padding, weight penalties).

Layers are built for a known input: each gets ``incoming`` (a `Value`: per-sample shape, dtype, and the state it
is, if it is a raw state) and sets ``self.output`` (the `Value` it produces). Nothing is lazy and nothing about
shapes is worked out during ``forward``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchforce.spec import SpecError, StateSpec, expect_choice, expect_float
from torchforce.spec.checks import MAX_ELEMENTS, expect_elements, expect_limited_int
from torchforce.spec.errors import did_you_mean


@dataclass(frozen=True)
class Value:
    """A tensor as the network builder sees it: per-sample shape (no batch dim), dtype, and its state, if raw."""

    shape: tuple[int, ...]
    dtype: str = "float"  # "float", "int", "bool" or "uint8", as in StateSpec.type
    state: StateSpec | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class CastCopies(NamedTuple):
    """A layer's weight and bias cast to autocast's dtype, and what they were cast from (`Layer.weight_and_bias`)."""

    weight: Tensor
    bias: Tensor | None
    versions: tuple[int, int | None]
    dtype: torch.dtype
    weight_cast: Tensor
    bias_cast: Tensor | None

    def casts(self, weight: Tensor, bias: Tensor | None, versions: tuple[int, int | None], dtype: torch.dtype) -> bool:
        """Whether these are the casts of ``weight`` and ``bias`` as they are now, to ``dtype``."""
        return self.weight is weight and self.bias is bias and self.versions == versions and self.dtype == dtype


class Layer(nn.Module):
    """Base class of network layers (user layers may subclass it and be named by ``"module:Class"``).

    ``kind`` tells the network how to call the layer: ``"layer"`` (``x -> x``), ``"input"`` (``(named, x) -> x``),
    ``"output"`` (registers ``x`` under ``self.name``), ``"emit"`` (``x -> (x, {name: tensor})``) or
    ``"recurrent"`` (``(x, state) -> (x, next_state)``, with per-sample state shape ``self.internal_shape``).
    ``needs_float``: the builder casts int/bool inputs to float before the layer.
    """

    kind: str = "layer"  # a class attribute (Dueling with output names sets its own)
    needs_float: ClassVar[bool] = True
    name: str  # set by "output" layers
    internal_shape: tuple[int, ...]  # set by "recurrent" layers
    act: Callable[[Tensor], Tensor] | None  # set by attach_activation, with activation_name
    activation_name: str
    # the agent's mixed_precision, set with the network's (set_autocast): None, float32 throughout
    autocast_dtype: torch.dtype | None = None

    def __init__(self, *, incoming: Value, path: str) -> None:
        super().__init__()
        self.output = Value(incoming.shape)
        self.outputs: dict[str, Value] = {}  # names this layer registers for later input layers
        self.l1_regularization = 0.0
        self.l2_regularization = 0.0

    def weight_and_bias(self) -> tuple[Tensor, Tensor | None]:
        """The ``weight`` and ``bias`` this pass multiplies by (the layers with a linear map or a convolution). In a
        pass without gradients under the network's autocast (acting, a target network's values), the copies in
        autocast's dtype that the first such pass made serve every later one until a parameter changes (an update,
        a restore, a sync: each bumps its version) or is replaced. Autocast would cast them anew on every call,
        which at one row costs more than the product (Breakout's 3136x512 dense layer: 0.5 ms an act against 0.25
        in float32). The numbers are autocast's own casts, bit for bit. A pass with gradients gets the parameters
        themselves: autocast's cast of them is differentiated back to the float32 weights."""
        parameters = self._parameters  # not self.weight: Module.__getattr__ costs a microsecond on every pass
        weight, bias = cast(Tensor, parameters["weight"]), parameters.get("bias")
        if (
            self.autocast_dtype is None
            or torch.compiler.is_compiling()
            or torch.is_grad_enabled()
            or not torch.is_autocast_enabled(weight.device.type)
        ):
            return weight, bias
        dtype = torch.get_autocast_dtype(weight.device.type)
        versions = (weight._version, None if bias is None else bias._version)
        copies = self.__dict__.get("_cast_copies")
        if copies is None or not copies.casts(weight, bias, versions, dtype):
            low = None if bias is None else bias.to(dtype)
            copies = CastCopies(weight, bias, versions, dtype, weight.to(dtype), low)
            self.__dict__["_cast_copies"] = copies
        return copies.weight_cast, copies.bias_cast

    def __getstate__(self) -> dict[str, Any]:
        # a copy (deepcopy, pickle) starts without cast copies: its parameters' versions count from 0 again
        state = super().__getstate__()
        state.pop("_cast_copies", None)
        return state

    def set_regularization(self, l1: Any, l2: Any, path: str) -> None:
        self.l1_regularization = expect_float(l1, f"{path}.l1_regularization", minimum=0.0)
        self.l2_regularization = expect_float(l2, f"{path}.l2_regularization", minimum=0.0)

    def extra_repr(self) -> str:
        text = f"output={list(self.output.shape)}"
        if "act" in self.__dict__:
            text += f", activation={self.activation_name}"
        return text

    @property
    def regularized(self) -> bool:
        return self.l1_regularization > 0.0 or self.l2_regularization > 0.0

    def regularization_loss(self) -> Tensor | None:
        """``l2 * sum(w**2) / 2 + l1 * sum(|w|)`` over the layer's weights and biases (2018's tf.nn.l2_loss form);
        learned activation parameters are not penalized. None when the layer has no penalty."""
        if not self.regularized:
            return None
        terms = []
        for module in self.modules():
            if isinstance(module, Nonlinearity):
                continue
            for parameter in module.parameters(recurse=False):
                if self.l2_regularization > 0.0:
                    terms.append(self.l2_regularization * 0.5 * parameter.square().sum())
                if self.l1_regularization > 0.0:
                    terms.append(self.l1_regularization * parameter.abs().sum())
        return torch.stack(terms).sum() if terms else None


SMALLER = "Use a smaller size (or a smaller input, e.g. through a pooling or a smaller state)."


def allocate(shape: tuple[int, ...], path: str, what: str) -> Tensor:
    """An uninitialized float tensor of ``shape`` for a layer's ``what`` (``weights``), refused with a SpecError
    when it has more than ``MAX_ELEMENTS`` elements or the machine cannot allocate it (instead of the allocator's
    error, or an agent that fills all memory)."""
    expect_elements(math.prod(shape), path, f"the {what} {list(shape)}", hint=SMALLER)
    try:
        return torch.empty(shape)
    except (RuntimeError, MemoryError):  # torch's allocator raises RuntimeError("... can't allocate memory ...")
        raise SpecError(path, f"the {what} {list(shape)} do not fit in this machine's memory", hint=SMALLER) from None


def expect_rank(incoming: Value, rank: int, path: str, layer: str, layout: str) -> None:
    """A SpecError unless the per-sample input has ``rank`` dimensions."""
    if incoming.rank == rank:
        return
    hint = None
    if rank == 1 and incoming.rank == 3:  # an image [height, width, channels]
        hint = (
            "An image wants convolutions: the shipped configs ppo_atari, dqn_atari (Atari frame stacks), ppo_cnn and "
            'dqn_visual have them; or add {"type": "flatten"} before it to make the input a vector.'
        )
    elif rank == 1 and incoming.rank != 1:
        hint = 'Add {"type": "flatten"} before it to make the input a vector.'
    raise SpecError(
        path,
        f"layer '{layer}' needs an input of shape {layout} per sample, this input has shape {incoming.shape}",
        hint=hint,
    )


# ---------------------------------------------------------------------------------------------------------------
# nonlinearities


def _crelu(x: Tensor) -> Tensor:
    return torch.cat((torch.relu(x), torch.relu(-x)), dim=-1)


def _softmax(x: Tensor) -> Tensor:
    return torch.softmax(x, dim=-1)


def _identity(x: Tensor) -> Tensor:
    return x


# name -> function of beta * x (None: identity); lrelu/elu take alpha, swish is x * sigmoid(beta * x)
NONLINEARITIES = {
    "elu": F.elu,
    "relu": torch.relu,
    "selu": torch.selu,
    "sigmoid": torch.sigmoid,
    "swish": F.silu,
    "lrelu": F.leaky_relu,
    "leaky_relu": F.leaky_relu,
    "crelu": _crelu,
    "softmax": _softmax,
    "softplus": F.softplus,
    "softsign": F.softsign,
    "tanh": torch.tanh,
    "none": None,
}
ALPHA_DEFAULTS = {"lrelu": 0.2, "leaky_relu": 0.2, "elu": 1.0}


class Nonlinearity(Layer):
    """``name(beta * x)``, with ``beta * x`` clipped to [min, max] first when given; ``beta='learn'`` makes beta a
    trained scalar (starting at 1). ``crelu`` doubles the last dimension; ``softmax``/``crelu`` act on it."""

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        name: str = "relu",
        alpha: float | None = None,
        beta: float | str = 1.0,
        max: float | None = None,
        min: float | None = None,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        self.name = expect_choice(name, f"{path}.name", NONLINEARITIES)
        if alpha is not None and name not in ALPHA_DEFAULTS:
            raise SpecError(f"{path}.alpha", f"only lrelu, leaky_relu and elu take alpha, not {name}")
        alpha = expect_float(alpha if alpha is not None else ALPHA_DEFAULTS.get(name, 0.0), f"{path}.alpha")
        self.max_value = expect_float(max, f"{path}.max", allow_none=True, finite=False)  # inf: no clipping there
        self.min_value = expect_float(min, f"{path}.min", allow_none=True, finite=False)
        if beta == "learn":
            self.beta = nn.Parameter(torch.ones(()))
            self.scale = None
        else:
            self.scale = expect_float(beta, f"{path}.beta")
        function = NONLINEARITIES[name]
        if name in ("lrelu", "leaky_relu"):
            function = partial(F.leaky_relu, negative_slope=alpha)
        elif name == "elu" and alpha != 1.0:
            function = partial(F.elu, alpha=alpha)
        self.function = function
        plain = self.scale == 1.0 and self.max_value is None and self.min_value is None
        # direct: the function to call when nothing else is needed (the fast path); None for the general path
        self.direct = (function or _identity) if plain else None
        self.identity = plain and function is None
        if name in ("crelu", "softmax") and incoming.rank == 0:
            raise SpecError(f"{path}.name", f"{name} acts on the last dimension; this input is a scalar per sample")
        shape = incoming.shape
        if name == "crelu":
            shape = (*shape[:-1], 2 * shape[-1])
        self.output = Value(shape)

    def extra_repr(self) -> str:
        return f"name={self.name}, output={list(self.output.shape)}"

    def forward(self, x: Tensor) -> Tensor:
        if self.direct is not None:
            return self.direct(x)
        z = x * (self.beta if self.scale is None else self.scale)
        if self.max_value is not None or self.min_value is not None:
            z = z.clamp(self.min_value, self.max_value)
        if self.name == "swish":
            return x * torch.sigmoid(z)
        return z if self.function is None else self.function(z)


ACTIVATION_KEYS = ("name", "alpha", "beta", "max", "min")


def build_activation(spec: Any, path: str, incoming: Value) -> Nonlinearity | None:
    """The activation of a dense/conv/dueling layer from its spec: a name, a dict ``{name, alpha, beta, max, min}``,
    or null/"none" for no activation. Returns None when it would do nothing."""
    if spec is None:
        return None
    kwargs: dict[str, Any]
    if isinstance(spec, str):
        kwargs = {"name": spec}
    elif isinstance(spec, dict):
        kwargs = dict(spec)
        for key in kwargs:
            if key not in ACTIVATION_KEYS:
                guess = did_you_mean(key, ACTIVATION_KEYS)
                hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + ", ".join(ACTIVATION_KEYS) + "."
                raise SpecError(f"{path}.{key}", "unknown key for an activation", hint=hint)
    else:
        raise SpecError(path, "not an activation", got=spec, expected='a name like "relu" or {"name": "lrelu", ...}')
    layer = Nonlinearity(incoming=incoming, path=path, **kwargs)
    return None if layer.identity else layer


def attach_activation(module: Layer, activation: Nonlinearity | None) -> None:
    """Register ``activation`` on ``module`` (only when it has parameters to save) and set ``module.act``, the
    callable its forward applies (a plain torch function where possible, so no extra module call)."""
    if activation is not None and any(True for _ in activation.parameters()):
        module.activation = activation
    # set through __dict__: a module stored as an attribute would otherwise be registered a second time
    module.__dict__["act"] = None if activation is None else (activation.direct or activation)
    module.activation_name = "none" if activation is None else activation.name


# ---------------------------------------------------------------------------------------------------------------
# windows and padding (TensorFlow's SAME / VALID)


def expect_extent(value: Any, path: str) -> int:
    """A window or stride: an integer in [1, MAX_ELEMENTS] (torch takes no larger ones)."""
    return expect_limited_int(value, path, minimum=1, maximum=MAX_ELEMENTS)


def expect_pair(value: Any, path: str) -> tuple[int, int]:
    """An int or a pair of ints, as a pair."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise SpecError(path, "not an int or a pair", got=list(value), expected="an integer or [height, width]")
        return (expect_extent(value[0], f"{path}[0]"), expect_extent(value[1], f"{path}[1]"))
    size = expect_extent(value, path)
    return size, size


def expect_padding(value: Any, path: str) -> str:
    if isinstance(value, str):
        value = value.upper()
    return expect_choice(value, path, ("SAME", "VALID"))


def padded_extent(size: int, window: int, stride: int, padding: str, path: str) -> tuple[int, int, int]:
    """Output length and (before, after) padding of one dimension, exactly as TensorFlow computes them.

    SAME: ceil(size / stride) outputs, total padding max((out - 1) * stride + window - size, 0), split with the
    extra cell (odd totals) after. VALID: floor((size - window) / stride) + 1 outputs, no padding.
    """
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + window - size, 0)
        return out, total // 2, total - total // 2
    if size < window:
        raise SpecError(path, f"the window ({window}) is larger than the input ({size}) with padding VALID")
    return (size - window) // stride + 1, 0, 0


def conv_padding(
    sizes: tuple[int, ...],
    windows: tuple[int, ...],
    strides: tuple[int, ...],
    padding: str,
    path: str,
    channels: int = 1,
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """Output sizes and the F.pad argument (last dimension first) for 1 or 2 spatial dims; None: no padding. The
    padded input, of ``channels`` channels, must fit in one tensor (a window far larger than the input pads it)."""
    extents = [padded_extent(n, k, s, padding, path) for n, k, s in zip(sizes, windows, strides, strict=True)]
    padded = math.prod(n + before + after for n, (_, before, after) in zip(sizes, extents, strict=True))
    expect_elements(padded * channels, f"{path}.window", "the padded input per sample", hint=SMALLER)
    pad = tuple(p for _, before, after in reversed(extents) for p in (before, after))
    return tuple(out for out, _, _ in extents), (pad if any(pad) else None)
