"""The policy-gradient objectives (likelihood ratio, clipped surrogate, value loss, approximate KL, clip fraction,
the reported statistics) against arrays computed by hand."""

import math

import pytest
import torch

from torchforce.core.objectives import (
    approx_kl,
    clip_fraction,
    clipped_surrogate,
    likelihood_ratio,
    policy_statistics,
    value_loss,
)

# rows with every case of the clipped surrogate at epsilon = 0.2: a ratio above 1 + eps and one below 1 - eps,
# each with a positive and a negative advantage, and one ratio inside the range
RATIOS = torch.tensor([1.5, 0.5, 1.5, 0.5, 1.1])
ADVANTAGES = torch.tensor([1.0, 1.0, -1.0, -1.0, 2.0])


def test_likelihood_ratio_is_the_exponentiated_log_difference():
    log_prob = torch.log(torch.tensor([0.3, 0.5, 0.9]))
    old_log_prob = torch.log(torch.tensor([0.6, 0.5, 0.3]))
    torch.testing.assert_close(likelihood_ratio(log_prob, old_log_prob), torch.tensor([0.5, 1.0, 3.0]))


def test_clipped_surrogate_by_hand():
    # r*A = [1.5, .5, -1.5, -.5, 2.2]; clip(r, .8, 1.2)*A = [1.2, .8, -1.2, -.8, 2.2]; the minimum of each pair:
    # a high ratio gains nothing with A > 0 (1.2), but loses in full with A < 0 (-1.5); a low ratio the reverse
    torch.testing.assert_close(clipped_surrogate(RATIOS, ADVANTAGES, 0.2), torch.tensor([1.2, 0.5, -1.5, -0.8, 2.2]))
    # a range wide enough clips nothing: the plain surrogate r*A
    torch.testing.assert_close(clipped_surrogate(RATIOS, ADVANTAGES, 1.0), RATIOS * ADVANTAGES)


def test_clipped_surrogate_gradient_vanishes_only_where_the_clip_binds():
    ratio = RATIOS.clone().requires_grad_()
    clipped_surrogate(ratio, ADVANTAGES, 0.2).sum().backward()
    # d/dr of the chosen term: 0 where the clipped term was the minimum (rows 0 and 3), A elsewhere
    torch.testing.assert_close(ratio.grad, torch.tensor([0.0, 1.0, -1.0, 0.0, 2.0]))


def test_value_loss_is_half_the_mean_squared_error():
    # errors [1, -2, 0, 3]: 0.5 * (1 + 4 + 0 + 9) / 4 = 1.75
    values, returns = torch.tensor([2.0, 0.0, 5.0, 4.0]), torch.tensor([1.0, 2.0, 5.0, 1.0])
    assert value_loss(values, returns).item() == 1.75


def test_approx_kl_by_hand():
    # log r = [0, log 2, -log 2]: (r - 1) - log r = [0, 1 - log 2, -0.5 + log 2]; mean = 0.5 / 3
    log_ratio = torch.tensor([0.0, math.log(2.0), -math.log(2.0)])
    assert approx_kl(log_ratio).item() == pytest.approx(0.5 / 3, rel=1e-6)
    assert approx_kl(torch.zeros(4)).item() == 0.0


def test_clip_fraction_counts_ratios_outside_the_range():
    # |r - 1| = [.5, .5, .5, .5, .1]: four of five beyond 0.2, none beyond 0.6
    assert clip_fraction(RATIOS, 0.2).item() == pytest.approx(0.8)
    assert clip_fraction(RATIOS, 0.6).item() == 0.0


def test_policy_statistics_report_entropy_kl_and_with_epsilon_the_clip_fraction():
    log_prob = torch.log(torch.tensor([0.2, 0.4, 0.4]))
    old_log_prob = torch.log(torch.tensor([0.2, 0.2, 0.8]))  # ratios 1, 2, 1/2: the log ratios of test_approx_kl
    entropy = torch.tensor([0.5, 1.0, 1.5])
    assert policy_statistics(log_prob, old_log_prob, entropy) == pytest.approx(
        {"entropy": 1.0, "approx_kl": 0.5 / 3}, rel=1e-6
    )
    info = policy_statistics(log_prob, old_log_prob, entropy, epsilon=0.2)
    assert info["clip_fraction"] == pytest.approx(2 / 3)
