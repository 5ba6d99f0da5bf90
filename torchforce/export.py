"""Exporting an agent's acting policy: a module that maps a batch of states to the agent's deterministic actions,
saved as TorchScript or ONNX, to act without torchforce (a robot, a game server, onnxruntime in a browser)::

    from torchforce.export import export_policy

    export_policy(agent, "policy.onnx")  # the format from the suffix (.onnx; .pt for TorchScript), or format=...

The module computes what ``agent.act(states, deterministic=True, independent=True)`` does for a batch:

- Inputs: one tensor per state, in the order of the agent's state names (sorted; a single state is ``state``),
  each ``[batch, *shape]`` (any batch size): float32 for float states, int64 for int states, bool for bool states.
- The state preprocessing the agent applies when it acts is part of the module: ``clip``, ``divide``,
  ``flatten``, ``expand_dims``, ``standardize``, ``normalize``, ``grayscale``, and ``running_standardize`` with
  ``reset_after_batch`` false (a run-long normalizer, as SB3's VecNormalize) with its statistics frozen as they are at
  export, as ``act(..., independent=True)`` applies them (SB3 users save VecNormalize's statistics beside the model
  for the same reason).
- Outputs: one tensor per action, in the order of the action names (a single action is ``action``), each
  ``[batch, *shape]``: int64 for int actions (the mode: the argmax of a categorical's logits, of a Q-learning
  agent's Q-values), bool for bool actions, float32 for float actions (a Gaussian's mean clipped into the action's
  bounds, a Beta's mean scaled into them, the deterministic mu(s) of DDPG and NAF). With one action the module
  returns that tensor; with several, a tuple in name order.
- An agent with ``mixed_precision`` (bfloat16) exports in float32, its weights as they are stored, to run anywhere;
  its actions then differ from ``act``'s where bfloat16's rounding decided one (a few in a thousand states for a
  small discrete policy), and an ``ExportWarning`` says so.

Refused with an ``ExportError`` that says why: agents without a policy network (``random``, ``constant``),
recurrent networks (their state would have to go in and out at every step), and state preprocessing that keeps
state from step to step (``sequence``; ``running_standardize`` with per-episode statistics, its default), that torch
cannot reproduce exactly
(``image_resize`` resamples with Pillow) or that is the user's own class.

The names, order, shapes and dtypes of the inputs and outputs travel with the file as JSON (``describe``): in
TorchScript as the extra file ``torchforce.json`` (``torch.jit.load(path, _extra_files={"torchforce.json": ""})``),
in ONNX as the metadata property ``torchforce``. ONNX inputs and outputs are named after the states and actions
(``states/NAME`` and ``actions/NAME`` when a state and an action share a name).

TorchScript is ``torch.jit.trace``, which torch has deprecated in favour of ``torch.export``; ONNX goes through
``torch.onnx.export``'s ``torch.export``-based exporter, which needs the ``onnx`` and ``onnxscript`` packages.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import io
import json
import logging
import os
import re
import secrets
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from torchforce.agents import Agent
from torchforce.core import preprocessors as steps
from torchforce.core.named import NamedModules
from torchforce.core.networks import set_autocast
from torchforce.core.policy import Policy
from torchforce.durable import unwritable
from torchforce.spec import StateSpec

FORMATS = {"torchscript": ".pt", "onnx": ".onnx"}
SUFFIXES = {".pt": "torchscript", ".ts": "torchscript", ".onnx": "onnx"}
METADATA = "torchforce.json"  # the TorchScript extra file; ONNX's metadata property is "torchforce"
ONNX_OPSET = 18
TORCH_DTYPES = {"float": torch.float32, "int": torch.int64, "bool": torch.bool, "uint8": torch.uint8}
DTYPE_NAMES = {"float": "float32", "int": "int64", "bool": "bool", "uint8": "uint8"}  # as numpy and ONNX name them
EXAMPLE_BATCH = 2  # tracing and torch.export specialize a batch of 1; 2 keeps the batch dimension free


class ExportWarning(UserWarning):
    """What an export does differently from the agent (a mixed-precision policy exports in float32)."""


class ExportError(ValueError):
    """An agent, format or file that cannot be exported as asked."""


# ---------------------------------------------------------------------------------------------- the module


class ActingPolicy(nn.Module):
    """The agent's deterministic acting path as a self-contained module: ``forward(*states) -> action`` (one
    action) or a tuple of actions (several); see the module doc. It holds a copy of the agent's policy on the CPU,
    in eval mode: later training of the agent does not change it."""

    def __init__(self, agent: Agent) -> None:
        super().__init__()
        policy = getattr(agent, "policy", None)
        if not isinstance(policy, Policy):
            raise ExportError(f"the {agent.name} agent has no policy network to export: it acts without one")
        if policy.network.internals:
            raise ExportError(
                f"the {agent.name} agent's network is recurrent (its internal state "
                f"{', '.join(sorted(policy.network.internals))} carries from step to step): exporting recurrent "
                "policies is not supported"
            )
        self.state_specs: dict[str, StateSpec] = dict(agent.states_spec)
        self.action_specs = dict(agent.actions_spec)
        preprocessing = getattr(agent, "preprocessing", {}) or {}
        self.preprocessing = NamedModules(
            {name: _torch_preprocessing(preprocessing.get(name), name) for name in self.state_specs}
        )
        self.policy = copy.deepcopy(policy).to("cpu").requires_grad_(False)
        if any(getattr(module, "autocast_dtype", None) is not None for module in self.policy.modules()):
            warnings.warn(
                f"the {agent.name} agent acts in bfloat16 (mixed_precision) and its policy exports in float32, so "
                "a few of the exported policy's actions can differ from the agent's",
                ExportWarning,
                stacklevel=3,
            )
        set_autocast(self.policy, None)  # a mixed-precision agent's policy exports in float32, as it is stored
        self.eval()  # as the agent acts: dropout off, batch normalization with its running statistics

    @property
    def state_names(self) -> list[str]:
        return list(self.state_specs)

    @property
    def action_names(self) -> list[str]:
        return list(self.action_specs)

    def forward(self, *states: Tensor) -> Tensor | tuple[Tensor, ...]:
        inputs = {name: self.preprocessing[name](state) for name, state in zip(self.state_names, states, strict=True)}
        embedding, _ = self.policy.network(inputs, {})
        actions = tuple(head.sample(head(embedding), True) for head in self.policy.heads.values())
        return actions[0] if len(actions) == 1 else actions

    def example_inputs(self, batch: int = EXAMPLE_BATCH) -> tuple[Tensor, ...]:
        """Zeros of every state's shape and dtype, ``batch`` rows: what tracing and ``torch.export`` run on."""
        return tuple(
            torch.zeros((batch, *spec.shape), dtype=TORCH_DTYPES[spec.type]) for spec in self.state_specs.values()
        )

    def varied_inputs(self, batch: int, seed: int = 0) -> tuple[Tensor, ...]:
        """Random states of every state's shape and dtype (normal floats, ints in their range, any bytes, fair
        bools), to check what was traced on other values and another batch size."""
        generator = torch.Generator().manual_seed(seed)
        inputs = []
        for spec in self.state_specs.values():
            shape = (batch, *spec.shape)
            if spec.type == "float":
                inputs.append(torch.randn(shape, generator=generator))
            elif spec.type == "int":
                inputs.append(torch.randint(0, spec.num_values or 1, shape, generator=generator))
            elif spec.type == "uint8":
                inputs.append(torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8))
            else:
                inputs.append(torch.rand(shape, generator=generator) < 0.5)
        return tuple(inputs)

    def describe(self) -> dict[str, Any]:
        """The inputs and outputs: names (ONNX's), state and action names, shapes without the batch, dtypes."""
        inputs, outputs = onnx_names(self.state_names, self.action_names)
        return {
            "format_version": 1,
            "inputs": [
                {"name": onnx, "state": name, "shape": list(spec.shape), "dtype": DTYPE_NAMES[spec.type]}
                for onnx, (name, spec) in zip(inputs, self.state_specs.items(), strict=True)
            ],
            "outputs": [
                {"name": onnx, "action": name, "shape": list(spec.shape), "dtype": DTYPE_NAMES[spec.type]}
                for onnx, (name, spec) in zip(outputs, self.action_specs.items(), strict=True)
            ],
            "single_output": len(self.action_specs) == 1,
        }


def onnx_names(states: list[str], actions: list[str]) -> tuple[list[str], list[str]]:
    """ONNX input and output names: the state and action names, prefixed only where the two share a name."""
    if set(states) & set(actions):
        return [f"states/{name}" for name in states], [f"actions/{name}" for name in actions]
    return list(states), list(actions)


# ---------------------------------------------------------------------------------------------- preprocessing


class _Clip(nn.Module):
    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.low, self.high = low, high

    def forward(self, x: Tensor) -> Tensor:
        if x.is_floating_point():
            return x.clamp(self.low, self.high)
        return x.double().clamp(self.low, self.high).to(x.dtype)  # numpy clips ints in float and casts back


class _Divide(nn.Module):
    scale: Tensor

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))

    def forward(self, x: Tensor) -> Tensor:
        return x.float() / self.scale


def _rows(x: Tensor) -> Tensor:
    """``x`` as one flat row an instance, ``[batch, -1]``: a scalar state's batch too, as numpy's reshape."""
    return x.flatten(1) if x.dim() > 1 else x.unsqueeze(1)


class _Flatten(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return _rows(x)


class _ExpandDims(nn.Module):
    def __init__(self, axis: int) -> None:
        super().__init__()
        self.axis = axis + 1 if axis >= 0 else axis  # the state's axis, past the batch dimension

    def forward(self, x: Tensor) -> Tensor:
        return x.unsqueeze(self.axis)


class _Standardize(nn.Module):
    def __init__(self, across_batch: bool) -> None:
        super().__init__()
        self.across_batch = across_batch

    def forward(self, x: Tensor) -> Tensor:
        x = x.float()
        if not self.across_batch and x.dim() == 1:  # a scalar state: each instance is its own mean (numpy's 0)
            return torch.zeros_like(x)
        dims = list(range(x.dim())) if self.across_batch else list(range(1, x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        std = (x - mean).square().mean(dim=dims, keepdim=True).sqrt()  # the population deviation, as numpy's
        return (x - mean) / std.clamp_min(steps.EPSILON)


class _Normalize(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        x = x.float()
        flat = _rows(x)
        shape = [-1] + [1] * (x.dim() - 1)
        low, high = flat.min(dim=1).values.view(shape), flat.max(dim=1).values.view(shape)
        return (x - low) / (high - low + steps.EPSILON)


class _Grayscale(nn.Module):
    weights: Tensor

    def __init__(self, weights: tuple[float, ...], remove_rank: bool) -> None:
        super().__init__()
        self.register_buffer("weights", torch.tensor(weights, dtype=torch.float32))
        self.remove_rank = remove_rank

    def forward(self, x: Tensor) -> Tensor:
        gray = x.float() @ self.weights
        return gray if self.remove_rank else gray.unsqueeze(-1)


class _FrozenStandardize(nn.Module):
    """``running_standardize``'s shared statistics as they were at export: ``(x - mean) / std`` in float64, then
    float32, as numpy computes it; without statistics yet, the states as float32."""

    mean: Tensor
    std: Tensor

    def __init__(self, statistics: tuple[np.ndarray, np.ndarray] | None) -> None:
        super().__init__()
        mean, std = (np.zeros(()), np.ones(())) if statistics is None else statistics
        self.register_buffer("mean", torch.from_numpy(np.asarray(mean, dtype=np.float64)))
        self.register_buffer("std", torch.from_numpy(np.asarray(std, dtype=np.float64)))

    def forward(self, x: Tensor) -> Tensor:
        return ((x.double() - self.mean) / self.std).float()


def _frozen_standardize(step: steps.RunningStandardize) -> nn.Module | None:
    """The step with its statistics frozen; None for per-episode statistics, which cannot be."""
    return None if step.reset_after_batch else _FrozenStandardize(step.frozen_statistics())


TORCH_STEPS: dict[type, Callable[[Any], nn.Module | None]] = {
    steps.Clip: lambda step: _Clip(step.min_value, step.max_value),
    steps.Divide: lambda step: _Divide(step.scale),
    steps.Flatten: lambda step: _Flatten(),
    steps.ExpandDims: lambda step: _ExpandDims(step.axis),
    steps.Standardize: lambda step: _Standardize(step.across_batch),
    steps.Normalize: lambda step: _Normalize(),
    steps.Grayscale: lambda step: _Grayscale(step.weights, step.remove_rank),
    steps.RunningStandardize: _frozen_standardize,
}
WHY_NOT = {
    steps.Sequence: "it stacks the last frames of each episode (state kept from step to step)",
    steps.RunningStandardize: (
        "its statistics are each episode's own and change with every step (reset_after_batch true, the default); "
        "with reset_after_batch false (statistics over the whole run) it exports, frozen as they are"
    ),
    steps.ImageResize: "it resamples with Pillow, which torch does not reproduce exactly",
}


def _torch_preprocessing(stack: steps.PreprocessorStack | None, state: str) -> nn.Module:
    """The state's preprocessing steps as torch modules (identity without any); an ExportError for a step that
    cannot be one."""
    if stack is None:
        return nn.Identity()
    modules = []
    for index, step in enumerate(stack):
        convert = TORCH_STEPS.get(type(step))
        module = None if convert is None else convert(step)
        if module is None:
            kind = type(step)
            why = WHY_NOT.get(kind, "it is not one of torchforce's stateless steps")
            raise ExportError(
                f"states_preprocessing of '{state}', step {index} ({kind.__name__}) cannot be exported: {why}. "
                f"Exportable steps: {', '.join(sorted(_spec_name(k) for k in TORCH_STEPS))}"
            )
        modules.append(module)
    return nn.Sequential(*modules)


def _spec_name(step: type) -> str:
    """A step's type as a spec writes it: ``ExpandDims`` -> ``expand_dims``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", step.__name__).lower()


# ---------------------------------------------------------------------------------------------- files


def export_format(path: str | Path, format: str | None = None) -> str:
    """The format to write: ``format`` when given (checked), else the one the file's suffix names."""
    if format is not None:
        if format not in FORMATS:
            raise ExportError(f"unknown export format '{format}': choose {' or '.join(FORMATS)}")
        return format
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ExportError(
            f"cannot tell the export format from '{path}': name it '.onnx' (ONNX) or '.pt' (TorchScript), or give "
            "the format"
        )
    return SUFFIXES[suffix]


def export_policy(agent: Agent, path: str | Path, *, format: str | None = None) -> Path:
    """Write ``agent``'s acting policy (``ActingPolicy``) to ``path`` as ``format`` ("torchscript" or "onnx"; by
    default from the suffix). The file appears only once it is complete; returns its path."""
    path = Path(path)
    format = export_format(path, format)
    if not path.parent.is_dir():
        raise ExportError(f"cannot write '{path}': the folder '{path.parent}' does not exist")
    if path.is_dir():
        raise ExportError(f"cannot write '{path}': it is a folder; name the file to write, '{path / path.name}'")
    reason = unwritable(path.parent)
    if reason is not None:
        raise ExportError(f"cannot write '{path}': the folder '{path.parent}' takes no new file ({reason})")
    module = ActingPolicy(agent)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        try:
            if format == "onnx":
                _save_onnx(module, partial)
            else:
                _save_torchscript(module, partial)
        except ExportError:
            raise
        except OSError as error:  # the file system's refusal (a full disk), not the exporter's
            raise ExportError(f"cannot write '{path}': {error.strerror or error}") from error
        except Exception as error:  # noqa: BLE001 - tracing fails on what a network does: its error says what
            exporter = "torch.onnx.export" if format == "onnx" else "torch.jit.trace"
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ExportError(f"{exporter} could not export the {agent.name} agent's policy: {first}") from error
        try:
            os.replace(partial, path)
        except OSError as error:
            raise ExportError(f"cannot write '{path}': {error.strerror or error}") from None
    finally:
        partial.unlink(missing_ok=True)
    return path


def _save_torchscript(module: ActingPolicy, path: Path) -> None:
    with warnings.catch_warnings():  # torch.jit.trace is deprecated upstream; the module doc says so once
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.jit")
        traced = torch.jit.trace(module, module.example_inputs())
    other = module.varied_inputs(EXAMPLE_BATCH + 3)
    with torch.no_grad():
        expected, got = module(*other), traced(*other)
    if not all(bool(torch.isfinite(a).all()) for a in _tensors(expected) if a.is_floating_point()):
        raise ExportError(
            "the policy's actions are not finite (NaN or infinite): its training diverged by this checkpoint; export "
            "an earlier one (--checkpoint best, or a STEP before it diverged)"
        )
    same = [torch.equal(a, b) for a, b in zip(_tensors(expected), _tensors(got), strict=True)]
    if not all(same):
        raise ExportError(
            f"the traced policy acts otherwise on {EXAMPLE_BATCH + 3} rows than the policy itself: the network "
            "seems to take the batch size as a constant, which tracing keeps"
        )
    serialized = io.BytesIO()  # written here, so that a file system's refusal is an OSError, not torch's RuntimeError
    torch.jit.save(traced, serialized, _extra_files={METADATA: json.dumps(module.describe())})
    path.write_bytes(serialized.getvalue())


def _tensors(output: Tensor | tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return output if isinstance(output, tuple) else (output,)


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Only errors from ``logger`` meanwhile (the ONNX exporter warns about every torchvision operator it skips)."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _save_onnx(module: ActingPolicy, path: Path) -> None:
    for package in ("onnx", "onnxscript"):
        try:
            importlib.import_module(package)
        except ImportError:
            raise ExportError(
                f"exporting ONNX needs the {package} package (torch.onnx's exporter): pip install 'torchforce[export]'"
            ) from None
    description = module.describe()
    batch = torch.export.Dim("batch", min=1)
    with warnings.catch_warnings(), _quiet("torch.onnx"):
        warnings.simplefilter("ignore", category=FutureWarning)  # torch.export's own deprecations of pytree names
        warnings.filterwarnings("ignore", message="# The axis name", category=UserWarning)  # all inputs: "batch"
        program = torch.onnx.export(
            module,
            module.example_inputs(),
            dynamo=True,
            input_names=[entry["name"] for entry in description["inputs"]],
            output_names=[entry["name"] for entry in description["outputs"]],
            dynamic_shapes=(tuple({0: batch} for _ in module.state_names),),  # forward(*states): one group
            opset_version=ONNX_OPSET,
            verbose=False,
        )
    if program is None:  # only the old TorchScript-based exporter returns nothing
        raise RuntimeError("torch.onnx.export returned no ONNX program")
    program.model.metadata_props["torchforce"] = json.dumps(description)
    program.save(str(path))
