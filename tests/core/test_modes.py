"""Which modules compute differently in training and eval mode, and agents switching only those."""

import pytest
import torch
from torch import nn

from torchforce.agents import create_agent
from torchforce.core.modes import follows_training_mode, uses_training_mode
from torchforce.core.networks import build_network
from torchforce.environments import make
from torchforce.spec import normalize_states

STATES, _ = normalize_states({"shape": (4,), "type": "float"})
SEQUENCE = normalize_states({"shape": (3, 4), "type": "float"})[0]


@pytest.mark.parametrize(
    "layers, states, expected",
    [
        ([{"type": "dense", "size": 8}, {"type": "dense", "size": 8, "activation": "tanh"}], STATES, False),
        ([{"type": "linear", "size": 8}, {"type": "nonlinearity", "name": "lrelu"}], STATES, False),
        ([{"type": "dense", "size": 8}, {"type": "dropout", "rate": 0.5}], STATES, True),
        ([{"type": "internal_lstm", "size": 8}], STATES, False),
        ([{"type": "internal_lstm", "size": 8, "dropout": 0.2}], STATES, True),
        ([{"type": "lstm", "size": 8}], SEQUENCE, False),
        ([{"type": "lstm", "size": 8, "dropout": 0.2}], SEQUENCE, True),
        ([{"type": "tf_layer", "layer": "batch_normalization"}], STATES, True),
    ],
)
def test_layered_networks(layers, states, expected):
    assert follows_training_mode(build_network(layers, states)) is expected


@pytest.mark.parametrize(
    "module, expected",
    [
        (nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Conv1d(1, 1, 1), nn.MaxPool1d(1), nn.LayerNorm(2)), False),
        (nn.LSTM(2, 2, num_layers=2), False),
        (nn.LSTM(2, 2, num_layers=2, dropout=0.5), True),
        (nn.Dropout(0.1), True),
        (nn.BatchNorm1d(2), True),
        (nn.MultiheadAttention(4, 2), True),
    ],
)
def test_torch_modules(module, expected):
    assert follows_training_mode(module) is expected


def test_an_unknown_module_is_assumed_to_depend_on_the_mode():
    class Custom(nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x

    assert uses_training_mode(Custom())
    assert follows_training_mode(nn.Sequential(nn.Linear(2, 2), Custom()))


def _spy_on_train(agent):
    calls = []
    original = torch.nn.Module.train

    def train(module, mode=True):
        if module is agent.policy:
            calls.append(mode)
        return original(module, mode)

    return calls, train


@pytest.mark.parametrize("dropout, switches", [(False, False), (True, True)])
def test_agents_switch_modes_only_when_it_matters(monkeypatch, dropout, switches):
    env = make("minimal", action_type="int")
    network = [{"type": "dense", "size": 8}] + ([{"type": "dropout", "rate": 0.5}] if dropout else [])
    agent = create_agent(
        {"type": "ppo", "update_mode": {"unit": "episodes", "batch_size": 1}, "network": network},
        states=env.states,
        actions=env.actions,
        seed=0,
    )
    calls, train = _spy_on_train(agent)
    monkeypatch.setattr(torch.nn.Module, "train", train)
    for _ in range(3):
        state, terminal = env.reset(), 0
        while not terminal:
            action = agent.act(state)
            state, terminal, reward = env.execute(action)
            agent.observe(terminal, reward)
    assert agent.updates >= 2
    if switches:  # eval to act after each update, training for the next update (the last one ends the run)
        assert calls == [False, True] * agent.updates
    else:
        assert calls == []
