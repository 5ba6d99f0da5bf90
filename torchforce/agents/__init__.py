"""Agents: the ten agent classes under their 2018 names, the registry of agent types, and ``create_agent`` (what
``Agent.from_spec`` calls).

A TensorForce 0.4 script's imports work with the package renamed: ``from torchforce.agents import PPOAgent``, and the
0.4 module paths (``torchforce.agents.ppo_agent``, ``torchforce.agents.learning_agent``...) name the modules that
hold those classes now (``LEGACY_MODULES``).
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any

from torchforce.agents.agent import Agent, LearningAgent
from torchforce.agents.constant import ConstantAgent
from torchforce.agents.ddpg import DDPGAgent
from torchforce.agents.dqfd import DQFDAgent
from torchforce.agents.dqn import DQNAgent
from torchforce.agents.dqn_nstep import DQNNstepAgent
from torchforce.agents.errors import NonFiniteActionError, NonFiniteError
from torchforce.agents.naf import NAFAgent
from torchforce.agents.ppo import PPOAgent
from torchforce.agents.random import RandomAgent
from torchforce.agents.transitions import Transitions
from torchforce.agents.trpo import TRPOAgent
from torchforce.agents.vpg import VPGAgent
from torchforce.spec import Registry, SpecError, did_you_mean, load_file, load_spec
from torchforce.spec.errors import describe

# Each agent type: its module and class here. In 0.4, the module "<type>_agent" held the class, and the spec type
# "<type>_agent" named it: both 2018 names lead to the same place.
AGENT_CLASSES = {
    "constant": "constant:ConstantAgent",
    "random": "random:RandomAgent",
    "ddpg": "ddpg:DDPGAgent",
    "dqn": "dqn:DQNAgent",
    "dqn_nstep": "dqn_nstep:DQNNstepAgent",
    "dqfd": "dqfd:DQFDAgent",
    "naf": "naf:NAFAgent",
    "ppo": "ppo:PPOAgent",
    "vpg": "vpg:VPGAgent",
    "trpo": "trpo:TRPOAgent",
}

# TensorForce 0.4's module names under tensorforce.agents, and the module of ours that holds what each defined.
LEGACY_MODULES = {"agent": "agent", "learning_agent": "agent"} | {
    f"{kind}_agent": target.split(":")[0] for kind, target in AGENT_CLASSES.items()
}
for _legacy, _module in LEGACY_MODULES.items():
    if _legacy != _module:
        sys.modules[f"{__name__}.{_legacy}"] = importlib.import_module(f"{__name__}.{_module}")

AGENTS = Registry(
    "agent",
    {kind: f"{__name__}.{target}" for kind, target in AGENT_CLASSES.items()},
    aliases={f"{kind}_agent": kind for kind in AGENT_CLASSES},
    base=Agent,
)

# A whole agent spec that may name a shipped config: a bare name, not a path or a "module:Class".
SHIPPED_NAME = re.compile(r"[\w-]+")

# 0.3.5 keys and where they went in 0.4 (docs/tensorforce-0.4.md, Keys of 0.3.5); repeat_update, which 0.4 dropped, is
# torchforce's update_mode.updates.
LEGACY_KEYS = {
    "states_spec": "states",
    "actions_spec": "actions",
    "network_spec": "network",
    "explorations_spec": "actions_exploration",
    "states_preprocessing_spec": "states_preprocessing",
    "reward_preprocessing_spec": "reward_preprocessing",
    "preprocessing": "states_preprocessing",
    "distributions_spec": "distributions",
    "summary_spec": "summarizer",
    "saver_spec": "saver",
    "distributed_spec": "execution",
    "session_config": "execution",
    "batch_size": "update_mode.batch_size",
    "first_update": "update_mode.first_update",
    "update_frequency": "update_mode.frequency",
    "repeat_update": "update_mode.updates",
    "keep_last_timestep": "update_mode",
}


def create_agent(spec: Any, **kwargs: Any) -> Agent:
    """An agent from a spec plus keyword arguments.

    ``spec`` is a dict with ``type``, a JSON/YAML file, an agent type (``"ppo"``: its defaults), or the name of a
    config shipped with torchforce (``"ppo_cartpole"``: ``torchforce/configs/agents/ppo_cartpole.json``; the names
    are ``torchforce.configs.names("agents")``). A type name wins over a shipped config of the same name (the 2018
    example configs ``ppo.json``, ``dqn.json``...: load those with ``torchforce.configs.shipped("agents", "ppo")``).
    ``kwargs`` (states, actions, network, ...) fill in what the spec leaves out; a key in both is an error, so a
    config never silently overrides what the caller passed.
    """
    data, file = load_spec(spec)
    if isinstance(data, str) and file is None and AGENTS.canonical(data) is None and SHIPPED_NAME.fullmatch(data):
        data, file = _shipped_config(data)
    try:
        if isinstance(data, str):
            data = {"type": data}
        if not isinstance(data, dict):
            raise SpecError("agent", "not an agent spec", got=data, expected='a dict like {"type": "ppo", ...}')
        data = dict(data)
        for key in list(data):
            if key in LEGACY_KEYS:
                raise SpecError(
                    f"agent.{key}",
                    f"'{key}' is the 0.3.5 name; use '{LEGACY_KEYS[key]}'",
                    hint="The shipped configs (torchforce/configs/agents/, copied into configs/agents/ by "
                    "'tfcli init') show the 0.4 format.",
                )
        for key in kwargs:
            if key in data and key != "type":
                raise SpecError(f"agent.{key}", "given both in the spec and as an argument", hint="Give it once.")
        data.update(kwargs)
        if "type" not in data:
            raise SpecError("agent", "an agent spec needs 'type'", hint="Known: " + ", ".join(AGENTS.names()) + ".")
        return AGENTS.create(data, "agent", base=Agent)
    except SpecError as error:
        raise (error.with_file(file) if file else error) from None


def _shipped_config(name: str) -> tuple[Any, str]:
    """The contents and file of the shipped agent config ``name``; an unknown name suggests among the agent types
    and the shipped configs."""
    from torchforce import configs

    shipped = [config for config in configs.names("agents") if AGENTS.canonical(config) is None]  # types win
    if name not in shipped:
        types = AGENTS.names()
        guess = did_you_mean(name, [*shipped, *types, *AGENTS.aliases])
        raise SpecError(
            "agent",
            f"unknown agent {describe(name)}: neither an agent type nor a shipped agent config",
            hint=f"Agent types: {', '.join(types)}. Shipped configs: {', '.join(shipped)}."
            + (f" Did you mean '{guess}'?" if guess else ""),
        )
    file = configs.shipped("agents", name)
    return load_file(file), str(file)


__all__ = [
    "AGENTS",
    "Agent",
    "ConstantAgent",
    "DDPGAgent",
    "DQFDAgent",
    "DQNAgent",
    "DQNNstepAgent",
    "LearningAgent",
    "NAFAgent",
    "NonFiniteActionError",
    "NonFiniteError",
    "PPOAgent",
    "RandomAgent",
    "TRPOAgent",
    "Transitions",
    "VPGAgent",
    "create_agent",
]
