"""Which modules compute differently in training and eval mode.

Agents act in eval mode and update in training mode. Switching walks every submodule, which costs a few hundred
microseconds on a small network: as much as a DQN update's backward pass on a CPU. So an agent switches only when
some part of its modules depends on the mode (dropout, batch normalization, ...); for a plain MLP it never does.
"""

from __future__ import annotations

from torch import nn

# torch.nn modules whose forward never reads ``self.training``
_MODE_FREE = (
    nn.Linear,
    nn.Bilinear,
    nn.Identity,
    nn.Flatten,
    nn.Unflatten,
    nn.Embedding,
    nn.LayerNorm,
    nn.RNNCellBase,
    nn.ModuleDict,
    nn.ModuleList,
    nn.Sequential,
    nn.ParameterDict,
    nn.ParameterList,
    nn.modules.conv._ConvNd,
    nn.modules.pooling._MaxPoolNd,
    nn.modules.pooling._AvgPoolNd,
    nn.modules.pooling._AdaptiveAvgPoolNd,
    nn.modules.pooling._AdaptiveMaxPoolNd,
)


def uses_training_mode(module: nn.Module) -> bool:
    """Whether ``module`` itself (not its children) may compute differently in training and eval mode.

    torchforce's own modules say so with a ``uses_training_mode`` attribute when they do (dropout, batch
    normalization, recurrent layers with dropout) and are mode-free otherwise; torch's activations, linear, conv,
    pooling, normalization-free containers and dropout-free RNNs are mode-free; anything else (a user's module)
    is assumed to depend on the mode.
    """
    declared = getattr(module, "uses_training_mode", None)
    if declared is not None:
        return bool(declared)
    origin = type(module).__module__
    if origin.startswith("torchforce."):
        return False
    if isinstance(module, nn.RNNBase):
        return module.dropout > 0
    if origin == "torch.nn.modules.activation":
        return isinstance(module, nn.MultiheadAttention)  # it has attention dropout
    return not isinstance(module, _MODE_FREE)


def follows_training_mode(*modules: nn.Module) -> bool:
    """Whether any part of ``modules`` computes differently in training and eval mode."""
    return any(uses_training_mode(part) for module in modules for part in module.modules())
