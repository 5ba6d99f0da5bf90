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

from torchforce.agents import create_agent
from torchforce.core.distributions.base import TorchDraws

STATES = {"type": "float", "shape": (5,)}
DENSE = [{"type": "dense", "size": 16, "activation": "tanh"}, {"type": "dense", "size": 8, "activation": "relu"}]
HEADS = {
    "int": ("ppo", {"type": "int", "num_actions": 3, "shape": (2,)}, None),
    "bool": ("ppo", {"type": "bool"}, None),
    "gaussian, bounded": (
        "ppo",
        {"type": "float", "shape": (2,), "min_value": -0.5, "max_value": 0.5},
        {"type": "gaussian"},  # bounded actions get a beta head by default
    ),
    "gaussian, one std": ("ppo", {"type": "float", "shape": (3,)}, {"type": "gaussian", "state_dependent_std": False}),
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


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("rows", [1, 7])
def test_the_numpy_pass_gives_the_torch_pass_actions_from_the_same_draws(head, rows):
    kind, action, distribution = HEADS[head]
    policy = agent(kind, action, distribution).policy
    host = policy.on_host()
    assert host is not None
    for deterministic in (True, False):
        for step in range(5):
            batch = states(rows, step)
            torch.manual_seed(step)
            expected = torch_actions(policy, batch, deterministic)
            after_torch = torch.get_rng_state()
            torch.manual_seed(step)
            got = host.act({"state": batch}, deterministic)["action"]
            assert torch.equal(torch.get_rng_state(), after_torch)  # the same draws, no more, no fewer
            assert got.dtype == expected.dtype and got.shape == expected.shape
            if got.dtype.kind == "f":
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_array_equal(got, expected)
    if kind == "ppo" and action["type"] != "float":  # sampled actions vary: the draws are used
        torch.manual_seed(0)
        assert len({tuple(host.act({"state": states(1)}, False)["action"].ravel()) for _ in range(40)}) > 1


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
    assert calls == []
    images.act(np.zeros(1024, np.float32), independent=True)  # records nothing: on the host
    assert calls == [1]


@pytest.mark.parametrize("host_acting", [True, False])
def test_training_acts_alike_on_the_host_and_in_torch(host_acting):
    """A PPO agent trained 300 steps on random states: the same actions and parameters either way (sampling draws
    torch's generator on both paths; updates change the parameters the views show)."""
    spec = {"update_mode": {"unit": "timesteps", "batch_size": 32, "frequency": 32}, "step_optimizer": {"type": "adam"}}
    trained = {}
    for on_host in (True, host_acting):
        learner = agent("ppo", {"type": "int", "num_actions": 3}, **spec)
        learner.policy.host_acting = on_host
        generator = np.random.default_rng(0)
        actions = []
        for step in range(300):
            actions.append(learner.act(generator.normal(size=(2, 5)).astype(np.float32)))
            learner.observe(terminal=[step % 9 == 8, 0], reward=generator.normal(size=2))
        assert learner.updates > 5
        trained[on_host] = (np.concatenate(actions), learner.get_parameters())
    (first, first_parameters), (second, second_parameters) = trained[True], trained[host_acting]
    np.testing.assert_array_equal(first, second)
    for name, value in first_parameters.items():
        torch.testing.assert_close(second_parameters[name], value)


def test_a_replaced_parameter_is_read_anew_and_a_copy_acts_with_its_own():
    policy = agent("ddpg", HEADS["deterministic"][1]).policy
    batch = states(4)
    before = policy.on_host().act({"state": batch}, True)["action"]
    layer = policy.network.get_submodule(policy.network.layer_names[0])
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place: the views see it
    changed = policy.on_host().act({"state": batch}, True)["action"]
    assert not np.allclose(changed, before)
    np.testing.assert_allclose(changed, torch_actions(policy, batch, True), rtol=1e-5, atol=1e-6)
    layer.weight.data = torch.zeros_like(layer.weight)  # replaced: new views
    np.testing.assert_allclose(
        policy.on_host().act({"state": batch}, True)["action"], torch_actions(policy, batch, True), atol=1e-6
    )
    for duplicate in (copy.deepcopy(policy), pickle.loads(pickle.dumps(policy))):
        with torch.no_grad():
            duplicate.network.get_submodule(policy.network.layer_names[0]).weight.fill_(0.5)
        assert not np.allclose(duplicate.on_host().act({"state": batch}, True)["action"], changed)
        np.testing.assert_allclose(
            duplicate.on_host().act({"state": batch}, True)["action"], torch_actions(duplicate, batch, True), atol=1e-6
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
