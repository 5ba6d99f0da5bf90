"""Small dense policies act in NumPy on the CPU (``core/host_acting.py``): the same actions as the torch path from the
same draws of torch's generator, for every head that has a NumPy sampler; the parameters' changes seen at once;
every other policy in torch."""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest
import torch
from torch import nn

from torchforce.agents import create_agent
from torchforce.core.distributions.base import TorchDraws
from torchforce.core.distributions.categorical import Categorical
from torchforce.core.networks.network import LayeredNetwork
from torchforce.spec import normalize_states

STATES = {"type": "float", "shape": (5,)}
DENSE = [{"type": "dense", "size": 16, "activation": "tanh"}, {"type": "dense", "size": 8, "activation": "relu"}]
HEADS = {
    "int": ("ppo", {"type": "int", "num_actions": 3, "shape": (2,)}, None),
    "bool": ("ppo", {"type": "bool"}, None),
    "bool, two logits": ("dqn", {"type": "bool", "shape": (3,)}, None),  # the Q-learning agents' categorical
    "gaussian, bounded": (
        "ppo",
        {"type": "float", "shape": (2,), "min_value": -0.5, "max_value": 0.5},
        {"type": "gaussian"},  # bounded actions get a beta head by default
    ),
    "gaussian, one std": ("ppo", {"type": "float", "shape": (3,)}, {"type": "gaussian", "state_dependent_std": False}),
    "gaussian, 2x2": ("ppo", {"type": "float", "shape": (2, 2)}, None),
    "deterministic, bounded": ("ddpg", {"type": "float", "shape": (2,), "min_value": -2.0, "max_value": 1.0}, None),
    "deterministic": ("ddpg", {"type": "float"}, None),
}


def agent(kind: str, actions: dict, distribution: dict | None = None, network: list = DENSE, **spec):
    if distribution is not None:
        spec["distributions"] = {"action": distribution}
    return create_agent({"type": kind, "network": network, "seed": 0, **spec}, states=STATES, actions=actions)


def states(rows: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, 5)).astype(np.float32) * 3


def torch_actions(policy, batch: np.ndarray, deterministic: bool) -> np.ndarray:
    with torch.inference_mode():
        actions, *_ = policy.act_forward({"state": torch.from_numpy(batch)}, {}, deterministic)
    return actions["action"].numpy()


def assert_same_actions(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(got[name], value)


def assert_acts_as_in_torch(policy, rows: int, steps: int = 5) -> None:
    """Deterministic and sampled actions of the NumPy pass are the torch pass's, from the same draws (the generator
    left in the same state)."""
    host = policy.on_host()
    assert host is not None
    for deterministic in (True, False):
        for step in range(steps):
            batch = states(rows, step)
            torch.manual_seed(step)
            with torch.inference_mode():
                expected, *_ = policy.act_forward({"state": torch.from_numpy(batch)}, {}, deterministic)
            after_torch = torch.get_rng_state()
            torch.manual_seed(step)
            got = host.act({"state": batch}, deterministic)
            assert torch.equal(torch.get_rng_state(), after_torch)  # the same draws, no more, no fewer
            assert_same_actions(got, {name: value.numpy() for name, value in expected.items()})


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("rows", [1, 7])
def test_the_numpy_pass_gives_the_torch_pass_actions_from_the_same_draws(head, rows):
    kind, action, distribution = HEADS[head]
    policy = agent(kind, action, distribution).policy
    assert_acts_as_in_torch(policy, rows)
    if kind != "ddpg":  # sampled actions vary: the draws are used
        torch.manual_seed(0)
        sampled = {policy.on_host().act({"state": states(1)}, False)["action"].tobytes() for _ in range(40)}
        assert len(sampled) > 1


def test_several_heads_draw_in_the_torch_pass_order():
    actions = {
        "move": {"type": "int", "num_actions": 4, "shape": (2,)},
        "force": {"type": "float", "shape": (3,)},
        "fire": {"type": "bool", "shape": (2,)},
    }
    policy = create_agent({"type": "ppo", "network": DENSE, "seed": 0}, states=STATES, actions=actions).policy
    assert_acts_as_in_torch(policy, 3)


def test_the_draws_are_float32_whatever_torch_s_default_dtype():
    policy = agent("ppo", HEADS["int"][1]).policy
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert_acts_as_in_torch(policy, 4)
    finally:
        torch.set_default_dtype(default)


@pytest.mark.parametrize(
    "network, spec",
    [
        ([{"type": "dense", "size": 8, "activation": "elu"}], {}),
        ([{"type": "dense", "skip": True}], {}),
        ([{"type": "dense", "size": 8}, {"type": "internal_lstm", "size": 4}], {}),
        ([{"type": "linear", "size": 8}], {}),
        ([{"type": "dense", "size": 8}], {"mixed_precision": "bfloat16"}),
        ([{"type": "dense", "size": 8}], {"distributions": {"action": {"type": "beta"}}}),
    ],
    ids=["elu", "skip", "recurrent", "linear layer", "bfloat16", "beta head"],
)
def test_other_policies_act_in_torch(network, spec):
    action = {"type": "float", "min_value": 0.0, "max_value": 1.0}
    policy = agent("ppo", action, network=network, **spec).policy
    assert policy.on_host() is None


def test_an_agent_acts_on_the_host_unless_told_not_to_or_recording_for_updates():
    int_action = {"type": "int", "num_actions": 4}
    small = agent("ppo", int_action)
    assert small.policy.on_host() is not None
    small.policy.host_acting = False
    assert small.policy.on_host() is None
    images = create_agent(  # PPO keeps log pi of what it acted on for states of 4 KiB and more: torch, as before
        {"type": "ppo", "network": [{"type": "dense", "size": 8}], "seed": 0},
        states={"type": "float", "shape": (1024,)},
        actions=int_action,
    )
    assert images.policy.on_host() is not None  # the policy could, but what acting keeps is computed in torch
    calls = []
    on_host = images.policy.on_host
    images.policy.on_host = lambda: calls.append(1) or on_host()
    images.act(np.zeros((2, 1024), np.float32))
    images.act(np.zeros(1024, np.float32), independent=True)
    assert calls == []


def test_batches_whose_products_numpy_would_thread_act_in_torch():
    """OpenBLAS computes a product of 262,144 multiply-adds or more on several threads: a 256x256 layer acts on the
    host for up to 3 rows, in torch for 4 and more; CartPole's 64x64 policy on the host up to 63."""
    wide = agent("ppo", HEADS["int"][1], network=[{"type": "dense", "size": 256}] * 2)
    assert [wide.policy.on_host(rows) is not None for rows in (1, 3, 4, 16)] == [True, True, False, False]
    narrow = agent("ppo", HEADS["int"][1], network=[{"type": "dense", "size": 64}] * 2)
    assert [narrow.policy.on_host(rows) is not None for rows in (1, 16, 63, 64)] == [True, True, True, False]
    calls = []
    on_host = wide.policy.on_host
    wide.policy.on_host = lambda rows: calls.append(rows) or on_host(rows)
    wide.act(states(8), independent=True)
    assert calls == [8]


def test_training_acts_alike_on_the_host_and_in_torch():
    """A PPO agent trained 300 steps on random states: the same actions and parameters either way (sampling draws
    torch's generator on both paths; updates change the parameters the views show)."""
    spec = {"update_mode": {"unit": "timesteps", "batch_size": 32, "frequency": 32}, "step_optimizer": {"type": "adam"}}
    trained = []
    for on_host in (True, False):
        learner = agent("ppo", {"type": "int", "num_actions": 3}, **spec)
        learner.policy.host_acting = on_host
        generator = np.random.default_rng(0)
        actions = []
        for step in range(300):
            actions.append(learner.act(generator.normal(size=(2, 5)).astype(np.float32)))
            learner.observe(terminal=[step % 9 == 8, 0], reward=generator.normal(size=2))
        assert learner.updates > 5 and (learner.policy.on_host() is not None) == on_host
        trained.append((np.concatenate(actions), learner.get_parameters()))
    (first, first_parameters), (second, second_parameters) = trained
    np.testing.assert_array_equal(first, second)
    for name, value in first_parameters.items():
        torch.testing.assert_close(second_parameters[name], value)


def test_parameters_changed_or_replaced_are_read_anew_and_a_copy_acts_with_its_own():
    policy = agent("ddpg", HEADS["deterministic"][1]).policy
    batch = states(4)
    layer = policy.network.get_submodule(policy.network.layer_names[0])
    head = policy.heads["action"]

    def acts_as_in_torch() -> np.ndarray:
        got = policy.on_host().act({"state": batch}, True)["action"]
        np.testing.assert_allclose(got, torch_actions(policy, batch, True), rtol=1e-5, atol=1e-6)
        return got

    seen = [acts_as_in_torch()]
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place: the views see it
    seen.append(acts_as_in_torch())
    layer.weight.data = torch.randn_like(layer.weight)  # new memory
    seen.append(acts_as_in_torch())
    layer.weight = nn.Parameter(torch.randn_like(layer.weight))  # a new parameter
    seen.append(acts_as_in_torch())
    replaced = {name: torch.randn_like(value) for name, value in policy.state_dict().items()}
    policy.load_state_dict(replaced, assign=True)
    seen.append(acts_as_in_torch())
    head.mean = nn.Linear(head.mean.in_features, head.mean.out_features)  # a module replaced
    seen.append(acts_as_in_torch())
    assert len({values.tobytes() for values in seen}) == len(seen)  # every change changed the actions
    for duplicate in (copy.deepcopy(policy), pickle.loads(pickle.dumps(policy))):
        with torch.no_grad():
            duplicate.network.get_submodule(policy.network.layer_names[0]).weight.fill_(0.5)
        got = duplicate.on_host().act({"state": batch}, True)["action"]
        assert not np.allclose(got, seen[-1])
        np.testing.assert_allclose(got, torch_actions(duplicate, batch, True), atol=1e-6)


class ArgminCategorical(Categorical):
    """A user head that samples otherwise and has no NumPy version of its own."""

    def sample(self, params, deterministic=False):
        return params[0].argmin(dim=-1)


class DoubledStates(LayeredNetwork):
    """A user network that computes more than its layers."""

    def forward(self, states, internals=None):
        return super().forward({name: 2 * value for name, value in states.items()}, internals)


def test_user_heads_and_networks_that_compute_otherwise_act_in_torch():
    action = {"type": "int", "num_actions": 5}
    head = agent("ppo", action, {"type": ArgminCategorical}).policy
    assert head.on_host() is None
    network = DoubledStates(DENSE, normalize_states(STATES)[0])
    doubled = create_agent({"type": "ppo", "network": network, "seed": 0}, states=STATES, actions=action)
    assert doubled.policy.on_host() is None
    batch = states(6)
    np.testing.assert_array_equal(  # and so act as they say
        doubled.act(batch, deterministic=True, independent=True), torch_actions(doubled.policy, batch, True)
    )


def test_an_infinite_state_gives_what_torch_gives_without_numpy_warnings():
    relu = [{"type": "dense", "size": 16}, {"type": "dense", "size": 8}]
    policy = agent("ddpg", HEADS["deterministic"][1], network=relu).policy
    batch = states(2)
    batch[0, 0] = np.inf
    with np.errstate(all="raise"):
        actions = policy.on_host().act({"state": batch}, True)["action"]
    assert np.isnan(actions[0]).all() and np.isfinite(actions[1]).all()
    np.testing.assert_allclose(actions, torch_actions(policy, batch, True), rtol=1e-5, equal_nan=True)


def test_each_thread_draws_into_a_buffer_of_its_own():
    draws = TorchDraws(torch.Tensor.uniform_)
    mine = draws.draw((3,))
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(draws.draw((3,))))
    thread.start()
    thread.join()
    assert theirs[0] is not mine and not np.shares_memory(theirs[0], mine)
