"""The 2018 ``tf_layer`` layer: a ``tf.layers`` layer named by ``layer`` with tf.layers keyword arguments, mapped
to the torch layer that does the same thing, so 2018 configs (``mlp2_normalized_network``) load unchanged.

Supported: batch_normalization (axis=-1, momentum=0.99, epsilon=1e-3, center, scale; batch statistics in training
mode, moving averages otherwise, TF's ``training=update``; a batch of one value per channel uses the moving
averages too, see ``BatchNormalization.forward``), dense (units, activation=None, use_bias), conv1d and
conv2d (filters, kernel_size, strides=1, padding='valid', activation=None, use_bias), flatten, dropout (rate=0.5),
max_pooling2d and average_pooling2d (pool_size, strides, padding='valid'). Defaults are tf.layers' own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchforce.core.networks.base import Layer, Value
from torchforce.core.networks.layers import Conv1d, Conv2d, Dense, Dropout, Flatten, Pool2d
from torchforce.spec import SpecError, expect_bool, expect_float, expect_int
from torchforce.spec.errors import describe, did_you_mean, unknown_name_error


class BatchNormalization(Layer):
    """Batch normalization over the last (channels) axis, with TF's defaults and momentum convention."""

    uses_training_mode = True  # batch statistics in training, the running ones in eval
    running_mean: Tensor  # buffers
    running_var: Tensor

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        axis: int = -1,
        momentum: float = 0.99,
        epsilon: float = 1e-3,
        center: bool = True,
        scale: bool = True,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        rank = incoming.rank
        if rank == 0:
            raise SpecError(
                path,
                "batch_normalization normalizes over the last (channels) axis; this input is a scalar per sample",
                hint='Give the input a channels axis first, e.g. states_preprocessing {"type": "expand_dims", '
                '"axis": -1}.',
            )
        if expect_int(axis, f"{path}.axis") not in (-1, rank):
            raise SpecError(f"{path}.axis", "only the last (channels) axis is supported", got=axis)
        features = incoming.shape[-1]
        # TF's moving average keeps `momentum` of the old value; torch's momentum is the weight of the new batch
        self.momentum = 1.0 - expect_float(momentum, f"{path}.momentum", minimum=0.0, maximum=1.0)
        self.epsilon = expect_float(epsilon, f"{path}.epsilon", minimum=0.0)
        if self.epsilon == 0.0:  # a batch of equal rows has variance 0: 0 / 0
            raise SpecError(f"{path}.epsilon", "out of range", got=epsilon, expected="a number > 0, e.g. 0.001")
        self.weight = nn.Parameter(torch.ones(features)) if expect_bool(scale, f"{path}.scale") else None
        self.bias = nn.Parameter(torch.zeros(features)) if expect_bool(center, f"{path}.center") else None
        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.ones(features))
        self.channels_last = rank > 1
        self.output = Value(incoming.shape)

    def forward(self, x: Tensor) -> Tensor:
        if self.channels_last:
            x = x.movedim(-1, 1)
        # One value per channel (a one-row minibatch of vectors, as PPO's subsampling draws from short batches) has
        # no spread: its batch variance is 0, so TF's batch statistics map every input to `bias` (no gradient reaches
        # the layers below) and pull the moving variance toward 0, and torch refuses such a batch in training. It is
        # normalized with the running statistics instead, as in eval mode, and leaves them unchanged: the output
        # still depends on the input, and one degenerate batch cannot spoil the statistics acting relies on.
        batch_statistics = self.training and x.numel() > x.shape[1]
        y = F.batch_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            batch_statistics,
            self.momentum,
            self.epsilon,
        )
        return y.movedim(1, -1) if self.channels_last else y


@dataclass(frozen=True)
class _Mapping:
    target: type[Layer]
    keys: dict[str, str]  # tf.layers keyword -> our keyword
    required: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)  # tf.layers defaults, by tf keyword
    fixed: dict[str, Any] = field(default_factory=dict)  # our keywords the tf layer name implies


_CONV = {
    "filters": "size",
    "kernel_size": "window",
    "strides": "stride",
    "padding": "padding",
    "activation": "activation",
    "use_bias": "bias",
}
_CONV_DEFAULTS = {"strides": 1, "padding": "valid", "activation": None}
_POOL = {"pool_size": "window", "strides": "stride", "padding": "padding"}

TF_LAYERS = {
    "batch_normalization": _Mapping(
        BatchNormalization, {k: k for k in ("axis", "momentum", "epsilon", "center", "scale")}
    ),
    "conv1d": _Mapping(Conv1d, _CONV, ("filters", "kernel_size"), _CONV_DEFAULTS),
    "conv2d": _Mapping(Conv2d, _CONV, ("filters", "kernel_size"), _CONV_DEFAULTS),
    "dense": _Mapping(
        Dense, {"units": "size", "activation": "activation", "use_bias": "bias"}, ("units",), {"activation": None}
    ),
    "dropout": _Mapping(Dropout, {"rate": "rate"}, (), {"rate": 0.5}),
    "flatten": _Mapping(Flatten, {}),
    "max_pooling2d": _Mapping(Pool2d, _POOL, ("pool_size", "strides"), {"padding": "valid"}, {"pooling_type": "max"}),
    "average_pooling2d": _Mapping(
        Pool2d, _POOL, ("pool_size", "strides"), {"padding": "valid"}, {"pooling_type": "average"}
    ),
}
UNSUPPORTED = (
    "average_pooling1d",
    "average_pooling3d",
    "conv2d_transpose",
    "conv3d",
    "conv3d_transpose",
    "max_pooling1d",
    "max_pooling3d",
    "separable_conv2d",
)


def _mapping(layer: Any, path: str) -> _Mapping:
    if not isinstance(layer, str):
        raise SpecError(
            f"{path}.layer",
            "not a tf_layer name",
            got=layer,
            expected='a tf.layers name like "dense"',
            hint="Known: " + ", ".join(sorted(TF_LAYERS)) + ".",
        )
    if layer in TF_LAYERS:
        return TF_LAYERS[layer]
    if layer in UNSUPPORTED:
        raise SpecError(
            f"{path}.layer",
            f"tf_layer '{layer}' is not available in torchforce",
            hint="Supported: " + ", ".join(sorted(TF_LAYERS)) + ". For others, write a layer class and name it "
            "by 'package.module:Class'.",
        )
    raise unknown_name_error(f"{path}.layer", "tf_layer", layer, TF_LAYERS)


def tf_layer(*, incoming: Value, path: str, layer: str, **kwargs: Any) -> Layer:
    """The torch layer for the 2018 ``{"type": "tf_layer", "layer": name, **tf_layers_kwargs}``."""
    mapping = _mapping(layer, path)
    for key in kwargs:
        if key not in mapping.keys:
            guess = did_you_mean(key, mapping.keys)
            accepted = ", ".join(mapping.keys) or "no arguments"
            raise SpecError(
                f"{path}.{key}",
                f"unknown argument for tf_layer '{layer}'",
                hint=f"Did you mean '{guess}'?" if guess else f"Accepted: {accepted}.",
            )
    for key in mapping.required:
        if key not in kwargs:
            raise SpecError(path, f"tf_layer '{layer}' needs '{key}'; got {describe({'layer': layer, **kwargs})}")
    ours = {mapping.keys[key]: value for key, value in {**mapping.defaults, **kwargs}.items()}
    try:
        return mapping.target(incoming=incoming, path=path, **ours, **mapping.fixed)
    except SpecError as error:  # name the tf.layers keyword the user wrote, not ours
        for tf_key, our_key in mapping.keys.items():
            if error.path == f"{path}.{our_key}" or error.path.startswith(f"{path}.{our_key}."):
                error.path = f"{path}.{tf_key}" + error.path[len(f"{path}.{our_key}") :]
                error.args = (error.render(),)
                break
        raise


tf_layer.needs_float = True  # type: ignore[attr-defined]
