"""State and reward preprocessors (docs/tensorforce-0.4.md, Preprocessors), spec keys ``states_preprocessing`` /
``reward_preprocessing``.

Numpy in, numpy out, batch first: ``process(batch [B, *shape], rows=None) -> [B, *processed_shape]``. ``rows``
says which per-row slots the batch rows belong to (default ``0..B-1``); ``sequence``, ``running_standardize`` and
``running_return_scale`` keep per-row state. Steps that compute values (standardize, running_standardize,
running_return_scale, normalize, grayscale, image_resize, divide) output float32; the others (sequence, clip,
flatten, expand_dims) keep the dtype. Preprocessed states are what the agent feeds its network and stores in memory.

Normalization as rl-baselines3-zoo's ``normalize: true`` (SB3's VecNormalize) does it: states
``[{"type": "running_standardize", "reset_after_batch": false}, {"type": "clip", "min_value": -10, "max_value":
10}]``, reward ``{"type": "running_return_scale"}`` (the agent's discount, clip 10). The state half differs
from VecNormalize only in its first samples: VecNormalize starts from a pseudo-sample of weight 1e-4 (mean 0,
variance 1) and divides by ``sqrt(var + 1e-8)`` of the population variance, running_standardize passes the first
state through and divides by ``max(std, 1e-6)`` of the sample variance; after n states their scales differ by
about ``sqrt(n / (n - 1))`` (``tests/core/test_normalization.py`` shows the numbers on HalfCheetah). Independent acting
(evaluation) processes states with ``process_frozen``: statistics of the whole run are applied as they are and
learn nothing, as VecNormalize with ``training=False``; steps with state of an episode work on copies of their own
(``PreprocessorStack.apart``); rewards are only processed when the agent observes.

2018 semantics (TensorForce 0.4.0-0.4.3, ``core/preprocessors/*.py``), kept: running_standardize passes an
episode's first state through raw, then standardizes with the sample variance and ``max(std, 1e-6)``, its
statistics cleared at every episode start when ``reset_after_batch``; standardize uses the population variance
and ``max(std, 1e-6)``; normalize ``(x - min) / (max - min + 1e-6)`` per instance; sequence repeats an episode's
first frame ``length`` times; grayscale sums ``weights * channels`` over the last axis. Deliberate deviations,
each where 2018 had a plain bug:

- More than one row (parallel environments, import_experience). 2018 only ever saw one: sequence asserted it, and
  running_standardize counted a batch as one sample while summing all its deviations. Here sequence keeps a buffer
  and running_standardize (with ``reset_after_batch``) statistics per row, each reset at that row's episode start.
- sequence with ``length > 2``: 2018's ring-buffer index was off by one, giving frames in the order ``t-1, t-2,
  ..., t-length+1, t`` (neither forward nor backward in time). Here frames run oldest to newest; for the default
  ``length=2`` both orders are ``t-1, t``, and to a network any fixed order is only a permutation of its inputs.
- image_resize: 2018 passed ``(width, height)`` where TensorFlow takes ``(height, width)``, so its output had
  ``width`` rows; here ``height`` is the rows. 2018's TF1 bilinear also sampled a grid shifted by half a pixel
  without antialiasing; Pillow's bilinear is centred and averages when downscaling.
- expand_dims with ``axis >= 0``: 2018 declared the axis inside the state but inserted it at that index of the
  batched tensor (one axis too early; broken unless it met the batch of one at axis 0). Here the output matches
  the declared shape.
- A single ``{"type": ...}`` states spec: 2018 built one stack and shared it, variables included, between all
  states; and it gave every step of a stack the unprocessed state shape, so running_standardize failed after a
  shape-changing step. Here every state gets its own stack and each step the shape it actually receives.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from torchforce.core.preprocessors.base import EPSILON, Bounds, Preprocessor, kind_name, row_indices
from torchforce.core.preprocessors.running import PRIOR_COUNT, RunningReturnScale, RunningStandardize
from torchforce.core.preprocessors.steps import (
    Clip,
    Divide,
    ExpandDims,
    Flatten,
    Grayscale,
    ImageResize,
    Normalize,
    Sequence,
    Standardize,
)
from torchforce.spec import SpecError, StateSpec, unknown_name_error, warn_spec
from torchforce.spec.checks import expect_elements
from torchforce.spec.errors import what_it_is
from torchforce.spec.registry import Registry

__all__ = [
    "EPSILON",
    "PREPROCESSORS",
    "PRIOR_COUNT",
    "Bounds",
    "Clip",
    "Divide",
    "ExpandDims",
    "Flatten",
    "Grayscale",
    "ImageResize",
    "Normalize",
    "Preprocessor",
    "PreprocessorStack",
    "RunningReturnScale",
    "RunningStandardize",
    "Sequence",
    "Standardize",
    "build_preprocessing",
    "build_reward_preprocessing",
    "build_stack",
    "kind_name",
    "processed_spec",
    "row_indices",
]

PREPROCESSORS = Registry(
    "preprocessor",
    {
        "clip": "torchforce.core.preprocessors.steps:Clip",
        "divide": "torchforce.core.preprocessors.steps:Divide",
        "expand_dims": "torchforce.core.preprocessors.steps:ExpandDims",
        "flatten": "torchforce.core.preprocessors.steps:Flatten",
        "grayscale": "torchforce.core.preprocessors.steps:Grayscale",
        "image_resize": "torchforce.core.preprocessors.steps:ImageResize",
        "normalize": "torchforce.core.preprocessors.steps:Normalize",
        "running_return_scale": "torchforce.core.preprocessors.running:RunningReturnScale",
        "running_standardize": "torchforce.core.preprocessors.running:RunningStandardize",
        "sequence": "torchforce.core.preprocessors.steps:Sequence",
        "standardize": "torchforce.core.preprocessors.steps:Standardize",
    },
    base="torchforce.core.preprocessors.base:Preprocessor",
)


class PreprocessorStack:
    """The steps for one state (or the reward), applied in order.

    ``unprocessed_spec`` is what the environment gives, ``processed_spec`` what comes out (shape replaced; type
    float after a value-computing step; bounds where known).
    """

    def __init__(self, preprocessors: list[Preprocessor], spec: StateSpec) -> None:
        self.preprocessors = list(preprocessors)
        self.unprocessed_spec = spec
        self.processed_spec = spec
        for preprocessor in self.preprocessors:
            self.processed_spec = processed_spec(preprocessor, self.processed_spec)

    def process(self, batch: np.ndarray, rows: Any = None, *, frozen: bool = False) -> np.ndarray:
        """The steps in order; ``frozen``: their ``process_frozen``, which learns no statistics (independent acting,
        evaluation)."""
        batch = np.asarray(batch)
        if batch.shape[1:] != self.unprocessed_spec.shape:
            raise ValueError(
                f"preprocessing of '{self.unprocessed_spec.name}' expects a batch of shape "
                f"[B, {', '.join(map(str, self.unprocessed_spec.shape))}], got {list(batch.shape)}"
            )
        for preprocessor in self.preprocessors:
            batch = preprocessor.process_frozen(batch, rows) if frozen else preprocessor.process(batch, rows)
        return batch

    def reset(self, rows: Any = None) -> None:
        for preprocessor in self.preprocessors:
            preprocessor.reset(rows)

    def start_episodes(self, rows: Any = None) -> None:
        """The reward stack's episode starts (see ``Preprocessor.start_episodes``)."""
        for preprocessor in self.preprocessors:
            preprocessor.start_episodes(rows)

    def apart(self) -> PreprocessorStack:
        """The stack for acting apart from the training rows: each step's ``apart`` (the steps it shares with this
        stack are this stack's: restart only the others' episodes)."""
        stack = copy.copy(self)
        stack.preprocessors = [preprocessor.apart() for preprocessor in self.preprocessors]
        return stack

    @property
    def keeps_episode_state(self) -> bool:
        """Whether a step keeps per-episode state (see ``Preprocessor.keeps_episode_state``)."""
        return any(preprocessor.keeps_episode_state for preprocessor in self.preprocessors)

    def state_dict(self) -> dict[str, Any]:
        return {str(index): preprocessor.state_dict() for index, preprocessor in enumerate(self.preprocessors)}

    def run_wide_loads(self, state: Mapping[str, Any]) -> list[tuple[Preprocessor, dict[str, Any]]]:
        """From the ``state`` of a stack of the same steps (``state_dict``), what its steps learned over a whole run:
        (step, the state dict to load into it) for ``running_standardize`` without ``reset_after_batch`` (its
        statistics) and ``running_return_scale`` (its statistics; each row's return starts at zero). What a warm
        start keeps: the networks it loads were trained on states and rewards these statistics scaled."""
        loads: list[tuple[Preprocessor, dict[str, Any]]] = []
        for index, step in enumerate(self.preprocessors):
            saved = dict(state[str(index)])
            if isinstance(step, RunningStandardize):
                # statistics of the whole run are one count, per-episode ones one per row (None: none yet)
                saved_run_wide = saved["count"] is not None and np.ndim(saved["count"]) == 0
                saved_per_row = saved["count"] is not None and np.ndim(saved["count"]) > 0
                if saved_per_row and not step.reset_after_batch or saved_run_wide and step.reset_after_batch:
                    there, here = ("per episode", "over the run") if saved_per_row else ("over the run", "per episode")
                    raise ValueError(
                        f"the checkpoint's running_standardize (step {index} of '{self.unprocessed_spec.name}') kept "
                        f"its statistics {there}, this one keeps them {here} (reset_after_batch)"
                    )
                if saved_run_wide:
                    loads.append((step, saved))
            elif isinstance(step, RunningReturnScale):
                loads.append((step, {**saved, "returns": []}))
        return loads

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if len(state) != len(self.preprocessors):
            raise ValueError(f"a state of {len(state)} preprocessors for a stack of {len(self.preprocessors)}")
        for index, preprocessor in enumerate(self.preprocessors):
            preprocessor.load_state_dict(state[str(index)])

    def __len__(self) -> int:
        return len(self.preprocessors)

    def __iter__(self):
        return iter(self.preprocessors)

    def __repr__(self) -> str:
        return (
            f"PreprocessorStack({self.preprocessors!r}, {self.unprocessed_spec.shape} -> {self.processed_spec.shape})"
        )


def processed_spec(preprocessor: Preprocessor, spec: StateSpec) -> StateSpec:
    """``spec`` after ``preprocessor``; raises ValueError when the step cannot process that shape."""
    shape = tuple(preprocessor.processed_shape(tuple(spec.shape)))
    low, high = preprocessor.processed_bounds(spec.min_value, spec.max_value)
    if preprocessor.produces_float:
        return replace(spec, shape=shape, type="float", num_values=None, min_value=low, max_value=high)
    return replace(spec, shape=shape, min_value=low, max_value=high)


def _type_name(entry: Any) -> Any:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping):
        return entry.get("type")
    return None


def _with_discount(entry: Any, discount: float) -> Any:
    """``entry`` with ``discount`` when it is a ``running_return_scale`` step that names none."""
    if PREPROCESSORS.canonical(_type_name(entry)) != "running_return_scale":
        return entry
    if isinstance(entry, str):
        return {"type": entry, "discount": discount}
    return entry if "discount" in entry else {**entry, "discount": discount}


def _create(entry: Any, spec: StateSpec, path: str) -> Preprocessor:
    if _type_name(entry) == "center":
        raise SpecError(
            f"{path}.type" if isinstance(entry, Mapping) else path,
            "preprocessor 'center' was never registered in TensorForce (0.3.5 configs name it, but it never ran)",
            hint="Use 'standardize' (per instance) or 'running_standardize' (running statistics).",
        )
    if isinstance(entry, Preprocessor):
        preprocessor = copy.deepcopy(entry)  # each state gets its own (stateful steps keep per-state buffers)
    else:
        preprocessor = PREPROCESSORS.create(entry, path, base=Preprocessor)
    if not isinstance(preprocessor, Preprocessor):
        raise SpecError(path, "not a Preprocessor", got=what_it_is(preprocessor), expected="a subclass of Preprocessor")
    return preprocessor


def build_stack(spec: Any, state: StateSpec, path: str) -> PreprocessorStack:
    """The stack for one state: ``spec`` is a list of steps or one step."""
    if isinstance(spec, list):
        entries, paths = spec, [f"{path}[{i}]" for i in range(len(spec))]
    else:
        entries, paths = [spec], [path]
    preprocessors, current = [], state
    for entry, entry_path in zip(entries, paths, strict=True):
        preprocessor = _create(entry, current, entry_path)
        try:
            current = processed_spec(preprocessor, current)
        except ValueError as error:
            raise SpecError(
                entry_path,
                f"{kind_name(preprocessor)} cannot process '{state.name}' of shape {list(current.shape)}: {error}",
            ) from None
        expect_elements(
            math.prod(current.shape),
            entry_path,
            f"'{state.name}' after {kind_name(preprocessor)}, of shape {list(current.shape)},",
        )
        preprocessors.append(preprocessor)
    return PreprocessorStack(preprocessors, state)


def build_preprocessing(
    spec: Any, states: Mapping[str, StateSpec], *, path: str = "states_preprocessing"
) -> dict[str, PreprocessorStack]:
    """The preprocessing stack of each state that has one, keyed by state name.

    ``spec`` is None (``{}``), a list of steps or one ``{"type": ...}`` step (the same stack, built separately,
    for every state), or a dict ``{state_name: list or step or None}``.
    """
    if spec is None:
        return {}
    if isinstance(spec, Mapping) and "type" not in spec:
        stacks = {}
        for name, entry in spec.items():
            if name not in states:
                raise unknown_name_error(f"{path}.{name}", "state", name, states)
            if entry is not None and entry != []:
                stacks[name] = build_stack(entry, states[name], f"{path}.{name}")
        return stacks
    if spec == []:
        return {}
    return {name: build_stack(spec, state, path) for name, state in states.items()}


def build_reward_preprocessing(
    spec: Any, *, path: str = "reward_preprocessing", discount: float | None = None
) -> PreprocessorStack | None:
    """The reward's stack (rewards are scalars, batches ``[B]``), or None without a spec.

    Steps must keep the reward a scalar. Per-instance ``standardize`` and ``normalize`` turn every scalar reward
    into 0, so they warn. A ``running_return_scale`` step that leaves out its ``discount`` takes ``discount`` (the
    agent's, as rl-baselines3-zoo gives VecNormalize the algorithm's gamma) where one is given.
    """
    if spec is None or spec == []:
        return None
    if isinstance(spec, Mapping) and "type" not in spec:
        raise SpecError(path, "not a reward preprocessing spec", got=spec, expected='a list of steps or {"type": ...}')
    if discount is not None:
        spec = (
            [_with_discount(entry, discount) for entry in spec]
            if isinstance(spec, list)
            else _with_discount(spec, discount)
        )
    stack = build_stack(spec, StateSpec("reward", (), "float"), path)
    if stack.processed_spec.shape != ():
        raise SpecError(
            path,
            f"reward preprocessing must keep the reward a scalar, not make it {list(stack.processed_spec.shape)}",
            got=spec,
        )
    for preprocessor in stack:
        if isinstance(preprocessor, (Normalize, Standardize)) and not getattr(preprocessor, "across_batch", False):
            warn_spec(
                f"{path}: per-instance {kind_name(preprocessor)} maps every scalar reward to 0; use "
                "running_standardize or running_return_scale."
            )
        elif isinstance(preprocessor, (Normalize, Standardize)):
            warn_spec(
                f"{path}: {kind_name(preprocessor)} with across_batch=true works on one step's rewards at a time (one "
                "per environment), and maps the reward of a single environment to 0; use running_standardize or "
                "running_return_scale."
            )
    return stack
