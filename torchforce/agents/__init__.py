"""Agents: the registry of agent types and ``create_agent`` (what ``Agent.from_spec`` calls)."""

from __future__ import annotations

from typing import Any

from torchforce.agents.agent import Agent, NonFiniteActionError, NonFiniteError
from torchforce.agents.transitions import Transitions
from torchforce.spec import Registry, SpecError, load_spec

AGENTS = Registry(
    "agent",
    {
        "constant": "torchforce.agents.constant:ConstantAgent",
        "random": "torchforce.agents.random:RandomAgent",
        "ddpg": "torchforce.agents.ddpg:DDPGAgent",
        "dqn": "torchforce.agents.dqn:DQNAgent",
        "dqn_nstep": "torchforce.agents.dqn_nstep:DQNNstepAgent",
        "dqfd": "torchforce.agents.dqfd:DQFDAgent",
        "naf": "torchforce.agents.naf:NAFAgent",
        "ppo": "torchforce.agents.ppo:PPOAgent",
        "vpg": "torchforce.agents.vpg:VPGAgent",
        "trpo": "torchforce.agents.trpo:TRPOAgent",
    },
    aliases={
        "constant_agent": "constant",
        "random_agent": "random",
        "ddpg_agent": "ddpg",
        "dqn_agent": "dqn",
        "dqn_nstep_agent": "dqn_nstep",
        "dqfd_agent": "dqfd",
        "naf_agent": "naf",
        "ppo_agent": "ppo",
        "vpg_agent": "vpg",
        "trpo_agent": "trpo",
    },
    base=Agent,
)

# 0.3.5 keys and where they went in 0.4 (reference §1.2).
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
    "repeat_update": "update_mode (repeat_update is gone: use a multi_step optimizer)",
    "keep_last_timestep": "update_mode",
}


def create_agent(spec: Any, **kwargs: Any) -> Agent:
    """An agent from a spec (a dict with ``type``, a JSON/YAML file, or a type name) plus keyword arguments.

    ``kwargs`` (states, actions, network, ...) fill in what the spec leaves out; a key in both is an error, so a
    config never silently overrides what the caller passed.
    """
    data, file = load_spec(spec)
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


__all__ = ["AGENTS", "Agent", "NonFiniteActionError", "NonFiniteError", "Transitions", "create_agent"]
