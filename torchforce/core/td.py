"""Temporal-difference targets and the regression of Q-values onto them: pure tensor functions shared by the
Q-learning agents (DQN, DQN n-step, DQfD) and, for ``td_targets``, by DDPG and NAF.

Shapes: a batch of B rows. An action of shape ``shape`` with A values per element (two, False and True, for a bool
action) has Q-values ``[B, *shape, A]`` and one target per element ``[B, *shape]``; ``reward`` and ``terminal`` are
``[B]``, with the terminal codes of docs/internals.md: 1 is a true end (nothing to bootstrap from), 0 and 2 (a time
limit, a cut) bootstrap from the next state. Agents with several actions pass dicts keyed by action name.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from torchforce.core.losses import huber, l2


def greedy_values(target_q: Tensor, online_q: Tensor | None = None) -> Tensor:
    """``Q_target(s', a*)`` with ``a* = argmax_a Q(s', a)``: the next states' values, ``[B, *shape, A] -> [B, *shape]``.

    ``a*`` is picked by ``online_q`` (double Q-learning, van Hasselt et al. 2016) or, without it, by ``target_q``
    itself (Mnih et al. 2015). Ties go to the first action.
    """
    best = (target_q if online_q is None else online_q).argmax(dim=-1, keepdim=True)
    return target_q.gather(-1, best).squeeze(-1)


def td_targets(reward: Tensor, terminal: Tensor, next_values: Tensor, discount: float) -> Tensor:
    """One-step TD targets ``y = r + γ · [terminal ≠ 1] · next_values``.

    ``reward`` and ``terminal`` ``[B]`` broadcast over the elements of ``next_values`` ``[B, *shape]``, the value of
    each row's next state (``greedy_values`` for DQN, V'(s') for NAF, Q'(s', mu'(s')) for DDPG). Returns
    ``[B, *shape]`` in the dtype of ``next_values``.
    """
    extra = (1,) * (next_values.dim() - 1)
    not_done = (terminal != 1).to(next_values.dtype).view(-1, *extra)
    return reward.to(next_values.dtype).view(-1, *extra) + discount * not_done * next_values


def taken(q_values: Tensor, actions: Tensor) -> Tensor:
    """``Q(s, a)``: the Q-values ``[B, *shape, A]`` of the ``actions`` taken ``[B, *shape]`` (a bool action's False and
    True are 0 and 1), ``[B, *shape]``."""
    return q_values.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def per_instance(values: Tensor) -> Tensor:
    """The mean over each row's elements: ``[B, *shape] -> [B]``."""
    return values.reshape(len(values), -1).mean(dim=1)


def q_regression(
    q_values: Mapping[str, Tensor],
    actions: Mapping[str, Tensor],
    targets: Mapping[str, Tensor],
    huber_threshold: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Q(s, a) regressed onto ``targets`` y, action by action: the TD errors ``δ = y − Q(s, a)``, their loss (half the
    square, ``l2``, or the Huber loss with ``huber_threshold``, whose gradient is δ clipped to ``[−h, h]``) and
    ``|δ|``, each averaged over an action's elements and then over the actions.

    Returns the loss per instance ``[B]`` and the |TD error| per instance ``[B]`` (no gradient; prioritized replay's
    priorities).
    """
    losses, errors = [], []
    for name, q in q_values.items():
        delta = targets[name] - taken(q, actions[name])
        loss = huber(delta, huber_threshold) if huber_threshold is not None else l2(delta)
        losses.append(per_instance(loss))
        errors.append(per_instance(delta.detach().abs()))
    return torch.stack(losses).mean(dim=0), torch.stack(errors).mean(dim=0)
