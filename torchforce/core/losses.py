"""Elementwise losses shared by the agents (reduce them yourself: mean, sum or importance-weighted)."""

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


def large_margin(q_values: Tensor, expert_actions: Tensor, margin: float) -> Tensor:
    """DQfD's large-margin classification loss (Hester et al. 2018, eq. 2) per element:
    ``J_E = max_a [Q(s, a) + l(a_E, a)] − Q(s, a_E)``, ``l(a_E, a) = margin`` where ``a ≠ a_E``, else 0.

    ``q_values`` ``[B, *shape, A]``, the expert's actions ``[B, *shape]`` (a bool action's False and True are 0 and
    1); returns ``[B, *shape]``, 0 where the expert's action beats every other by at least ``margin``.
    """
    expert = expert_actions.long().unsqueeze(-1)
    margins = torch.full_like(q_values, margin).scatter(-1, expert, 0.0)
    return (q_values + margins).max(dim=-1).values - q_values.gather(-1, expert).squeeze(-1)
