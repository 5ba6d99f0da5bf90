"""Feed-forward layers of the 2018 network format (docs/tensorforce-0.4.md, Networks): linear, dense, conv1d, conv2d,
pool2d, flatten, embedding, dropout, nonlinearity (in base.py) and dueling. Parameters, names and defaults are 2018's.
One layer is ours: divide, the 2018 ``divide`` preprocessor inside the network, for uint8 image states.

Layout: between layers tensors keep TensorFlow's channels-last layout, [B, L, C] for conv1d and [B, H, W, C] for
conv2d/pool2d (the layout of Gym/ALE images). A conv or pool layer permutes its input to torch's channels-first
layout, runs the torch op and permutes the result back. A contiguous NHWC tensor permuted to NCHW is an NCHW tensor
in channels_last memory format, so this copies nothing and torch picks its channels_last kernels. ``flatten``
after convolutions therefore flattens in (H, W, C) order, as 2018 TensorForce did, on every device.

Weights are stored in torch layout ([out, in] for linear maps); a ``weights`` list in a spec is in 2018's layout
([in, out]) and is transposed when loaded.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchforce.core.networks.base import (
    Layer,
    Nonlinearity,
    Value,
    allocate,
    attach_activation,
    build_activation,
    conv_padding,
    expect_extent,
    expect_padding,
    expect_pair,
    expect_rank,
)
from torchforce.spec import SpecError, expect_bool, expect_choice, expect_dict, expect_float, expect_int
from torchforce.spec.checks import FLOAT32_MAX, expect_float32
from torchforce.spec.errors import did_you_mean

__all__ = [
    "Conv1d",
    "Conv2d",
    "Dense",
    "Divide",
    "Dropout",
    "Dueling",
    "Embedding",
    "Flatten",
    "Linear",
    "Nonlinearity",
    "Pool2d",
]

WEIGHT_INITS = ("xavier", "xavier_normal", "xavier_uniform", "msra", "orthogonal")
INIT_KEYS = {"msra": ("slope",), "orthogonal": ("gain",)}  # the options of a named initializer besides its name


def _array(spec: Any, shape: tuple[int, ...], path: str, what: str) -> Tensor:
    try:
        array = np.asarray(spec, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise SpecError(path, f"not a list of numbers for the {what}", got=spec) from None
    if not (np.isfinite(array) & (np.abs(array) <= FLOAT32_MAX)).all():
        raise SpecError(path, f"the {what} must be finite numbers within float32's range", got=spec)
    array = array.astype(np.float32)
    if array.shape != shape:
        layouts = {2: "[input size, size], the 2018 layout", 3: "[window, channels, size], TF's layout"}
        layouts[4] = "[height, width, channels, size], TF's layout"
        layout = f" ({layouts[len(shape)]})" if len(shape) in layouts else ""
        raise SpecError(
            path, f"{what} of shape {list(array.shape)} do not fit this layer", expected=f"shape {list(shape)}{layout}"
        )
    return torch.from_numpy(array)


def _named_init(weight: Tensor, spec: dict, path: str, *, short: bool = False) -> None:
    """A named initializer on a weight of torch's layout ([out, in] or [out, in, *window]): fans count the window.
    ``short``: given by its name alone (``"msra"``), not as 2018's ``{"name": ...}``."""
    spec = dict(spec)
    name = expect_choice(spec.pop("name", None), f"{path}.name", WEIGHT_INITS)
    accepted = INIT_KEYS.get(name, ())
    for key in spec:
        if key not in accepted:
            options = ", ".join(("name", *accepted))
            raise SpecError(f"{path}.{key}", f"unknown key for the {name} initializer", hint=f"Accepted: {options}.")
    fan_in = weight[0].numel()
    if name == "msra" and short:  # He et al. 2015 as torch and SB3 have it: N(0, 2 / fan_in)
        nn.init.normal_(weight, 0.0, math.sqrt(2.0 / fan_in))
    elif name == "msra":  # 2018's: N(0, 2 / (1 + slope^2) * 2 / (fan_in + fan_out)), slope 0.25 unless given
        slope = expect_float(spec.get("slope", 0.25), f"{path}.slope")
        fan_out = weight[:, 0].numel()
        nn.init.normal_(weight, 0.0, math.sqrt(2.0 / (1.0 + slope**2) * 2.0 / (fan_in + fan_out)))
    elif name == "orthogonal":  # Saxe et al. 2014: an orthogonal [out, in * window] matrix times gain
        nn.init.orthogonal_(weight, expect_float(spec.get("gain", 1.0), f"{path}.gain", minimum=0.0))
    elif name == "xavier_uniform":
        nn.init.xavier_uniform_(weight)
    else:
        nn.init.xavier_normal_(weight)


@torch.no_grad()
def init_weight(weight: Tensor, spec: Any, path: str, default_std: float | None = None) -> None:
    """Initialize a weight of torch's layout ([out, in] or [out, in, *window]) from a ``weights`` spec: None (2018's
    N(0, min(0.1, sqrt(2 / (in + out)))) for linear maps, or N(0, ``default_std``)), a number (constant), a
    list/array in TF's layout ([in, out], or [*window, in, out]), a name or {"name", options}: "xavier",
    "xavier_uniform", "msra" {slope}, "orthogonal" {gain}. ``{"name": "msra"}`` is 2018's (fans averaged, slope
    0.25 by default), the name alone He's (fan in, slope 0)."""
    out_size, in_size, *window = weight.shape
    if spec is None:
        std = min(0.1, math.sqrt(2.0 / (in_size + out_size))) if default_std is None else default_std
        nn.init.normal_(weight, 0.0, std)
    elif isinstance(spec, numbers.Real) and not isinstance(spec, bool):
        nn.init.constant_(weight, expect_float32(spec, path))
    elif isinstance(spec, str):
        _named_init(weight, {"name": spec}, path, short=True)
    elif isinstance(spec, dict):
        _named_init(weight, spec, path)
    elif isinstance(spec, (list, tuple, np.ndarray)):
        array = _array(spec, (*window, in_size, out_size), path, "weights")
        weight.copy_(array.permute(-1, -2, *range(len(window))))  # TF's [*window, in, out] -> [out, in, *window]
    else:
        raise SpecError(
            path,
            "not a weights initializer",
            got=spec,
            expected='null, a number, a list, "xavier", "msra" or {"name": "orthogonal", "gain": ...}',
        )


def make_bias(spec: Any, size: int, path: str) -> nn.Parameter | None:
    """A bias from a 2018 ``bias`` spec: true (zeros), false (none), a number (constant) or a list of ``size``."""
    if isinstance(spec, bool):
        return nn.Parameter(torch.zeros(size)) if spec else None
    if isinstance(spec, numbers.Real):
        return nn.Parameter(torch.full((size,), expect_float32(spec, path)))
    if isinstance(spec, (list, tuple, np.ndarray)):
        return nn.Parameter(_array(spec, (size,), path, "bias values").clone())
    raise SpecError(path, "not a bias", got=spec, expected="true, false, a number or a list")


class Linear(Layer):
    """``x W + b`` on a vector input, no activation."""

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        size: int,
        weights: Any = None,
        bias: Any = True,
        l2_regularization: float = 0.0,
        l1_regularization: float = 0.0,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        expect_rank(incoming, 1, path, "linear", "[features]")
        self.make_parameters(incoming.shape[0], expect_int(size, f"{path}.size", minimum=1), weights, bias, path)
        self.set_regularization(l1_regularization, l2_regularization, path)

    def make_parameters(self, in_size: int, size: int, weights: Any, bias: Any, path: str) -> None:
        self.weight = nn.Parameter(allocate((size, in_size), f"{path}.size", "weights"))
        init_weight(self.weight, weights, f"{path}.weights")
        self.bias = make_bias(bias, size, f"{path}.bias")
        self.output = Value((size,))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, *self.weight_and_bias())


class Dense(Linear):
    """A linear map and an activation (default relu). ``size`` null keeps the input size. ``skip``: a ResNet-style
    block, ``act(W2 act(W1 x + b1) + b2 + x)``, which keeps the input size."""

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        size: int | None = None,
        weights: Any = None,
        bias: Any = True,
        activation: Any = "relu",
        l2_regularization: float = 0.0,
        l1_regularization: float = 0.0,
        skip: bool = False,
    ) -> None:
        Layer.__init__(self, incoming=incoming, path=path)
        expect_rank(incoming, 1, path, "dense", "[features]")
        in_size = incoming.shape[0]
        size = in_size if size is None else expect_int(size, f"{path}.size", minimum=1)
        if expect_bool(skip, f"{path}.skip") and size != in_size:
            raise SpecError(
                f"{path}.size",
                f"a dense layer with skip=true keeps its input size ({in_size})",
                got=size,
                hint="Leave out 'size'.",
            )
        self.make_parameters(in_size, size, weights, bias, path)
        self.set_regularization(l1_regularization, l2_regularization, path)
        activation = build_activation(activation, f"{path}.activation", Value((size,)))
        if skip and activation is not None and activation.output.shape != (size,):
            raise SpecError(f"{path}.activation", "a dense layer with skip=true needs a size-keeping activation")
        attach_activation(self, activation)
        self.skip = Linear(incoming=Value((size,)), path=path, size=size, bias=bias) if skip else None
        self.output = activation.output if activation is not None else Value((size,))

    def forward(self, x: Tensor) -> Tensor:
        y = F.linear(x, *self.weight_and_bias())
        act = self.act
        if act is not None:
            y = act(y)
        if self.skip is not None:
            y = F.linear(y, *self.skip.weight_and_bias()) + x
            if act is not None:
                y = act(y)
        return y


class _Conv(Layer):
    """What conv1d and conv2d share: filters N(0, min(0.1, sqrt(2 / size))) unless ``weights`` says otherwise (ours:
    2018's conv layers took no initializer), zero bias, TF padding, activation."""

    spatial: int = 2
    layer_name: str = "conv2d"
    layout: str = "[height, width, channels]"

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        size: int,
        window: Any = 3,
        stride: Any = 1,
        padding: str = "SAME",
        bias: bool = True,
        weights: Any = None,
        activation: Any = "relu",
        l2_regularization: float = 0.0,
        l1_regularization: float = 0.0,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        expect_rank(incoming, self.spatial + 1, path, self.layer_name, self.layout)
        *sizes, channels = incoming.shape
        size = expect_int(size, f"{path}.size", minimum=1)
        windows: tuple[int, ...]
        strides: tuple[int, ...]
        if self.spatial == 2:
            windows, strides = expect_pair(window, f"{path}.window"), expect_pair(stride, f"{path}.stride")
        else:
            windows, strides = (
                (expect_extent(window, f"{path}.window"),),
                (expect_extent(stride, f"{path}.stride"),),
            )
        padding = expect_padding(padding, f"{path}.padding")
        outs, self.pad = conv_padding(tuple(sizes), windows, strides, padding, path, channels)
        self.stride = strides
        self.weight = nn.Parameter(allocate((size, channels, *windows), path, "filters"))
        init_weight(self.weight, weights, f"{path}.weights", default_std=min(0.1, math.sqrt(2.0 / size)))
        self.bias = nn.Parameter(torch.zeros(size)) if expect_bool(bias, f"{path}.bias") else None
        self.set_regularization(l1_regularization, l2_regularization, path)
        activation = build_activation(activation, f"{path}.activation", Value((*outs, size)))
        attach_activation(self, activation)
        self.output = activation.output if activation is not None else Value((*outs, size))


class Conv1d(_Conv):
    """1-d convolution over [length, channels] inputs (channels last, like TF)."""

    spatial = 1
    layer_name = "conv1d"
    layout = "[length, channels]"

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 2, 1)
        if self.pad is not None:
            x = F.pad(x, self.pad)
        x = F.conv1d(x, *self.weight_and_bias(), self.stride).permute(0, 2, 1)
        return x if self.act is None else self.act(x)


class Conv2d(_Conv):
    """2-d convolution over [height, width, channels] inputs (NHWC, like TF and Gym images)."""

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 3, 1, 2)
        if self.pad is not None:
            x = F.pad(x, self.pad)
        x = F.conv2d(x, *self.weight_and_bias(), self.stride).permute(0, 2, 3, 1)
        return x if self.act is None else self.act(x)


class Pool2d(Layer):
    """Max or average pooling over [height, width, channels] inputs. With SAME padding, padded cells never win a
    max and are left out of an average (TF's behaviour)."""

    correction: Tensor  # a buffer, for an average with padding

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        pooling_type: str = "max",
        window: Any = 2,
        stride: Any = 2,
        padding: str = "SAME",
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        expect_rank(incoming, 3, path, "pool2d", "[height, width, channels]")
        height, width, channels = incoming.shape
        self.average = expect_choice(pooling_type, f"{path}.pooling_type", ("max", "average")) == "average"
        self.window = expect_pair(window, f"{path}.window")
        self.stride = expect_pair(stride, f"{path}.stride")
        padding = expect_padding(padding, f"{path}.padding")
        (out_h, out_w), self.pad = conv_padding((height, width), self.window, self.stride, padding, path, channels)
        if self.average and self.pad is not None:
            # average of the real cells = average over the zero-padded window * cells per window / real cells
            ones = F.pad(torch.ones(1, 1, height, width), self.pad)
            real = F.avg_pool2d(ones, self.window, self.stride)
            self.register_buffer("correction", 1.0 / real, persistent=False)
        self.output = Value((out_h, out_w, channels))

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 3, 1, 2)
        if self.average:
            if self.pad is None:
                x = F.avg_pool2d(x, self.window, self.stride)
            else:
                x = F.avg_pool2d(F.pad(x, self.pad), self.window, self.stride) * self.correction
        else:
            if self.pad is not None:
                x = F.pad(x, self.pad, value=-math.inf)
            x = F.max_pool2d(x, self.window, self.stride)
        return x.permute(0, 2, 3, 1)


class Flatten(Layer):
    """Reshape each sample to a vector (a scalar becomes a vector of one)."""

    needs_float = False

    def __init__(self, *, incoming: Value, path: str) -> None:
        super().__init__(incoming=incoming, path=path)
        self.output = Value((incoming.size,), incoming.dtype)

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1)


class Divide(Layer):
    """``x / scale`` as float32 (``{"type": "divide", "scale": 255}``): the 2018 ``divide`` preprocessor moved into
    the network. Image states of type uint8 then stay bytes in memory, in batches and on their way to the device,
    and become floats here, once, on the device: a cast to float32 and a multiplication by ``1 / scale`` (so the
    builder inserts no cast of its own before this layer)."""

    needs_float = False

    def __init__(self, *, incoming: Value, path: str, scale: float) -> None:
        super().__init__(incoming=incoming, path=path)
        self.scale = expect_float(scale, f"{path}.scale")
        if self.scale == 0.0 or abs(1.0 / self.scale) > FLOAT32_MAX:
            raise SpecError(f"{path}.scale", "too close to zero to divide by", got=scale, expected="e.g. 255")
        self.factor = 1.0 / self.scale
        self.output = Value(incoming.shape)

    def extra_repr(self) -> str:
        return f"scale={self.scale:g}, output={list(self.output.shape)}"

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype == torch.float32:
            return x * self.factor
        # bytes: cast first, then scale in place (3x faster than the mixed-type product; the same floats)
        return x.to(torch.float32).mul_(self.factor)


class Embedding(Layer):
    """A lookup table for int (or bool, or uint8) inputs: each value becomes a vector of ``size``, so shape S becomes
    (*S, size). ``indices`` (the number of values) defaults to the state's ``num_values`` (2 for bool, 256 for
    uint8)."""

    needs_float = False

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        size: int,
        indices: int | None = None,
        l2_regularization: float = 0.0,
        l1_regularization: float = 0.0,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        if incoming.dtype == "float":
            raise SpecError(
                path,
                "layer 'embedding' looks up int or bool values; its input here is float",
                hint='Embed an int state, e.g. {"type": "int", "shape": [], "num_values": 10}.',
            )
        size = expect_int(size, f"{path}.size", minimum=1)
        known = {"bool": 2, "uint8": 256}.get(incoming.dtype, getattr(incoming.state, "num_values", None))
        if indices is not None:
            indices = expect_int(indices, f"{path}.indices", minimum=1)
        elif known is not None:
            indices = known
        else:
            raise SpecError(
                path,
                "layer 'embedding' needs 'indices' (how many distinct values its input takes)",
                hint="Give 'indices', or 'num_values' in the int state's spec.",
            )
        if known is not None and indices < known:
            raise SpecError(f"{path}.indices", f"fewer than the {known} values its input takes", got=indices)
        self.weight = nn.Parameter(allocate((indices, size), path, "embedding table"))
        nn.init.normal_(self.weight, 0.0, min(0.1, math.sqrt(1.0 / size)))
        self.set_regularization(l1_regularization, l2_regularization, path)
        self.long_input = incoming.dtype in ("bool", "uint8")  # F.embedding looks up int64 indices only
        self.output = Value((*incoming.shape, size))

    def forward(self, x: Tensor) -> Tensor:
        return F.embedding(x.long() if self.long_input else x, self.weight)


class Dropout(Layer):
    """Zero each value with probability ``rate`` (and scale the rest by 1 / (1 - rate)) in training mode only."""

    uses_training_mode = True

    def __init__(self, *, incoming: Value, path: str, rate: float = 0.0) -> None:
        super().__init__(incoming=incoming, path=path)
        self.rate = expect_float(rate, f"{path}.rate", minimum=0.0, maximum=0.999)
        self.output = Value(incoming.shape)

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.rate, self.training)


class Dueling(Layer):
    """Dueling head (Wang et al. 2016): ``E(x) + A(x) - mean(A(x))`` with E a linear map to 1 value and A to
    ``size`` values. ``output``: three names under which E, A - mean(A) and mean(A) are registered for later
    ``input`` layers."""

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        size: int,
        bias: Any = False,
        activation: Any = "none",
        l2_regularization: float = 0.0,
        l1_regularization: float = 0.0,
        output: Any = None,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        expect_rank(incoming, 1, path, "dueling", "[features]")
        size = expect_int(size, f"{path}.size", minimum=1)
        self.expectation = Linear(incoming=incoming, path=path, size=1, bias=bias)
        self.advantage = Linear(incoming=incoming, path=path, size=size, bias=bias)
        self.set_regularization(l1_regularization, l2_regularization, path)
        activation = build_activation(activation, f"{path}.activation", Value((size,)))
        attach_activation(self, activation)
        self.output = activation.output if activation is not None else Value((size,))
        self.names = None
        if output is not None:
            if (
                not isinstance(output, (list, tuple))
                or len(output) != 3
                or not all(isinstance(name, str) and name for name in output)
                or len(set(output)) != 3
            ):
                raise SpecError(
                    f"{path}.output",
                    "not three names",
                    got=output,
                    expected="[expectation, advantage, mean_advantage] names",
                )
            self.names = tuple(output)
            self.kind = "emit"
            self.outputs = dict(zip(self.names, (Value((1,)), Value((size,)), Value((1,))), strict=True))

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        expectation = F.linear(x, *self.expectation.weight_and_bias())
        advantage = F.linear(x, *self.advantage.weight_and_bias())
        mean_advantage = advantage.mean(dim=1, keepdim=True)
        y = expectation + advantage - mean_advantage
        if self.act is not None:
            y = self.act(y)
        if self.names is None:
            return y
        parts = (expectation, advantage - mean_advantage, mean_advantage)
        return y, dict(zip(self.names, parts, strict=True))


def check_options(spec: Any, path: str, accepted: tuple[str, ...]) -> dict:
    """A dict of options whose keys are all in ``accepted``."""
    spec = expect_dict({} if spec is None else spec, path)
    for key in spec:
        if key not in accepted:
            guess = did_you_mean(key, accepted)
            hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + (", ".join(accepted) or "nothing") + "."
            raise SpecError(f"{path}.{key}", "unknown key", hint=hint)
    return spec
