"""Returns and advantages: pure numpy functions shared by the agents (docs/tensorforce-0.4.md, Returns and
advantages), and ``advantage_tensors``,
the policy-gradient agents' entry point on tensors.

Arrays are time-major: ``[T]`` for one sequence of steps, or ``[T, N]`` for N parallel rows. ``terminals`` are
the codes of docs/internals.md: 0 = the episode goes on into row t+1, 1 = a true terminal (nothing follows, no
bootstrap), 2 = the segment ends without a terminal (time limit, a cut in the data): bootstrap from the next
state, whose value the caller gives as ``next_values[t]``. The last row always ends the recursion; if its
terminal is 0 it is bootstrapped like a 2. Results are float32; sums are accumulated in float64.
"""

from __future__ import annotations

import numpy as np
import torch


def _as_arrays(terminals: np.ndarray, **arrays: np.ndarray | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``terminals`` as int8 and the other arrays as float64, checked for matching shapes and valid codes."""
    codes = np.asarray(terminals)
    if codes.size and not np.isin(codes, (0, 1, 2)).all():
        raise ValueError(f"terminals must be 0, 1 or 2, got values {sorted(set(np.unique(codes).tolist()))}")
    codes = codes.astype(np.int8, copy=False)
    checked = {}
    for name, array in arrays.items():
        if array is None:
            checked[name] = np.zeros(codes.shape)
            continue
        checked[name] = np.asarray(array, dtype=np.float64)
        if checked[name].shape != codes.shape:
            raise ValueError(f"{name} has shape {checked[name].shape}, terminals {codes.shape}")
    return codes, checked


def _reverse_scan(x: np.ndarray, carry: np.ndarray, scale: float) -> np.ndarray:
    """``y_t = x_t + scale · carry_t · y_{t+1}`` backwards from ``y_T = 0``; returned as float32."""
    if x.ndim == 1:  # one sequence: plain floats are much faster than numpy scalars
        xs, carries = x.tolist(), carry.tolist()
        result, accumulated = [0.0] * len(xs), 0.0
        for t in range(len(xs) - 1, -1, -1):
            accumulated = xs[t] + scale * carries[t] * accumulated
            result[t] = accumulated
        return np.asarray(result, dtype=np.float32).reshape(x.shape)
    rows = np.empty(x.shape, dtype=np.float64)
    carried = np.zeros(x.shape[1:])
    for t in range(len(x) - 1, -1, -1):
        carried = x[t] + scale * carry[t] * carried
        rows[t] = carried
    return rows.astype(np.float32)


def _continues(codes: np.ndarray) -> np.ndarray:
    """1 where row t flows into row t+1 (terminal 0, not the last row), else 0."""
    carry = (codes == 0).astype(np.float64)
    if len(carry):
        carry[-1] = 0.0
    return carry


def discounted_returns(
    rewards: np.ndarray, terminals: np.ndarray, discount: float, next_values: np.ndarray | None = None
) -> np.ndarray:
    """Discounted returns that restart at episode ends and bootstrap at cuts.

    ``G_t = r_t + γ · G_{t+1}``                if terminal_t = 0 and t < T-1,
    ``G_t = r_t``                              if terminal_t = 1,
    ``G_t = r_t + γ · next_values_t``          if terminal_t = 2, or terminal_t = 0 and t = T-1.

    Without ``next_values`` the bootstrap values are 0 (2018's ``final_reward=0``).
    """
    codes, arrays = _as_arrays(terminals, rewards=rewards, next_values=next_values)
    if not codes.size:
        return np.zeros(codes.shape, dtype=np.float32)
    bootstrap = np.where(codes == 2, arrays["next_values"], 0.0)
    bootstrap[-1] = np.where(codes[-1] == 0, arrays["next_values"][-1], bootstrap[-1])
    return _reverse_scan(arrays["rewards"] + discount * bootstrap, _continues(codes), discount)


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray | None,
    terminals: np.ndarray,
    discount: float,
    lambda_: float,
) -> np.ndarray:
    """Generalized advantage estimates (Schulman et al. 2016, eq. 16).

    ``δ_t = r_t + γ · next_values_t · [terminal_t ≠ 1] − values_t``
    ``A_t = δ_t + γλ · [terminal_t = 0] · A_{t+1}``, with the last row ending the recursion (``A_T = 0``).

    ``next_values_t`` is V(s_{t+1}) (for terminal 2, the value of the state the segment was cut at; None: zeros). The
    λ-returns (critic targets) are ``A + values``. ``lambda_ = 1`` gives ``discounted_returns(...) − values``.
    """
    codes, arrays = _as_arrays(terminals, rewards=rewards, values=values, next_values=next_values)
    if not codes.size:
        return np.zeros(codes.shape, dtype=np.float32)
    deltas = arrays["rewards"] + discount * arrays["next_values"] * (codes != 1) - arrays["values"]
    return _reverse_scan(deltas, _continues(codes), discount * lambda_)


def n_step_returns(
    rewards: np.ndarray, terminals: np.ndarray, discount: float, n: int, next_values: np.ndarray | None = None
) -> np.ndarray:
    """n-step returns: ``G_t = Σ_{k<m} γ^k r_{t+k} + γ^m · next_values_{t+m-1} · [terminal_{t+m-1} ≠ 1]``.

    The window from t covers ``m`` rows: n, or fewer where it reaches a terminal (1 or 2) or the last row first.
    ``next_values_j`` is V(s_{j+1}); without ``next_values`` the bootstrap values are 0. ``n >= T`` gives
    ``discounted_returns``.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    codes, arrays = _as_arrays(terminals, rewards=rewards, next_values=next_values)
    length = len(codes)
    returns = np.zeros(codes.shape)
    open_ = np.ones(codes.shape, dtype=bool)  # the window from t is still collecting rewards
    scale = 1.0
    for k in range(min(n, length)):
        # row j = t + k for every t whose window reaches that far
        rows = slice(k, length)
        starts = slice(0, length - k)
        returns[starts] += np.where(open_[starts], scale * arrays["rewards"][rows], 0.0)
        ends = open_[starts] & ((codes[rows] != 0) | (k == n - 1))
        ends[-1] |= open_[starts][-1]  # the last row ends every window that reaches it
        bootstrap = arrays["next_values"][rows] * (codes[rows] != 1)
        returns[starts] += np.where(ends, scale * discount * bootstrap, 0.0)
        open_[starts] &= ~ends
        scale *= discount
    return returns.astype(np.float32)


def advantages(
    rewards: np.ndarray,
    terminals: np.ndarray,
    values: np.ndarray | None = None,
    next_values: np.ndarray | None = None,
    *,
    discount: float,
    gae_lambda: float | None = None,
    normalize: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The advantage estimates of the policy-gradient agents and the targets their baseline regresses on
    (docs/tensorforce-0.4.md, Returns and advantages), as ``(advantages, returns)``:

    - without a baseline (``values`` None): the discounted returns (bootstrapped with 0), for both;
    - with a baseline and no ``gae_lambda``: returns bootstrapped with ``next_values``, advantages ``returns − values``;
    - with ``gae_lambda``: ``gae(...)``, and the λ-returns ``advantages + values``.

    ``normalize`` scales the advantages to mean 0 and standard deviation 1 over the batch; returns stay as they are.
    """
    if values is None:
        returns = discounted_returns(rewards, terminals, discount)
        estimates = returns
    elif gae_lambda is None:
        returns = discounted_returns(rewards, terminals, discount, next_values)
        estimates = returns - np.asarray(values, dtype=np.float32)
    else:
        estimates = gae(rewards, values, next_values, terminals, discount, gae_lambda)
        returns = estimates + np.asarray(values, dtype=np.float32)
    if normalize and len(estimates) > 1:
        estimates = (estimates - estimates.mean()) / (estimates.std(ddof=1) + 1e-8)
    return estimates.astype(np.float32), returns.astype(np.float32)


def cut_windows(terminals: np.ndarray, length: int) -> np.ndarray:
    """Terminal codes of consecutive windows of ``length`` rows (sequences sampled from a memory), each window's
    last row made a cut (2) unless it ends an episode there: windows need not follow one another."""
    codes = np.array(terminals, dtype=np.int8)
    ends = codes[length - 1 :: length]
    ends[ends == 0] = 2
    return codes


def advantage_tensors(
    rewards: torch.Tensor,
    terminals: torch.Tensor,
    values: torch.Tensor | None = None,
    next_values: torch.Tensor | None = None,
    *,
    discount: float,
    gae_lambda: float | None = None,
    normalize: bool = False,
    window: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``advantages`` on a batch of tensors (any device; the results go to the rewards' device). With a ``window``
    the rows are consecutive windows of that many rows (sequences sampled from a memory): ``cut_windows`` ends
    each one, so that no return runs from one window into the next."""
    codes = terminals.cpu().numpy()
    if window is not None:
        codes = cut_windows(codes, window)
    estimates, returns = advantages(
        rewards.cpu().numpy(),
        codes,
        None if values is None else values.cpu().numpy(),
        None if next_values is None else next_values.cpu().numpy(),
        discount=discount,
        gae_lambda=gae_lambda,
        normalize=normalize,
    )
    return torch.as_tensor(estimates, device=rewards.device), torch.as_tensor(returns, device=rewards.device)
