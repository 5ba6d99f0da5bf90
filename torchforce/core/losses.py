"""Elementwise regression losses shared by the agents (reduce them yourself: mean, sum or importance-weighted)."""

from __future__ import annotations

import torch
from torch import Tensor


def huber(delta: Tensor, threshold: float = 1.0) -> Tensor:
    """Huber loss per element: ``0.5·δ²`` where ``|δ| <= h``, else ``h·(|δ| − 0.5·h)`` (2018's ``huber_loss``).

    Its gradient is ``δ`` clipped to ``[−h, h]``; as ``h → ∞`` it becomes ``l2``.
    """
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    magnitude = delta.abs()
    return torch.where(magnitude <= threshold, 0.5 * delta.square(), threshold * (magnitude - 0.5 * threshold))


def l2(delta: Tensor) -> Tensor:
    """``0.5·δ²`` per element: TensorFlow's ``l2_loss`` before its sum (2018 baselines summed it; 2018 DQN
    without Huber used ``δ²``, i.e. ``2·l2``)."""
    return 0.5 * delta.square()
