"""Networks (docs/tensorforce-0.4.md, Networks): a 2018 layer list, a file of one, or a user nn.Module
becomes a `Network`.

``build_network(spec, states)`` -> `Network` with ``output_size``, ``internals``, ``initial_internals(batch_size)``,
``regularization_loss()`` and ``forward(states, internals) -> (embedding [B, output_size], next internals)``.
``LAYERS`` is the layer-type table.

Layout: image states are NHWC ([B, height, width, channels], as Gym/ALE and 2018 TensorForce give them) and stay
NHWC between layers; conv2d/pool2d permute to NCHW for the torch op (a copy-free channels_last view) and back, so
``flatten`` flattens in (H, W, C) order, deterministically on every device. More conventions (TF SAME padding,
initialization, weight layout) are in ``layers.py``.
"""

from torchforce.core.networks.base import Layer, Value
from torchforce.core.networks.network import (
    LAYERS,
    LayeredNetwork,
    ModuleNetwork,
    Network,
    build_network,
    cpu_bfloat16_native,
    set_autocast,
    shipped_networks,
)

__all__ = [
    "LAYERS",
    "Layer",
    "LayeredNetwork",
    "ModuleNetwork",
    "Network",
    "Value",
    "build_network",
    "cpu_bfloat16_native",
    "set_autocast",
    "shipped_networks",
]
