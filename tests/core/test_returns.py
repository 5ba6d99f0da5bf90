"""Returns, GAE, n-step returns and losses against arrays computed by hand (terminal codes 0/1/2)."""

import numpy as np
import pytest
import torch

from torchforce.core.losses import huber, l2
from torchforce.core.returns import (
    advantage_tensors,
    advantages,
    cut_windows,
    discounted_returns,
    gae,
    n_step_returns,
)

# one batch with every case: an episode end (1) at t=1, a time-limit cut (2) at t=3, an open last row (0)
REWARDS = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=np.float32)
TERMINALS = np.array([0, 1, 0, 2, 0, 0], dtype=np.int8)
NEXT_VALUES = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], dtype=np.float32)


def test_discounted_returns_restart_at_terminals_and_bootstrap_at_cuts():
    # gamma = 0.5, backwards:
    # G5 = 6 + .5*60 (open last row) = 36; G4 = 5 + .5*36 = 23; G3 = 4 + .5*40 (cut) = 24
    # G2 = 3 + .5*24 = 15; G1 = 2 (terminal); G0 = 1 + .5*2 = 2
    returns = discounted_returns(REWARDS, TERMINALS, 0.5, NEXT_VALUES)
    np.testing.assert_array_equal(returns, [2.0, 2.0, 15.0, 24.0, 23.0, 36.0])
    assert returns.dtype == np.float32


def test_discounted_returns_without_next_values_bootstrap_zero():
    # G5 = 6; G4 = 5 + 3 = 8; G3 = 4; G2 = 3 + 2 = 5; G1 = 2; G0 = 1 + 1 = 2
    np.testing.assert_array_equal(discounted_returns(REWARDS, TERMINALS, 0.5), [2.0, 2.0, 5.0, 4.0, 8.0, 6.0])


def test_discounted_returns_terminal_last_row_ignores_next_value():
    returns = discounted_returns(np.array([1.0, 2.0]), np.array([0, 1]), 0.9, np.array([100.0, 100.0]))
    np.testing.assert_allclose(returns, [1.0 + 0.9 * 2.0, 2.0])


def test_discounted_returns_parallel_rows_match_each_column():
    rewards = np.stack([REWARDS, np.ones(6, dtype=np.float32)], axis=1)
    terminals = np.stack([TERMINALS, np.array([0, 0, 1, 0, 0, 2])], axis=1)
    next_values = np.stack([NEXT_VALUES, np.full(6, 4.0)], axis=1)
    returns = discounted_returns(rewards, terminals, 0.5, next_values)
    # column 1: G5 = 1 + .5*4 = 3; G4 = 1 + 1.5 = 2.5; G3 = 1 + 1.25 = 2.25; G2 = 1; G1 = 1.5; G0 = 1.75
    np.testing.assert_array_equal(returns[:, 0], [2.0, 2.0, 15.0, 24.0, 23.0, 36.0])
    np.testing.assert_array_equal(returns[:, 1], [1.75, 1.5, 1.0, 2.25, 2.5, 3.0])


def test_gae_by_hand():
    values = np.array([1.0, 1.0, 2.0, 2.0, 3.0, 3.0])
    next_values = np.array([1.0, 9.0, 2.0, 40.0, 3.0, 60.0])  # V(s_{t+1}); 9 is ignored (terminal 1)
    # gamma = .5, lambda = .5: deltas = [1+.5-1, 2-1, 3+1-2, 4+20-2, 5+1.5-3, 6+30-3] = [.5, 1, 2, 22, 3.5, 33]
    # A5 = 33; A4 = 3.5 + .25*33 = 11.75; A3 = 22 (cut); A2 = 2 + .25*22 = 7.5; A1 = 1; A0 = .5 + .25*1 = .75
    advantages = gae(REWARDS, values, next_values, TERMINALS, 0.5, 0.5)
    np.testing.assert_array_equal(advantages, [0.75, 1.0, 7.5, 22.0, 11.75, 33.0])
    assert advantages.dtype == np.float32


def test_gae_lambda_one_is_return_minus_value_and_lambda_zero_is_td_error():
    values = np.array([1.0, 1.0, 2.0, 2.0, 3.0, 3.0])
    next_values = np.array([1.0, 9.0, 2.0, 40.0, 3.0, 60.0])
    returns = discounted_returns(REWARDS, TERMINALS, 0.5, next_values)
    np.testing.assert_allclose(gae(REWARDS, values, next_values, TERMINALS, 0.5, 1.0), returns - values)
    np.testing.assert_allclose(gae(REWARDS, values, next_values, TERMINALS, 0.5, 0.0), [0.5, 1, 2, 22, 3.5, 33])


def test_n_step_returns_by_hand():
    # n = 1: r + .5 * next_value, except after the terminal 1
    np.testing.assert_array_equal(
        n_step_returns(REWARDS, TERMINALS, 0.5, 1, NEXT_VALUES), [6.0, 2.0, 18.0, 24.0, 30.0, 36.0]
    )
    # n = 2 on an open sequence: G_t = r_t + .5 r_{t+1} + .25 V(s_{t+2}); the last row bootstraps after 1 step
    rewards, terminals, next_values = np.ones(4), np.zeros(4, dtype=np.int8), np.array([2.0, 4.0, 6.0, 8.0])
    np.testing.assert_array_equal(n_step_returns(rewards, terminals, 0.5, 2, next_values), [2.5, 3.0, 3.5, 5.0])
    # windows stop at terminals: n >= T gives the full discounted return
    np.testing.assert_array_equal(
        n_step_returns(REWARDS, TERMINALS, 0.5, 10, NEXT_VALUES),
        discounted_returns(REWARDS, TERMINALS, 0.5, NEXT_VALUES),
    )


def test_returns_reject_bad_input():
    with pytest.raises(ValueError, match="terminals must be 0, 1 or 2"):
        discounted_returns(REWARDS, np.array([0, 3, 0, 0, 0, 0]), 0.9)
    with pytest.raises(ValueError, match="next_values has shape"):
        discounted_returns(REWARDS, TERMINALS, 0.9, np.zeros(5))
    with pytest.raises(ValueError, match="n must be at least 1"):
        n_step_returns(REWARDS, TERMINALS, 0.9, 0)
    assert discounted_returns(np.zeros(0), np.zeros(0, dtype=np.int8), 0.9).shape == (0,)


def test_huber_and_l2():
    delta = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])
    torch.testing.assert_close(huber(delta, 1.0), torch.tensor([2.5, 0.5, 0.125, 0.0, 0.125, 0.5, 2.5]))
    torch.testing.assert_close(huber(delta, 2.0), torch.tensor([4.0, 0.5, 0.125, 0.0, 0.125, 0.5, 4.0]))
    torch.testing.assert_close(l2(delta), torch.tensor([4.5, 0.5, 0.125, 0.0, 0.125, 0.5, 4.5]))
    torch.testing.assert_close(
        huber(delta, 1.0), torch.nn.functional.huber_loss(delta, torch.zeros(7), reduction="none")
    )
    with pytest.raises(ValueError, match="threshold must be positive"):
        huber(delta, 0.0)


VALUES = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=np.float32)


def test_advantages_without_a_baseline_are_the_zero_bootstrapped_returns():
    estimates, returns = advantages(REWARDS, TERMINALS, discount=0.5)
    np.testing.assert_array_equal(estimates, [2.0, 2.0, 5.0, 4.0, 8.0, 6.0])
    np.testing.assert_array_equal(returns, estimates)


def test_advantages_with_a_baseline_are_bootstrapped_returns_minus_values():
    # the returns of test_discounted_returns_restart_at_terminals_and_bootstrap_at_cuts, minus VALUES
    estimates, returns = advantages(REWARDS, TERMINALS, VALUES, NEXT_VALUES, discount=0.5)
    np.testing.assert_array_equal(returns, [2.0, 2.0, 15.0, 24.0, 23.0, 36.0])
    np.testing.assert_array_equal(estimates, [1.0, 0.0, 12.0, 20.0, 18.0, 30.0])


def test_gae_advantages_and_lambda_returns():
    # gamma .5, lambda .5: deltas r + .5 * next_value * [t != 1] - value = [5, 0, 15, 20, 25, 30]
    # A5 = 30; A4 = 25 + .25*30 = 32.5; A3 = 20 (cut); A2 = 15 + .25*20 = 20; A1 = 0; A0 = 5 + .25*0 = 5
    estimates, returns = advantages(REWARDS, TERMINALS, VALUES, NEXT_VALUES, discount=0.5, gae_lambda=0.5)
    np.testing.assert_array_equal(estimates, [5.0, 0.0, 20.0, 20.0, 32.5, 30.0])
    np.testing.assert_array_equal(returns, [6.0, 2.0, 23.0, 24.0, 37.5, 36.0])


def test_normalized_advantages_have_mean_zero_and_unit_std_and_returns_stay():
    estimates, returns = advantages(REWARDS, TERMINALS, VALUES, NEXT_VALUES, discount=0.5, normalize=True)
    raw = np.array([1.0, 0.0, 12.0, 20.0, 18.0, 30.0])
    np.testing.assert_allclose(estimates, (raw - raw.mean()) / raw.std(ddof=1), rtol=1e-6)
    np.testing.assert_array_equal(returns, [2.0, 2.0, 15.0, 24.0, 23.0, 36.0])


def test_cut_windows_marks_each_windows_open_end():
    np.testing.assert_array_equal(cut_windows([0, 0, 0, 1, 0, 0, 0, 0, 0], 3), [0, 0, 2, 1, 0, 2, 0, 0, 2])
    assert cut_windows(np.array([0, 1]), 2).tolist() == [0, 1]


def test_advantage_tensors_are_the_arrays_of_advantages_and_cut_windows():
    values, next_values = torch.from_numpy(VALUES), torch.from_numpy(NEXT_VALUES)
    rewards, terminals = torch.from_numpy(REWARDS), torch.from_numpy(TERMINALS)
    estimates, returns = advantage_tensors(rewards, terminals, values, next_values, discount=0.5, gae_lambda=0.5)
    assert estimates.dtype == returns.dtype == torch.float32
    assert estimates.tolist() == [5.0, 0.0, 20.0, 20.0, 32.5, 30.0]  # as test_gae_advantages_and_lambda_returns
    assert returns.tolist() == [6.0, 2.0, 23.0, 24.0, 37.5, 36.0]
    # windows of 3 rows: row 2 ends the first window, so it becomes a cut (2): G2 = 3 + .5*30 = 18, no longer
    # 3 + .5*G3 = 15; without a baseline the cut bootstraps with 0: G2 = 3
    estimates, returns = advantage_tensors(rewards, terminals, values, next_values, discount=0.5, window=3)
    assert returns.tolist() == [2.0, 2.0, 18.0, 24.0, 23.0, 36.0]
    estimates, returns = advantage_tensors(rewards, terminals, discount=0.5, window=3)
    assert estimates.tolist() == returns.tolist() == [2.0, 2.0, 3.0, 4.0, 8.0, 6.0]
