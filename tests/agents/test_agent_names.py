"""Agents named by a shipped config's name (``create_agent("ppo_cartpole", ...)``, ``Agent.from_spec``), from any
folder: the configs are package data, not source-tree paths. Type names keep their meaning; unknown names suggest."""

from __future__ import annotations

import pytest

from torchforce.agents import Agent, DQNAgent, PPOAgent, create_agent
from torchforce.configs import names, shipped
from torchforce.environments import make
from torchforce.spec import SpecError

CARTPOLE = make("CartPole-v1")
SPACES = {"states": CARTPOLE.states, "actions": CARTPOLE.actions}


@pytest.fixture(autouse=True)
def elsewhere(tmp_path, monkeypatch):
    """Every test runs in an empty folder: nothing may be found through the repository's paths."""
    monkeypatch.chdir(tmp_path)


def test_a_shipped_config_by_name_is_that_config():
    by_name = create_agent("ppo_cartpole", **SPACES, seed=0)
    by_file = create_agent(str(shipped("agents", "ppo_cartpole")), **SPACES, seed=0)
    assert isinstance(by_name, PPOAgent) and by_name.config == by_file.config
    assert by_name.config.epochs == 10 and by_name.config.minibatch_size == 128  # the file's values, not defaults
    assert isinstance(Agent.from_spec("dqn_cartpole", SPACES), DQNAgent)


def test_a_type_name_wins_over_a_shipped_config_of_the_same_name():
    assert "ppo" in names("agents")  # the 2018 example config
    network = [{"type": "dense", "size": 8}]
    assert (
        create_agent("ppo", **SPACES, network=network).config
        == create_agent({"type": "ppo"}, **SPACES, network=network).config
    )


def test_an_unknown_name_suggests_a_shipped_config():
    with pytest.raises(SpecError) as caught:
        create_agent("ppo_cartpol", **SPACES)
    message = str(caught.value)
    assert message.startswith(
        'agent: unknown agent "ppo_cartpol": neither an agent type nor a shipped agent config.\n  Agent types: '
        "constant, ddpg, dqfd, dqn, dqn_nstep, naf, ppo, random, trpo, vpg. "
        "Shipped configs: ddpg_halfcheetah, ddpg_pendulum, "
    )
    assert message.endswith("Did you mean 'ppo_cartpole'?")
    assert " ppo, " not in message.split("Shipped configs:")[1]  # a type name there would not load the config


def test_an_error_in_a_shipped_config_names_its_file():
    with pytest.raises(
        SpecError,
        match=r"^agent\.network: given both in the spec and as an argument \(in .*"
        r"ppo_cartpole\.json\)",
    ):
        create_agent("ppo_cartpole", **SPACES, network=[{"type": "dense", "size": 8}])


def test_names_that_would_share_modules_are_refused():
    with pytest.raises(ValueError, match="the names 'a.b' and 'a_b' would share one set of modules"):
        create_agent(
            {"type": "ppo", "network": [{"type": "dense", "size": 4}]},
            states={"type": "float", "shape": (2,)},
            actions={"a.b": {"type": "int", "num_actions": 3}, "a_b": {"type": "float"}},
        )
