"""``--set KEY=VALUE``: one value of an experiment's spec changed from the command line.

A key is a dotted path into the experiment's raw spec, what its file and flags say before validation:
``num_environments``, ``environment.gym_id``, ``agent.step_optimizer.learning_rate``; a list item is ``[N]``
(``agent.network[0].size``; ``agent.network.0.size`` says the same). A leading ``experiment.`` is allowed, so a
path copied from an error message works. The value is JSON where it parses as JSON (``8``, ``3e-4``, ``true``,
``null``, ``[64, 64]``, ``{"type": "adam"}``, ``"8"`` for the text 8) and the text as written otherwise
(``Acrobot-v1``); NaN and Infinity, which are not JSON, stay text.

Overrides apply in order, after the file and the flags are merged and before validation, so the result is checked
exactly like a file. A config the spec names (``"agent": "ppo_cartpole"``) is loaded first when a key inside it is
set, and the spec then holds that config inline, changed. A key that does not exist yet is added: whether the spec
takes it is for validation to say (``agent.optimizer`` on a PPO agent is refused there, with a did-you-mean).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchforce.client.experiment_build import CONFIG_KINDS
from torchforce.client.project import Project
from torchforce.spec import SpecError

Step = str | int
# Turns the config a top-level field names into its contents: (field, name) -> contents.
Loader = Callable[[str, str], Any]

EXAMPLE = "agent.discount=0.99"
PIECE = re.compile(r"(?P<name>[^.\[\]]+)(?P<indices>(?:\[\d+\])*)")


@dataclass(frozen=True)
class Override:
    """One ``--set``: ``steps`` into the spec (names, and list indices as ints) and the parsed ``value``;
    ``text`` is the argument as written, for messages."""

    steps: tuple[Step, ...]
    value: Any
    text: str


def parse_override(text: str) -> Override:
    """``KEY=VALUE`` as an Override; a SpecError (path ``--set``) for text that is not one."""
    key, equals, raw_value = text.partition("=")
    if not equals or not key.strip():
        raise SpecError("--set", "not KEY=VALUE", got=text, expected=f"a dotted key, '=' and a value, like {EXAMPLE}")
    return Override(parse_key(key.strip(), text), parse_value(raw_value), text)


def parse_overrides(texts: Sequence[str] | None) -> list[Override]:
    """Every ``--set`` given (none: an empty list), checked before anything is applied."""
    return [parse_override(text) for text in texts or ()]


def parse_key(key: str, text: str | None = None) -> tuple[Step, ...]:
    """``agent.network[0].size`` -> ``("agent", "network", 0, "size")``; ``experiment.`` in front is dropped."""
    key = key.removeprefix("experiment.") or key
    steps: list[Step] = []
    for piece in key.split("."):
        match = PIECE.fullmatch(piece.strip())
        if match is None:
            raise SpecError(
                "--set",
                f"'{key}' is not a dotted key",
                got=text if text is not None else key,
                expected="names joined by '.', with [N] for a list item, like agent.network[0].size",
            )
        steps.append(match["name"])
        steps += [int(index) for index in re.findall(r"\[(\d+)\]", match["indices"])]
    return tuple(steps)


def parse_value(text: str) -> Any:
    """JSON where ``text`` is JSON (strictly: no NaN or Infinity), else ``text`` itself."""
    try:
        return json.loads(text, parse_constant=_not_json)
    except ValueError:
        return text


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def dotted(steps: Sequence[Step]) -> str:
    """Steps as a spec path: ``("agent", "network", 0, "size")`` -> ``agent.network[0].size``."""
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[Override], load: Loader | None = None) -> dict:
    """A copy of ``raw`` with ``overrides`` applied in order (``raw`` itself is left as it was). A string at a
    top-level field that a key goes into is turned into its contents by ``load`` (a config given by name)."""
    spec = copy.deepcopy(dict(raw))
    for override in overrides:
        node: Any = spec
        *through, last = override.steps
        for depth in range(len(through)):
            node = _child(node, override, depth, load)
        _check_container(node, last, override, len(through))
        if isinstance(node, list):
            node[_index(node, last, override, len(through))] = override.value
        else:
            node[last] = override.value
    return spec


def apply_to_experiment(project: Project, raw: Mapping[str, Any], overrides: Sequence[Override]) -> dict:
    """``apply_overrides`` on an experiment's raw spec: configs named at ``agent``, ``environment``, ``network``
    and ``cluster`` load from the project as validation would load them, and ``total_timesteps`` replaces a file's
    2018 ``timesteps`` (as ``-t`` does)."""

    from torchforce.client.experiment_file import load_environment

    def load(field: str, name: str) -> Any:
        kind = CONFIG_KINDS.get(field)
        if field == "environment":  # a config, or a name such as a Gymnasium id (as -E takes it)
            return load_environment(project, name)[0]
        return name if kind is None else project.load_config(name, kind, f"experiment.{field}")[0]

    spec = apply_overrides(raw, overrides, load)
    tops = {override.steps[0] for override in overrides}
    if "total_timesteps" in tops and "timesteps" not in tops:
        spec.pop("timesteps", None)
    return spec


def blame(error: SpecError, overrides: Sequence[Override], prefix: str = "experiment") -> SpecError:
    """``error`` with a hint naming the ``--set`` its value came from, when it is about an overridden value or
    about a place a ``--set`` went through (a key it added: ``agent.optimizer`` of ``agent.optimizer.x=1``);
    otherwise, or when it names that ``--set`` already, ``error`` as it is."""
    for override in reversed(overrides):
        if f"--set {override.text}" in str(error):
            return error
        steps = [int(s) if isinstance(s, str) and s.isdigit() else s for s in override.steps]
        path = f"{prefix}.{dotted(steps)}"
        if _within(error.path, path) or (_within(path, error.path) and error.path != prefix):
            hint = " ".join(
                part
                for part in (f"It came from --set {override.text}.", _not_json_why(override.value), error.hint)
                if part
            )
            return SpecError(
                error.path, error.message, got=error.got, expected=error.expected, hint=hint, file=error.file
            )
    return error


def _not_json_why(value: Any) -> str | None:
    """Why a ``--set`` value written as a JSON object or array was taken as text (``parse_value``): its JSON error."""
    if not isinstance(value, str) or not value.lstrip().startswith(("{", "[")):
        return None
    try:
        json.loads(value, parse_constant=_not_json)
    except ValueError as error:
        return f"Its value is text, not JSON ({error})."
    return None


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith((f"{outer}.", f"{outer}["))


def _child(node: Any, override: Override, depth: int, load: Loader | None) -> Any:
    """The value of ``node`` at the override's step ``depth``, to go on into: an empty object where nothing is
    set yet, the contents of a config given by name."""
    step, following = override.steps[depth], override.steps[depth + 1]
    _check_container(node, step, override, depth)
    if isinstance(node, list):
        return node[_index(node, step, override, depth)]
    child = node.get(step)
    if child is None and isinstance(following, int):
        raise SpecError(
            "experiment." + dotted(override.steps[: depth + 1]),
            f"is not set, so it has no item [{following}] (from --set {override.text})",
            hint=f"Set the whole list: --set {dotted(override.steps[: depth + 1])}='[...]'.",
        )
    if child is None:
        child = node[step] = {}
    elif depth == 0 and isinstance(child, str) and load is not None:
        child = node[step] = load(str(step), child)
    return child


def _check_container(node: Any, step: Step, override: Override, depth: int) -> None:
    """A SpecError unless ``node`` (at ``depth`` steps into the spec) can hold ``step``."""
    where = "experiment." + dotted(override.steps[:depth]) if depth else "experiment"
    origin = f"from --set {override.text}"
    if isinstance(node, list) and not (isinstance(step, int) or step.isdigit()):
        raise SpecError(
            where,
            f"is a list of {len(node)} items, so it has no key '{step}' ({origin})",
            hint=f"Set an item as {dotted([*override.steps[:depth], 0, *override.steps[depth:]])}=...",
        )
    if isinstance(node, dict) and isinstance(step, int):
        raise SpecError(where, f"is an object, so it has no item [{step}] ({origin})")
    if not isinstance(node, (dict, list)):
        shown = f"[{step}]" if isinstance(step, int) else f"'{step}'"
        raise SpecError(where, f"cannot hold {shown} ({origin})", got=node, expected="an object or a list")


def _index(node: list, step: Step, override: Override, depth: int) -> int:
    index = int(step)
    if index >= len(node):
        raise SpecError(
            "experiment." + dotted([*override.steps[:depth], index]),
            f"no such item (from --set {override.text})",
            expected=f"an index from 0 to {len(node) - 1}" if node else "no index: the list is empty",
        )
    return index


__all__ = [
    "Override",
    "apply_overrides",
    "apply_to_experiment",
    "blame",
    "dotted",
    "parse_key",
    "parse_override",
    "parse_overrides",
    "parse_value",
]
