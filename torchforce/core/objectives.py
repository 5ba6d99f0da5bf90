"""The policy-gradient objectives as pure tensor functions, shared by VPG, PPO and TRPO (tested against hand-computed
arrays in tests/core/test_objectives.py).

Names follow the papers: ``ratio`` is r_t(theta) = pi(a_t|s_t) / pi_old(a_t|s_t), ``advantages`` are A_t, ``epsilon``
is PPO's clipping range. Per-row functions return one value per row; reduce them yourself.
"""

from __future__ import annotations

import torch
from torch import Tensor


def likelihood_ratio(log_prob: Tensor, old_log_prob: Tensor) -> Tensor:
    """``r_t = pi(a_t|s_t) / pi_old(a_t|s_t) = exp(log pi − log pi_old)`` per row: the importance
    weight of TRPO's and PPO's surrogates (Schulman et al. 2015, 2017)."""
    return torch.exp(log_prob - old_log_prob)


def clipped_surrogate(ratio: Tensor, advantages: Tensor, epsilon: float) -> Tensor:
    """PPO's clipped surrogate per row (Schulman et al. 2017, eq. 7), before the mean:
    ``min(r_t · A_t, clip(r_t, 1 − ε, 1 + ε) · A_t)``.

    The minimum makes it a pessimistic bound: a ratio outside [1 − ε, 1 + ε] gains nothing where that would raise
    the objective, but still loses where it lowers it.
    """
    return torch.min(ratio * advantages, torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantages)


def standardized(advantages: Tensor) -> Tensor:
    """``(A − mean A) / (std A + 1e-8)`` (std with Bessel's correction, as the batch normalization of
    ``core.returns.advantages``); one row is left as it is."""
    if advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def value_loss(values: Tensor, returns: Tensor) -> Tensor:
    """The baseline's regression loss ``0.5 · mean((V(s_t) − R_t)²)`` (PPO's L^VF, eq. 9, halved as 2018's
    ``l2_loss``)."""
    return 0.5 * (values - returns).pow(2).mean()


def approx_kl(log_ratio: Tensor) -> Tensor:
    """An estimate of KL(pi_old || pi) from the rows' ``log r_t``: ``mean((r_t − 1) − log r_t)``, unbiased and never
    negative (Schulman's "k3" estimator, as in Stable-Baselines3 and CleanRL)."""
    return ((log_ratio.exp() - 1) - log_ratio).mean()


def clip_fraction(ratio: Tensor, epsilon: float) -> Tensor:
    """The share of rows whose ratio lies outside [1 − ε, 1 + ε], where the clipped surrogate's gradient is 0 for
    one sign of the advantage."""
    return ((ratio - 1).abs() > epsilon).float().mean()


def policy_statistics(
    log_prob: Tensor, old_log_prob: Tensor, entropy: Tensor, epsilon: float | None = None
) -> dict[str, float]:
    """What a policy-gradient update reports about the policy on its batch: the mean ``entropy``, ``approx_kl``
    from the policy that collected it, and with an ``epsilon`` the ``clip_fraction``."""
    log_ratio = log_prob - old_log_prob
    info = {"entropy": float(entropy.mean()), "approx_kl": float(approx_kl(log_ratio))}
    if epsilon is not None:
        info["clip_fraction"] = float(clip_fraction(log_ratio.exp(), epsilon))
    return info
