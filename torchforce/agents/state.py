"""What an agent saves: its saver spec, its whole state as one tree (weights, optimizer state, memory, counters,
per-row bookkeeping, RNG states, preprocessor statistics), and that tree loaded back, so a restored agent
continues exactly where the saved one was."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from torchforce.spec import (
    ActionSpec,
    SpecError,
    StateSpec,
    did_you_mean,
    expect_bool,
    expect_dict,
    expect_float,
    expect_int,
)

if TYPE_CHECKING:
    from torchforce.agents.agent import Agent

SAVER_KEYS = ("directory", "file", "seconds", "steps", "load", "basename")


def saver_spec(saver: dict | None) -> dict[str, Any] | None:
    """The 2018 ``saver`` spec checked and completed; None when it is off (no spec, or a null directory)."""
    if saver is None:
        return None
    saver = expect_dict(saver, "saver")
    for key in saver:
        if key not in SAVER_KEYS:
            guess = did_you_mean(key, SAVER_KEYS)
            raise SpecError(f"saver.{key}", "unknown key", hint=f"Did you mean '{guess}'?" if guess else None)
    basename = saver.get("basename", "model")
    if not isinstance(basename, str) or not basename or "/" in basename:
        raise SpecError("saver.basename", "not a file name", got=basename, expected='a name like "model"')
    file = saver.get("file")
    if file is not None and not isinstance(file, str):
        raise SpecError("saver.file", "not a file name", got=file, expected="a checkpoint file name, or null")
    spec = {
        "directory": saver.get("directory"),
        "basename": basename,
        "file": file,
        "load": expect_bool(saver.get("load", True), "saver.load"),
        "steps": expect_int(saver.get("steps"), "saver.steps", minimum=1, allow_none=True),
        "seconds": expect_float(saver.get("seconds"), "saver.seconds", minimum=0.0, allow_none=True),
    }
    if spec["directory"] is None:
        return None  # 2018: a null directory disables the saver
    spec["directory"] = str(spec["directory"])
    if spec["steps"] is None and spec["seconds"] is None:
        spec["seconds"] = 600.0
    return spec


def jsonable(value: Any) -> Any:
    """A constructor argument as JSON, for the resolved spec saved beside checkpoints."""
    if isinstance(value, (StateSpec, ActionSpec)):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def agent_state(agent: Agent) -> dict[str, Any]:
    """Everything needed to continue exactly where ``agent`` is."""
    state: dict[str, Any] = {
        "agent": agent.name,
        "counters": {"timestep": agent.timestep, "episode": agent.episode, "updates": agent.updates},
        "rows": {
            "num_rows": agent._num_rows,
            "acted": agent._acted,
            "new_episode": agent._new_episode.copy(),
            "returns": agent._returns.copy(),
            "lengths": agent._lengths.copy(),
        },
        "rng": {"torch": torch.get_rng_state(), "numpy": copy.deepcopy(agent.rng.bit_generator.state)},
    }
    if agent.device.type == "cuda":  # sampling on the GPU draws from the device's generator
        state["rng"]["cuda"] = torch.cuda.get_rng_state(agent.device)
    if agent.learning:
        state["modules"] = {name: module.state_dict() for name, module in agent.trainable_modules().items()}
        state["optimizers"] = {name: optimizer.state_dict() for name, optimizer in agent.optimizers().items()}
        state["memory"] = agent.memory.state_dict()
        state["schedule"] = agent.schedule.state_dict()
        state["completed"] = dict(agent._completed)
        state["preprocessing"] = {name: stack.state_dict() for name, stack in agent.preprocessing.items()}
        if agent.reward_preprocessing is not None:
            state["reward_preprocessing"] = agent.reward_preprocessing.state_dict()
        state["explorations"] = {name: e.state_dict() for name, e in agent.explorations.items()
                                 if hasattr(e, "state_dict")}  # fmt: skip
        state["internals"] = {name: value.cpu() for name, value in agent._internals.items()}
        state["open"] = None if agent._rows is None else agent._rows.state_dict()
        state["segments"] = None if agent._segments is None else agent._segments.state_dict()
    return state


def load_agent_state(agent: Agent, state: dict[str, Any]) -> None:
    """Put ``state`` (of ``agent_state``) into ``agent``. What fails on a checkpoint of another spec (module shapes,
    memory capacity) fails first, before anything has changed."""
    saved = state.get("agent", agent.name)
    if saved != agent.name:
        raise ValueError(f"the checkpoint is of a '{saved}' agent; it cannot be restored into a '{agent.name}' one")
    if agent.learning:
        for name, module in agent.trainable_modules().items():
            module.load_state_dict(_tensors_in(state["modules"][name]))
        for name, optimizer in agent.optimizers().items():
            optimizer.load_state_dict(_tensors_in(state["optimizers"][name]))
        agent.memory.load_state_dict(state["memory"])
    counters = state["counters"]
    agent.timestep, agent.episode, agent.updates = counters["timestep"], counters["episode"], counters["updates"]
    _load_rows(agent, state["rows"])
    torch.set_rng_state(torch.as_tensor(state["rng"]["torch"], dtype=torch.uint8))
    if "cuda" in state["rng"] and agent.device.type == "cuda":
        torch.cuda.set_rng_state(torch.as_tensor(state["rng"]["cuda"], dtype=torch.uint8), agent.device)
    agent.rng.bit_generator.state = state["rng"]["numpy"]
    if not agent.learning:
        return
    agent.schedule.load_state_dict(state["schedule"])
    agent._completed = dict(state["completed"])
    for name, stack in agent.preprocessing.items():
        stack.load_state_dict(state["preprocessing"][name])
    if agent.reward_preprocessing is not None:
        agent.reward_preprocessing.load_state_dict(state["reward_preprocessing"])
    for name, values in state["explorations"].items():
        agent.explorations[name].load_state_dict(values)
    agent._internals = {name: torch.as_tensor(v).to(agent.device) for name, v in state["internals"].items()}
    if state["open"] is not None:
        agent._rows.load_state_dict(state["open"])
    if state["segments"] is not None:
        agent._segments.load_state_dict(state["segments"])


def _load_rows(agent: Agent, rows: dict[str, Any]) -> None:
    """The per-row bookkeeping of a checkpoint. Whatever the agent had open or staged is dropped (not flushed into
    the memory, which the checkpoint replaces), also when the checkpoint has no rows yet."""
    agent._acted = False
    agent._num_rows = 0
    if agent.learning:
        agent._rows, agent._segments, agent._internals = None, None, {}
    if rows["num_rows"]:
        agent._resize(int(rows["num_rows"]))
    agent._acted = bool(rows["acted"])
    agent._new_episode = np.array(rows["new_episode"], dtype=bool)
    agent._returns = np.array(rows["returns"], dtype=np.float64)
    agent._lengths = np.array(rows.get("lengths", np.zeros(len(agent._returns))), dtype=np.int64)


def _tensors_in(tree: Any) -> Any:
    """Optimizer/module state dicts come back from checkpoints with numpy arrays where tensors were packed."""
    if isinstance(tree, np.ndarray):
        return torch.from_numpy(tree)
    if isinstance(tree, dict):
        return {key: _tensors_in(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_tensors_in(value) for value in tree]
    return tree
