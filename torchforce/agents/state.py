"""What an agent saves, as a tree of plain data: its saver spec, the resolved spec as JSON, and the state of its
parts (random generators, modules and optimizers, which come back from a checkpoint with numpy arrays). The agent
composes its whole state from its components' ``state_dict()``s (``Agent.state_dict``); this module knows nothing of
the agent itself."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from typing import Any

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


def rng_state(rng: np.random.Generator, device: torch.device) -> dict[str, Any]:
    """Torch's global generator, ``rng``'s, and on a GPU the device's generator (sampling there draws from it)."""
    return {**_torch_states(device), "numpy": copy.deepcopy(rng.bit_generator.state)}


def load_rng_state(state: dict[str, Any], rng: np.random.Generator, device: torch.device) -> None:
    """Put ``state`` (of ``rng_state``) back into the generators."""
    _set_torch_states(state, device)
    rng.bit_generator.state = state["numpy"]


APART_KEY = 0xA9A7  # the spawn key of acting apart's generators: a child of the seed that nothing else draws from


def _torch_states(device: torch.device) -> dict[str, torch.Tensor]:
    states = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(device)
    return states


def _set_torch_states(states: Mapping[str, Any], device: torch.device) -> None:
    torch.set_rng_state(torch.as_tensor(states["torch"], dtype=torch.uint8))
    if "cuda" in states and device.type == "cuda":
        torch.cuda.set_rng_state(torch.as_tensor(states["cuda"], dtype=torch.uint8), device)


class ApartRandomness:
    """The random generators of acting apart from training (``act(independent=True)`` without ``deterministic``:
    exploration, sampling): a numpy generator and torch (and CUDA) generator states of its own, swapped in for that
    acting and out again, so that a seeded run trains the same whether it is evaluated with exploration or not, and
    however often. They start from the agent's ``seed`` (a child of its seed sequence that nothing else draws from;
    fresh entropy without a seed) at the first such act, and checkpoints keep them. Torch's generators are the
    process's: workers acting in threads on a shared model should act apart deterministically (as periodic
    evaluation does), or one thread's swap reaches into another's draws."""

    def __init__(self, seed: int | None, device: torch.device) -> None:
        self.seed, self.device = seed, device
        self.rng: np.random.Generator | None = None
        self.torch: dict[str, Any] = {}  # their torch (and CUDA) generator states, between two acts

    @contextlib.contextmanager
    def swapped_in(self) -> Iterator[np.random.Generator]:
        """The apart generators in place of training's for the block: torch's swapped, numpy's handed out."""
        training = _torch_states(self.device)
        if self.rng is None:
            sequence = np.random.SeedSequence(self.seed, spawn_key=(APART_KEY,))
            self.rng = np.random.default_rng(sequence)
            seed = int(sequence.generate_state(1, np.uint64)[0] >> 1)
            torch.default_generator.manual_seed(seed)
            if self.device.type == "cuda":
                torch.cuda.default_generators[self.device.index or torch.cuda.current_device()].manual_seed(seed)
        else:
            _set_torch_states(self.torch, self.device)
        try:
            yield self.rng
        finally:
            self.torch = _torch_states(self.device)
            _set_torch_states(training, self.device)

    def state_dict(self) -> dict[str, Any] | None:
        if self.rng is None:
            return None
        return {"numpy": copy.deepcopy(self.rng.bit_generator.state), **self.torch}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        """Continue from ``state`` (of ``state_dict``); None (not used yet, or a checkpoint of older code): they start
        over from the seed at the next act apart."""
        self.rng, self.torch = None, {}
        if state is not None:
            self.rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(APART_KEY,)))
            self.rng.bit_generator.state = state["numpy"]
            self.torch = {key: value for key, value in state.items() if key != "numpy"}


def state_dicts(components: Mapping[str, Any]) -> dict[str, Any]:
    """Every component's ``state_dict()`` by name."""
    return {name: component.state_dict() for name, component in components.items()}


def load_torch_state_dicts(components: Mapping[str, Any], states: Mapping[str, Any]) -> None:
    """Modules' or optimizers' state dicts back from a checkpoint, numpy arrays turned into tensors again."""
    for name, component in components.items():
        component.load_state_dict(_tensors_in(states[name]))


def check_module_states(modules: Mapping[str, Any], states: Mapping[str, Any]) -> None:
    """Each module's saved state has its parameters and buffers, by name and shape: a ValueError naming the first
    that differs, before anything is loaded (torch's own load copies the tensors that fit before it raises)."""
    for name, module in modules.items():
        if name not in states:
            raise ValueError(f"the checkpoint has no state of the agent's '{name}'")
        own, saved = module.state_dict(), states[name]
        if set(own) != set(saved):
            differ = sorted(set(own) ^ set(saved))
            shown = ", ".join(differ[:5])
            raise ValueError(f"the checkpoint's '{name}' has other parameters than this agent's: {shown}")
        for key, tensor in own.items():
            shape = tuple(getattr(saved[key], "shape", ()))
            if shape != tuple(tensor.shape):
                raise ValueError(
                    f"the checkpoint's '{name}.{key}' has shape {list(shape)}, this agent's {list(tensor.shape)} "
                    "(a checkpoint of another network or spec)"
                )


def check_kind(state: dict[str, Any], kind: str) -> None:
    """A checkpoint of another kind of agent is refused before anything is loaded."""
    saved = state.get("agent", kind)
    if saved != kind:
        raise ValueError(f"the checkpoint is of a '{saved}' agent; it cannot be restored into a '{kind}' one")


def _tensors_in(tree: Any) -> Any:
    """Optimizer/module state dicts come back from checkpoints with numpy arrays where tensors were packed."""
    if isinstance(tree, np.ndarray):
        return torch.from_numpy(tree)
    if isinstance(tree, dict):
        return {key: _tensors_in(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_tensors_in(value) for value in tree]
    return tree
