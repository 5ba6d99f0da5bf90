"""Recorded experience as memory rows (``import_experience``), checked step by step as ``act``/``observe`` would
check it: every error names the step and the key. Also how a value is checked as an action (``action_value``), which
the constant agent uses for its configured actions."""

from __future__ import annotations

import copy
import math
import numbers
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from torchforce.agents.batches import STATE_DTYPES, Batch
from torchforce.spec import ActionSpec, SpecError, did_you_mean, unknown_name_error
from torchforce.spec.errors import Words, what_it_is


def _expected(action: ActionSpec) -> str:
    if action.type == "int":
        expected = f"an integer in [0, {action.num_values - 1}]"
    elif action.type == "bool":
        expected = "true or false"
    else:
        expected = f"a number in [{action.min_value}, {action.max_value}]" if action.bounded else "a finite number"
    return expected + (f", or a list of shape {list(action.shape)} of them" if action.shape else "")


def _fits_type(array: np.ndarray, kind: str) -> bool:
    if kind == "bool":
        return array.dtype == np.bool_
    if kind == "int":
        return array.dtype.kind in "iu" or (array.dtype.kind == "f" and bool(np.all(np.mod(array, 1) == 0)))
    return array.dtype.kind in "iuf" and bool(np.all(np.isfinite(array)))


def _in_range(array: np.ndarray, action: ActionSpec) -> bool:
    if array.size == 0:
        return True
    if action.type == "int":
        return bool(0 <= array.min() and array.max() < action.num_actions)
    if action.bounded:
        return bool(action.min_value <= array.min() and array.max() <= action.max_value)
    return True


def action_value(value: Any, action: ActionSpec, path: str) -> np.ndarray:
    """``value`` as a valid action for ``action``, or a SpecError at ``path``: one value (used for every element of
    a shaped action) or an array of the action's shape, of its type (an integer in [0, num_actions), true/false, or
    a finite number within the bounds)."""
    try:
        array = np.asarray(value)
    except ValueError:  # a ragged nested list
        array = np.asarray(None)
    if array.shape not in ((), action.shape):
        shape = f"of shape {list(action.shape)}" if action.shape else "a scalar"
        raise SpecError(path, f"action '{action.name}' is {shape}", got=value, expected=_expected(action))
    if not _fits_type(array, action.type):
        what = {"int": "not an integer", "bool": "not a boolean", "float": "not a finite number"}[action.type]
        raise SpecError(path, what, got=value, expected=_expected(action))
    if not _in_range(array, action):
        raise SpecError(path, "out of range", got=value, expected=_expected(action))
    return np.broadcast_to(array.astype(STATE_DTYPES[action.type]), action.shape)


def action_column(values: list[Any], action: ActionSpec, path: Callable[[int], str]) -> np.ndarray:
    """One action of many steps as an array ``[steps, *shape]``, checked in bulk; only when something is wrong are
    the steps checked one by one, so the error names the first bad step (``path(step)``). (A bool among numbers
    would turn into 0/1 in bulk, so steps that are bools go the slow way too.)"""
    try:
        array = np.asarray(values)
    except ValueError:
        array = None
    if (
        array is not None
        and (action.type == "bool" or not any(isinstance(value, (bool, np.bool_)) for value in values))
        and array.shape == (len(values), *action.shape)
        and _fits_type(array, action.type)
        and _in_range(array, action)
    ):
        return array.astype(STATE_DTYPES[action.type])
    return np.stack([action_value(value, action, path(step)) for step, value in enumerate(values)])


# ---------------------------------------------------------------------------------------------- steps

STEP_KEYS = ("states", "actions", "terminal", "reward")
STEP_EXAMPLE = '{"states": ..., "actions": ..., "terminal": 0, "reward": 1.0}'


def _steps(experiences: Any) -> tuple[list[Mapping[str, Any]], Callable[[int, str], str]]:
    """The steps of ``experiences`` as a list of dicts, checked for their keys, and how to name a step's key in an
    error: ``experiences[3].reward`` for a list of steps, ``experiences.reward[3]`` for a dict of lists."""
    accepted = (*STEP_KEYS, "internals")
    if isinstance(experiences, Mapping):
        for key in experiences:
            _check_key(key, accepted, f"experiences.{key}")
        for key in STEP_KEYS:
            if key not in experiences:
                raise SpecError(
                    "experiences",
                    f"needs '{key}'",
                    got=Words(f"a dict with {_keys(experiences)}"),
                    expected="a dict of lists with " + ", ".join(STEP_KEYS),
                )
        count = _length(experiences["reward"], "experiences.reward")
        for key in experiences:
            if _length(experiences[key], f"experiences.{key}") != count:
                raise SpecError(
                    f"experiences.{key}", f"has {_steps_count(len(experiences[key]))} and 'reward' has {count}"
                )
        steps: list[Mapping[str, Any]] = [{key: experiences[key][i] for key in experiences} for i in range(count)]
        return steps, lambda step, key: f"experiences.{key}[{step}]"
    if not isinstance(experiences, (list, tuple)):
        raise SpecError(
            "experiences",
            "not a list of steps or a dict of lists",
            got=what_it_is(experiences),
            expected=f"a list of dicts like {STEP_EXAMPLE}",
        )
    for step, experience in enumerate(experiences):
        if not isinstance(experience, Mapping):
            raise SpecError(
                f"experiences[{step}]", "not a step", got=what_it_is(experience), expected=f"a dict like {STEP_EXAMPLE}"
            )
        for key in experience:
            _check_key(key, accepted, f"experiences[{step}].{key}")
        for key in STEP_KEYS:
            if key not in experience:
                raise SpecError(
                    f"experiences[{step}]", f"step {step} needs '{key}'", got=Words(f"a step with {_keys(experience)}")
                )
    return list(experiences), lambda step, key: f"experiences[{step}].{key}"


def _steps_count(count: int) -> str:
    return f"{count} step" + ("" if count == 1 else "s")


def _keys(mapping: Mapping[str, Any]) -> str:
    return ("keys " + ", ".join(map(str, mapping))) if mapping else "no keys"


def _check_key(key: Any, accepted: tuple[str, ...], path: str) -> None:
    if key not in accepted:
        guess = did_you_mean(str(key), accepted)
        hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + ", ".join(accepted) + "."
        raise SpecError(path, "unknown key for a step", hint=hint)


def _length(values: Any, path: str) -> int:
    try:
        return len(values)
    except TypeError:
        raise SpecError(path, "not a list with one value per step", got=what_it_is(values)) from None


def _terminal(values: list[Any], path: Callable[[int], str]) -> np.ndarray:
    """Terminals as int8: 0/false, 1/true or 2 (a truncation), as ``observe`` takes them."""
    for step, value in enumerate(values):
        valid = isinstance(value, (bool, np.bool_, numbers.Integral)) and 0 <= int(value) <= 2
        if not valid and isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
            valid = value in (0.0, 1.0, 2.0)  # an integer stored as a float (an array of floats)
        if not valid:
            raise SpecError(path(step), "not a terminal", got=value, expected="0/false, 1/true or 2 (truncated)")
    return np.asarray(values, dtype=np.int8).reshape(-1)


def _reward(values: list[Any], path: Callable[[int], str]) -> np.ndarray:
    for step, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise SpecError(path(step), "not a reward", got=value, expected="a finite number")
    return np.asarray(values, dtype=np.float32).reshape(-1)


def _step_states(steps: list[Mapping[str, Any]], to_batch: Any, path: Callable[[int, str], str]) -> Batch:
    rows = []
    for step, experience in enumerate(steps):
        try:
            batch, batched = to_batch(experience["states"])
        except (TypeError, ValueError) as error:
            raise SpecError(path(step, "states"), f"not a state of this agent: {error}") from None
        if batched:
            raise SpecError(
                path(step, "states"),
                "holds a batch of states; a step has one state",
                got=Words(f"{next(iter(batch.values())).shape[0]} rows"),
            )
        rows.append(batch)
    return {name: np.concatenate([row[name] for row in rows]) for name in rows[0]}


def _step_actions(
    steps: list[Mapping[str, Any]], actions: dict[str, ActionSpec], single_action: bool, path: Callable[[int, str], str]
) -> Batch:
    if not single_action:  # named actions: a dict per step with every action, and no others
        for step, experience in enumerate(steps):
            given = experience["actions"]
            missing = [name for name in actions if not isinstance(given, Mapping) or name not in given]
            if missing:
                raise SpecError(
                    path(step, "actions"),
                    f"needs a value for action '{missing[0]}'",
                    got=given if isinstance(given, Mapping) else what_it_is(given),
                )
            for name in given:
                if name not in actions:
                    raise unknown_name_error(f"{path(step, 'actions')}.{name}", "action", name, actions)
    columns = {}
    for name, action in actions.items():
        if single_action:
            values = [experience["actions"] for experience in steps]
            where = _action_path(path, None)
        else:
            values = [experience["actions"][name] for experience in steps]
            where = _action_path(path, name)
        columns[f"actions/{name}"] = action_column(values, action, where)
    return columns


def _action_path(path: Callable[[int, str], str], name: str | None) -> Callable[[int], str]:
    """How to name a step's action in an error: ``path(step, "actions")``, then ``.name`` for a named action."""
    if name is None:
        return lambda step: path(step, "actions")
    return lambda step: f"{path(step, 'actions')}.{name}"


def _step_internals(
    steps: list[Mapping[str, Any]], internals: dict[str, tuple[int, ...]], path: Callable[[int, str], str]
) -> Batch:
    columns: dict[str, list[np.ndarray]] = {name: [] for name in internals}
    for step, experience in enumerate(steps):
        given = experience.get("internals") or {}
        if not isinstance(given, Mapping):
            raise SpecError(path(step, "internals"), "not a dict of the network's internals", got=what_it_is(given))
        for name in given:
            if name not in internals:
                known = ", ".join(internals) if internals else "none (the network is not recurrent)"
                raise SpecError(f"{path(step, 'internals')}.{name}", "unknown internal", hint=f"Known: {known}.")
        for name, shape in internals.items():
            value = np.asarray(given.get(name, np.zeros(shape)), dtype=np.float32)
            if value.shape != shape:
                raise SpecError(
                    f"{path(step, 'internals')}.{name}",
                    f"has shape {list(value.shape)}",
                    expected=f"shape {list(shape)}",
                )
            columns[name].append(value)
    return {f"internals/{name}": np.stack(values) for name, values in columns.items()}


def experience_batch(
    experiences: Any,
    to_batch: Any,
    actions: dict[str, ActionSpec],
    single_action: bool,
    internals: dict[str, tuple[int, ...]],
    preprocessing: dict[str, Any],
    process: Callable[[Batch], Batch],
) -> Batch | None:
    """Recorded steps (a list of dicts, or a dict of lists, with ``states``, ``actions``, ``terminal``, ``reward``
    and optionally ``internals``) as memory rows; ``to_batch`` turns one step's states into a batch of one, and
    states are preprocessed and given their next states by ``experience_states``. An open end is marked
    terminal 2. None when there are no steps.

    Everything is checked as ``act``/``observe`` would: a SpecError names the step and the key (``experiences[3]
    .actions``): missing and unknown keys, states of the wrong shape, actions outside their type and range (int
    actions in [0, num_actions), bools, finite floats within bounds), terminals other than 0/false, 1/true and 2,
    rewards that are not finite numbers, internals of the wrong shape."""
    steps, path = _steps(experiences)
    if not steps:
        return None
    states = _step_states(steps, to_batch, path)
    batch = {**_step_actions(steps, actions, single_action, path), **_step_internals(steps, internals, path)}
    batch["terminal"] = _terminal([experience["terminal"] for experience in steps], lambda s: path(s, "terminal"))
    batch["reward"] = _reward([experience["reward"] for experience in steps], lambda s: path(s, "reward"))
    unfinished = batch["terminal"][-1] == 0
    if unfinished:
        batch["terminal"][-1] = 2
    _warn_of_truncations(batch["terminal"], unfinished)
    states, following = experience_states(states, batch["terminal"], preprocessing, process)
    for name in states:
        batch[f"states/{name}"], batch[f"next_states/{name}"] = states[name], following[name]
    for name in internals:  # the recurrent state the next step acted from (recorded, it is what acting left)
        batch[f"next_internals/{name}"] = _following(batch[f"internals/{name}"], batch["terminal"])
    return batch


def _warn_of_truncations(terminal: np.ndarray, unfinished: bool) -> None:
    """Say that steps cut short (terminal 2) bootstrap from a stand-in, as ``observe`` says it without next_states."""
    cut = int(np.count_nonzero(terminal == 2))
    if not cut:
        return
    truncations = cut - int(unfinished)
    which = [f"{truncations} time-limit truncation" + ("s" * (truncations != 1))] if truncations else []
    which += ["the last step, of an episode the recording leaves unfinished"] if unfinished else []
    warnings.warn(
        f"imported experience: {_steps_count(cut)} {'ends' if cut == 1 else 'end'} with terminal 2 "
        f"({' and '.join(which)}); a recording holds "
        "no state after "
        "them, so each one's own state stands in for the next state that learning targets bootstrap from (a "
        "value that feeds into itself). Leave out an unfinished last episode where you can.",
        stacklevel=5,
    )


def experience_states(
    states: Batch, terminal: np.ndarray, preprocessing: dict[str, Any], process: Callable[[Batch], Batch]
) -> tuple[Batch, Batch]:
    """The (preprocessed) states of imported steps and their next states: a step's next state is the following
    step's state within its episode; a step that ends one (terminal != 0) stands in its own.

    ``process`` (the agent's preprocessing) takes all steps as one batch, unless a preprocessor keeps per-episode
    state (``sequence``, ``running_standardize`` resetting per episode): one batch would stack frames, or pool
    statistics, across steps and episodes as if they were parallel rows. Then
    the steps run through a copy of the agent's preprocessors, each episode as a row of its own that starts over
    (as a new episode does in acting), step after step in order; the agent's own preprocessors are left untouched
    (their sequence buffers and running statistics)."""
    if any(stack.keeps_episode_state for stack in preprocessing.values()):
        processed = _by_episode(states, terminal, preprocessing)
    else:
        processed = process(states)
    return processed, {name: _following(values, terminal) for name, values in processed.items()}


def _following(values: np.ndarray, terminal: np.ndarray) -> np.ndarray:
    """Each step's next row within its episode; a step that ends one (terminal != 0), or the last, its own."""
    following = np.concatenate([values[1:], values[-1:]])
    ended = terminal != 0
    following[ended] = values[ended]  # nothing follows across an episode's end
    return following


def _by_episode(states: Batch, terminal: np.ndarray, preprocessing: dict[str, Any]) -> Batch:
    count = len(terminal)
    episode = np.concatenate([[0], np.cumsum(terminal[:-1] != 0)])  # the episode of every step
    starts = np.flatnonzero(np.concatenate([[True], terminal[:-1] != 0]))
    position = np.arange(count) - starts[episode]  # the step's index within its episode
    stacks = copy.deepcopy(preprocessing)
    for stack in stacks.values():
        stack.reset(np.arange(len(starts)))  # every episode row starts over, as a new episode does in acting
    order = np.argsort(position, kind="stable")
    bounds = np.cumsum(np.bincount(position))
    processed: Batch = {}
    for name, values in states.items():
        stack = stacks.get(name)
        if stack is None:
            processed[name] = values
            continue
        for first, last in zip(np.concatenate([[0], bounds[:-1]]), bounds, strict=True):
            steps = order[first:last]  # the t-th step of every episode that has one
            out = stack.process(values[steps], episode[steps])
            if name not in processed:
                processed[name] = np.zeros((count, *out.shape[1:]), dtype=out.dtype)
            processed[name][steps] = out
    return processed
