"""TD targets, greedy and double-Q next values, the Q regression and DQfD's large-margin loss against numbers
computed by hand (terminal codes 0/1/2: 1 ends without a bootstrap, 0 and 2 bootstrap)."""

import pytest
import torch

from torchforce.core.losses import large_margin
from torchforce.core.td import greedy_values, per_instance, q_regression, taken, td_targets

# next-state Q-values of four rows, two actions each, and an online network that prefers the other action
TARGET_Q = torch.tensor([[1.0, 3.0], [2.0, -1.0], [4.0, 0.0], [0.0, 5.0]])
ONLINE_Q = torch.tensor([[9.0, 0.0], [0.0, 9.0], [0.0, 9.0], [9.0, 0.0]])
REWARD = torch.tensor([1.0, 2.0, 3.0, 4.0])
TERMINAL = torch.tensor([0, 0, 1, 2], dtype=torch.int8)


def test_greedy_values_plain_and_double():
    # plain (Mnih et al. 2015): max_a Q'(s', a) = [3, 2, 4, 5]
    assert greedy_values(TARGET_Q).tolist() == [3.0, 2.0, 4.0, 5.0]
    # double (van Hasselt et al. 2016): the online argmax [0, 1, 1, 0], valued by Q': [1, -1, 0, 0]
    assert greedy_values(TARGET_Q, ONLINE_Q).tolist() == [1.0, -1.0, 0.0, 0.0]


def test_greedy_values_over_action_elements_and_ties():
    target_q = torch.tensor([[[1.0, 2.0], [3.0, 0.0]], [[5.0, 6.0], [7.0, 7.0]]])  # [B=2, shape=(2,), actions=2]
    assert greedy_values(target_q).tolist() == [[2.0, 3.0], [6.0, 7.0]]
    online_q = torch.tensor([[[0.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 0.0]]])  # ties pick the first action
    assert greedy_values(target_q, online_q).tolist() == [[1.0, 0.0], [5.0, 7.0]]


@pytest.mark.parametrize("discount", [0.0, 0.5, 1.0])
def test_td_targets_terminal_codes_and_discount(discount):
    # y = r + gamma [terminal != 1] next_value: row 2 is a true end (y = r), row 3 a time limit (bootstraps)
    plain = td_targets(REWARD, TERMINAL, greedy_values(TARGET_Q), discount)
    double = td_targets(REWARD, TERMINAL, greedy_values(TARGET_Q, ONLINE_Q), discount)
    assert plain.tolist() == pytest.approx([1 + discount * 3, 2 + discount * 2, 3.0, 4 + discount * 5])
    assert double.tolist() == pytest.approx([1 + discount * 1, 2 - discount * 1, 3.0, 4 + discount * 0])


def test_td_targets_broadcast_over_action_elements():
    next_values = torch.tensor([[2.0, 3.0], [6.0, 7.0]])
    y = td_targets(torch.tensor([1.0, 1.0]), torch.tensor([0, 1], dtype=torch.int8), next_values, 0.5)
    assert y.tolist() == [[2.0, 2.5], [1.0, 1.0]]
    assert y.dtype == torch.float32


def test_taken_and_per_instance():
    q = torch.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
    assert taken(q, torch.tensor([[0, 1], [1, 1]])).tolist() == [[1.0, 4.0], [6.0, 8.0]]
    assert taken(q, torch.tensor([[False, True], [True, False]])).tolist() == [[1.0, 4.0], [6.0, 7.0]]
    assert per_instance(torch.tensor([[1.0, 4.0], [6.0, 8.0]])).tolist() == [2.5, 7.0]


def test_q_regression_by_hand():
    # action "a": one element; action "b": two elements. Two rows.
    q = {
        "a": torch.tensor([[1.0, 2.0], [0.0, -1.0]]),
        "b": torch.tensor([[[0.0, 1.0], [2.0, 0.0]], [[3.0, 3.0], [1.0, 1.0]]]),
    }
    actions = {"a": torch.tensor([1, 0]), "b": torch.tensor([[1, 0], [0, 1]])}
    targets = {"a": torch.tensor([4.0, 0.5]), "b": torch.tensor([[1.0, 0.0], [1.0, 1.0]])}
    # delta a = [4 - 2, .5 - 0] = [2, .5]; delta b = [[1 - 1, 0 - 2], [1 - 3, 1 - 1]] = [[0, -2], [-2, 0]]
    # l2: a [2, .125]; b per row mean [(0 + 2) / 2, (2 + 0) / 2] = [1, 1]; mean over actions [1.5, .5625]
    loss, errors = q_regression(q, actions, targets)
    assert loss.tolist() == [1.5, 0.5625]
    # |delta|: a [2, .5]; b [1, 1]; mean [1.5, .75]
    assert errors.tolist() == [1.5, 0.75]
    # Huber, h = 1: a [1 * (2 - .5), .125] = [1.5, .125]; b [(0 + 1.5) / 2, (1.5 + 0) / 2] = [.75, .75]
    loss, errors = q_regression(q, actions, targets, huber_threshold=1.0)
    assert loss.tolist() == [1.125, 0.4375]
    assert errors.tolist() == [1.5, 0.75]


def test_q_regression_gradient_is_the_clipped_td_error():
    q = {"a": torch.tensor([[0.0, 0.0], [0.0, 0.0]], requires_grad=True)}
    actions, targets = {"a": torch.tensor([0, 1])}, {"a": torch.tensor([3.0, -0.5])}
    loss, errors = q_regression(q, actions, targets, huber_threshold=1.0)
    loss.sum().backward()
    assert q["a"].grad.tolist() == [[-1.0, 0.0], [0.0, 0.5]]  # -clip(delta, -1, 1) at the taken actions
    assert not errors.requires_grad


def test_large_margin_by_hand():
    q = torch.tensor([[1.0, 2.0], [1.0, 2.0], [5.0, 1.0]])
    # expert 0: max(1 + 0, 2 + .8) - 1 = 1.8; expert 1: max(1 + .8, 2 + 0) - 2 = 0; expert 0 far ahead: 0
    assert large_margin(q, torch.tensor([0, 1, 0]), 0.8).tolist() == pytest.approx([1.8, 0.0, 0.0])
    # margin 0: the gap to the best action; bool actions as 0/1
    assert large_margin(q, torch.tensor([False, True, True]), 0.0).tolist() == [1.0, 0.0, 4.0]
    # over action elements: [B=1, shape=(2,), actions=3]
    q = torch.tensor([[[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]]])
    # expert 1: max(.5, 1, 2.5) - 1 = 1.5; expert 1: max(3.5, 0, .5) - 0 = 3.5
    assert large_margin(q, torch.tensor([[1, 1]]), 0.5).tolist() == [[1.5, 3.5]]
