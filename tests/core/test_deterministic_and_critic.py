"""The deterministic policy head (mu(s) within the bounds, no density) and the state-action critic."""

import pytest
import torch

from torchforce.core.critics import Critic, critic_layers
from torchforce.core.distributions import build_distribution
from torchforce.spec import ActionSpec, SpecError, StateSpec

UNBOUNDED = ActionSpec("action", "float", (2,))
BOUNDED = ActionSpec("action", "float", (), min_value=-2.0, max_value=4.0)


def test_unbounded_mu_is_a_linear_head_and_sampling_ignores_deterministic():
    head = build_distribution(UNBOUNDED, 3, {"type": "deterministic", "mean": 0.5}, path="distributions.action")
    embedding = torch.randn(5, 3)
    (mu,) = head(embedding)
    expected = torch.nn.functional.linear(embedding, head.mean.weight, head.mean.bias).view(5, 2)
    assert torch.equal(mu, expected) and torch.allclose(head.mean.bias, torch.full((2,), 0.5))
    assert torch.equal(head.sample((mu,), deterministic=False), mu)


def test_bounded_mu_stays_in_the_bounds_starts_mid_range_and_passes_gradients():
    head = build_distribution(BOUNDED, 3, {"type": "deterministic"}, path="distributions.action")
    with torch.no_grad():
        head.mean.weight.zero_()
    (mu,) = head(torch.zeros(2, 3))
    assert torch.allclose(mu, torch.ones(2))  # the midpoint of [-2, 4]
    with torch.no_grad():
        head.mean.weight.fill_(100.0)
    (mu,) = head(torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]]))
    assert mu.tolist() == pytest.approx([4.0, -2.0])
    start = build_distribution(BOUNDED, 3, {"type": "deterministic", "mean": 3.0}, path="d")
    with torch.no_grad():
        start.mean.weight.zero_()
    (mu,) = start(torch.zeros(1, 3, requires_grad=True))
    assert mu.item() == pytest.approx(3.0, abs=1e-5)
    mu.sum().backward()
    assert start.mean.bias.grad is not None and start.mean.bias.grad.abs().sum() > 0


def test_a_deterministic_head_has_no_density_and_only_float_actions():
    head = build_distribution(UNBOUNDED, 3, "deterministic", path="d")
    params = head(torch.zeros(1, 3))
    for call in (
        lambda: head.log_prob(params, torch.zeros(1, 2)),
        lambda: head.entropy(params),
        lambda: head.kl_divergence(params, params),
    ):
        with pytest.raises(TypeError, match="a deterministic policy has no"):
            call()
    with pytest.raises(SpecError, match="a deterministic distribution cannot model int action"):
        build_distribution(ActionSpec("action", "int", (), num_actions=2), 3, "deterministic", path="d")
    with pytest.raises(SpecError, match="mean: "):
        build_distribution(BOUNDED, 3, {"type": "deterministic", "mean": 9.0}, path="d")


def test_the_critic_concatenates_flattened_states_and_actions():
    states = {"image": StateSpec("image", (2, 3), "float"), "speed": StateSpec("speed", (), "float")}
    actions = {"steer": ActionSpec("steer", "float", (2,)), "throttle": ActionSpec("throttle", "float", ())}
    critic = Critic([{"type": "dense", "size": 8}], states, actions, path="critic_network")
    assert critic.network.layer_names == ["dense0"] and critic.network.dense0.weight.shape == (8, 6 + 1 + 2 + 1)
    values = critic(
        {"image": torch.randn(4, 2, 3), "speed": torch.randn(4)},
        {"steer": torch.randn(4, 2), "throttle": torch.randn(4)},
    )
    assert values.shape == (4,)


def test_the_2018_critic_sizes_and_a_recurrent_critic():
    assert critic_layers({"size_t0": 400, "size_t1": 300}, "c") == [
        {"type": "dense", "size": 400},
        {"type": "dense", "size": 300},
    ]
    with pytest.raises(SpecError, match="critic_network.size_t1: "):
        critic_layers({"size_t0": 4, "size_t1": 0}, "critic_network")
    states = {"state": StateSpec("state", (2,), "float")}
    actions = {"action": ActionSpec("action", "float", ())}
    with pytest.raises(SpecError, match="critic_network: a critic cannot be recurrent"):
        Critic([{"type": "internal_lstm", "size": 4}], states, actions, path="critic_network")
