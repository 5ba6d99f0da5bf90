"""An agent's whole state: what ``Agent.state_dict`` composes of its parts' state dicts (what a checkpoint holds),
what ``Agent.load_state_dict`` checks and loads back, and the part of it a warm start takes. The parts know their own
state (``agents.state`` has the helpers); this module knows which parts an agent has and in what order they load:
whatever fails on a checkpoint of another spec fails first, before anything has changed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchforce.agents.checkpoint import CheckpointError, load_checkpoint
from torchforce.agents.clock import ModelClock
from torchforce.agents.state import (
    check_kind,
    check_module_states,
    load_rng_state,
    load_torch_state_dicts,
    rng_state,
    state_dicts,
)

if TYPE_CHECKING:
    from torchforce.agents.agent import Agent

# what a checkpoint of another form raises as its parts are read (a part missing, or of another type)
MALFORMED = (KeyError, AttributeError, TypeError, IndexError)


def agent_state(agent: Agent) -> dict[str, Any]:
    """Everything needed to continue exactly where ``agent`` is (see ``Agent.state_dict``)."""
    state: dict[str, Any] = {
        "agent": agent.name,
        "counters": {"timestep": agent.timestep, "episode": agent.episode, "updates": agent.updates},
        **agent.episodes.state_dict(),
        "rng": rng_state(agent.rng, agent.device),
    }
    apart = agent.apart_generators.state_dict()
    if apart is not None:  # (only once acting apart has drawn: a checkpoint saves again as it was read)
        state["rng"]["apart"] = apart
    model_timestep = agent.model_timestep
    if model_timestep != agent.timestep:  # workers share the model (an agent alone saves as before)
        state["counters"]["model_timestep"] = model_timestep
    if agent.learning:
        state["modules"] = state_dicts(agent.trainable_modules())
        state["optimizers"] = state_dicts(agent.optimizers())
        state["memory"] = agent.memory.state_dict()
        if "acted/version" in agent.fields:  # what the rows' acted/version fields are compared with
            state["parameters_version"] = agent.policy.version
        state["schedule"] = agent.schedule.state_dict()
        state["preprocessing"] = state_dicts(agent.preprocessing)
        if agent.reward_preprocessing is not None:
            state["reward_preprocessing"] = agent.reward_preprocessing.state_dict()
        state["explorations"] = state_dicts(
            {
                name: exploration
                for name, exploration in agent.explorations.items()
                if hasattr(exploration, "state_dict")
            }
        )
    return state


def load_agent_state(agent: Agent, state: dict[str, Any], *, for_acting: bool) -> None:
    """Continue ``agent`` from ``state`` (see ``Agent.load_state_dict``)."""
    check_kind(state, agent.name)
    agent.acting_only = False  # (and for_acting again at the end, once the state is in)
    if agent.learning:
        check_parts(agent, state)
        check_module_states(agent.trainable_modules(), state["modules"])
        if not for_acting:  # checked before it changes anything, and first to change
            agent.memory.load_state_dict(state["memory"])
        load_torch_state_dicts(agent.trainable_modules(), state["modules"])
        if not for_acting:
            load_torch_state_dicts(agent.optimizers(), state["optimizers"])
    counters = state["counters"]
    agent.timestep, agent.episode, agent.updates = counters["timestep"], counters["episode"], counters["updates"]
    model_timestep = counters.get("model_timestep", agent.timestep)
    if agent.model_clock is None and model_timestep != agent.timestep:  # a shared model's checkpoint, loaded alone
        agent.model_clock = ModelClock(agent)
    if agent.model_clock is not None:
        agent.model_clock.set(model_timestep)
    agent.episodes.load_state_dict(state)
    load_rng_state(state["rng"], agent.rng, agent.device)
    agent.apart_generators.load_state_dict(state["rng"].get("apart"))
    if not agent.learning:
        return
    # rows acted with the saved parameters stay known as such (a checkpoint without: none are)
    agent.policy.version = int(state.get("parameters_version", agent.policy.version + 1))
    agent.schedule.load_state_dict(state["schedule"])
    for name, stack in agent.preprocessing.items():
        stack.load_state_dict(state["preprocessing"][name])
    if agent.reward_preprocessing is not None:
        agent.reward_preprocessing.load_state_dict(state["reward_preprocessing"])
    for name, values in state["explorations"].items():
        agent.explorations[name].load_state_dict(values)
    agent.acting_only = for_acting  # its memory and optimizers, left out, must not be learned on nor saved empty


def check_parts(agent: Agent, state: dict[str, Any], *, explorations: bool = True) -> None:
    """A checkpoint whose agent preprocessed its states or rewards, or explored, with steps of other kinds than
    ``agent``'s is refused before anything is loaded: a state preprocessing left out would have this agent act on
    states its networks never saw (raw instead of standardized), without an error."""
    own = {name: [step.state_dict() for step in stack.preprocessors] for name, stack in agent.preprocessing.items()}
    saved = state.get("preprocessing", {})
    saved = {name: [saved[name][str(index)] for index in range(len(saved[name]))] for name in saved}
    shape = lambda stacks: {  # noqa: E731 - each state's steps, by what their state holds
        name: [sorted(step) for step in steps] for name, steps in stacks.items() if steps
    }
    if shape(own) != shape(saved):
        raise ValueError(
            "the checkpoint's agent preprocessed its states with other steps than this one (states_preprocessing: "
            f"{_stacks(saved)} there, {_stacks(own)} here); build the agent from the spec it was trained with "
            "(the checkpoint's .json file holds it)"
        )
    if (agent.reward_preprocessing is None) != (state.get("reward_preprocessing") is None):
        there, here = ("a", "no") if agent.reward_preprocessing is None else ("no", "a")
        raise ValueError(
            f"the checkpoint's agent has {there} reward_preprocessing and this one {here}; build the agent from "
            "the spec it was trained with (the checkpoint's .json file holds it)"
        )
    if not explorations:  # (a warm start loads none: they start afresh)
        return
    own_explorations = {name for name, step in agent.explorations.items() if hasattr(step, "state_dict")}
    if own_explorations != set(state.get("explorations", {})):
        raise ValueError(
            f"the checkpoint's agent explores {sorted(state.get('explorations', {})) or 'nothing'} with a state, "
            f"this one {sorted(own_explorations) or 'nothing'}; build the agent from the spec it was trained with"
        )


def load_warm_start(agent: Agent, path: Path) -> None:
    """What the checkpoint at ``path`` learned into ``agent`` (see ``Agent.warm_start``): its networks'
    parameters and the run-wide statistics of its preprocessing. Every check and read comes first: a checkpoint
    that does not fit changes nothing. The memory and the optimizers' state are not even read (the file is
    mapped)."""
    state = load_checkpoint(path, mapped=True)
    try:
        check_kind(state, agent.name)
        check_parts(agent, state, explorations=False)
        check_module_states(agent.trainable_modules(), state["modules"])
        loads = [
            load
            for name, stack in agent.preprocessing.items()
            for load in stack.run_wide_loads(state["preprocessing"][name])
        ]
        if agent.reward_preprocessing is not None:
            loads += agent.reward_preprocessing.run_wide_loads(state["reward_preprocessing"])
    except MALFORMED as error:
        raise CheckpointError(path, f"{type(error).__name__}: {error}") from None
    load_torch_state_dicts(agent.trainable_modules(), state["modules"])
    for step, step_state in loads:
        step.load_state_dict(step_state)
    agent.policy.version += 1  # no row acted with these parameters yet


def _stacks(stacks: dict[str, list]) -> str:
    """Each state's number of preprocessing steps, for a message: "'state': 2 steps", or "none"."""
    described = [
        f"'{name}': {len(steps)} step{'s' if len(steps) != 1 else ''}" for name, steps in stacks.items() if steps
    ]
    return ", ".join(described) or "none"
