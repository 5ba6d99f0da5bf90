"""A sweep's search space (the ``space`` field of a sweep file, ``torchforce.client.sweep_file``): each dotted key
of the experiment a float or int range or a list of choices (``Dimension``), checked where it is written, and how
optuna holds each (its distribution, and choices it cannot hold as they are as their JSON text)."""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.client.overrides import Override, dotted, parse_key
from torchforce.spec import SpecError, expect_bool, expect_choice, expect_dict, expect_int
from torchforce.spec.checks import expect_keys
from torchforce.spec.errors import describe

RANGE_TYPES = ("float", "int")
# The experiment fields the sweep sets for each run itself.
CONTROLLED = {
    "name": "Each run is named after the sweep, its trial and its seed.",
    "group": "Each trial's runs form a group named after the sweep and the trial.",
    "seed": "Each trial runs the seeds base seed + 0, 1, ... (seeds_per_trial); the base may set its seed.",
}


@dataclass(frozen=True)
class Dimension:
    """One key of the space: a float or int range (``log`` for a log-uniform draw, ``step`` for a grid) or
    ``choices``. Choices optuna cannot hold as they are (lists, objects) are handed to it as their JSON text."""

    key: str
    kind: str  # "float", "int" or "choice"
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] = ()

    @property
    def as_text(self) -> bool:
        """Whether optuna holds the choices as JSON text (some choice is a list or an object)."""
        return any(isinstance(choice, (list, dict)) for choice in self.choices)

    def distribution(self) -> Any:
        """The optuna distribution of this key."""
        import optuna

        if self.kind == "choice":
            choices = [json.dumps(c) for c in self.choices] if self.as_text else list(self.choices)
            return optuna.distributions.CategoricalDistribution(choices)
        if self.kind == "int":
            return optuna.distributions.IntDistribution(
                int(self.low or 0), int(self.high or 0), log=self.log, step=int(self.step or 1)
            )
        return optuna.distributions.FloatDistribution(
            float(self.low or 0), float(self.high or 0), log=self.log, step=self.step
        )

    def value(self, param: Any) -> Any:
        """The value a trial's parameter (as optuna holds it) puts into the experiment."""
        return json.loads(param) if self.kind == "choice" and self.as_text else param

    def override(self, value: Any) -> Override:
        return Override(parse_key(self.key), value, f"{self.key}={json.dumps(value)}")

    def inside(self) -> tuple[str, Any] | None:
        """A float range's value a third of the way in (geometrically for a log range; on the step's grid), which
        validation tries too: ends written as integers pass an integer field that the sampler's floats fail."""
        if self.kind != "float" or self.low is None or self.high is None:
            return None
        low, high = float(self.low), float(self.high)
        value = low * (high / low) ** (1 / 3) if self.log else low + (high - low) / 3
        if self.step is not None:
            value = low + round((value - low) / self.step) * self.step
        return "type", value

    def ends(self) -> list[tuple[str, Any]]:
        """Values validation tries, with the name of the place they come from: a range's ends, every choice."""
        if self.kind == "choice":
            return [(f"choices[{index}]", choice) for index, choice in enumerate(self.choices)]
        return [("low", self.low), ("high", self.high)]

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "choice":
            return {"choices": list(self.choices)}
        values = {"low": self.low, "high": self.high, "log": self.log, "type": self.kind}
        return values | ({"step": self.step} if self.step is not None else {})


def parse_space(value: Any) -> tuple[Dimension, ...]:
    path = "sweep.space"
    if value is None:
        raise SpecError(
            path,
            "a sweep needs a space of values to try",
            hint="Map dotted keys (as 'tfcli experiment new --set' takes them) to ranges or choices: "
            "agent.step_optimizer.learning_rate: {low: 1.0e-5, high: 1.0e-2, log: true}.",
        )
    space = dict(expect_dict(value, path))
    if not space:
        raise SpecError(path, "an empty space: nothing to search", expected="at least one key")
    dimensions: dict[str, Dimension] = {}
    for key, entry in space.items():
        dimension = _dimension(key, entry)
        if dimension.key in dimensions:
            raise SpecError(f"{path}.{key}", f"the same key as {dimension.key}, given twice")
        dimensions[dimension.key] = dimension
    keys = sorted(dimensions)
    for inner in keys:
        for outer in keys:
            if inner != outer and inner.startswith((f"{outer}.", f"{outer}[")):
                raise SpecError(
                    f"{path}.{inner}", f"inside another key of the space, {outer}", hint="Search one of the two."
                )
    return tuple(dimensions.values())


def _dimension(key: Any, entry: Any) -> Dimension:
    if not isinstance(key, str):
        raise SpecError("sweep.space", "a key that is not text", got=key, expected="a dotted key like agent.discount")
    try:
        steps = parse_key(key)
    except SpecError as error:
        raise SpecError(f"sweep.space.{key}", error.message, got=key, expected=error.expected) from None
    normal = dotted(steps)
    if str(steps[0]) in CONTROLLED:
        raise SpecError(f"sweep.space.{key}", "set by the sweep itself", hint=CONTROLLED[str(steps[0])])
    if len(steps) == 2 and steps[0] in ("agent", "environment") and steps[1] == "seed":
        raise SpecError(
            f"sweep.space.{key}",
            "never used: the runs are seeded by the experiment's seed",
            hint=CONTROLLED["seed"],
        )
    path = f"sweep.space.{normal}"
    expected = "{low: L, high: H} (with log: true, type: int, step: S if wanted) or {choices: [...]}"
    if not isinstance(entry, dict):
        raise SpecError(path, "not a range or choices", got=entry, expected=expected)
    if "choices" in entry:
        expect_keys(entry, path, ("choices",))
        return Dimension(normal, "choice", choices=_choices(entry["choices"], f"{path}.choices"))
    entry = expect_keys(entry, path, ("low", "high", "log", "type", "step"))
    for end in ("low", "high"):
        if end not in entry:
            raise SpecError(f"{path}.{end}", f"a range needs its {end} end", expected=expected)
    kind = expect_choice(entry.get("type", "float"), f"{path}.type", RANGE_TYPES)
    log = expect_bool(entry.get("log", False), f"{path}.log")
    low, high = (_end(entry[end], f"{path}.{end}", kind) for end in ("low", "high"))
    if not low < high:
        raise SpecError(f"{path}.high", f"not above low ({describe(low)}): an empty range", got=high)
    if log and low <= 0:
        raise SpecError(f"{path}.low", "a log range starts above 0", got=low, expected="a number > 0")
    step = entry.get("step")
    if step is not None:
        if log:
            raise SpecError(f"{path}.step", "a log range has no step", got=step, hint="Drop one of step and log.")
        step = _end(step, f"{path}.step", kind)
        if step <= 0:
            raise SpecError(f"{path}.step", "out of range", got=step, expected="a number > 0")
    return Dimension(normal, kind, low=low, high=high, log=log, step=step)


def _end(value: Any, path: str, kind: str) -> float | int:
    """A range's end (or step): an int for an int range, a finite float for a float one (whose values the sampler
    draws as floats: ends checked as the ints written would pass where every trial's value fails)."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            pass  # text that is no number: the checks below say what is expected
        else:  # YAML 1.1 reads 1e-5 (no dot) as text
            mantissa, e, exponent = value.strip().lower().partition("e")
            dotted = f"{mantissa}.0e{exponent}" if e and "." not in mantissa else repr(float(value))
            hint = f"YAML reads {value} as text: write it with a dot, as {dotted} (not {value})."
            raise SpecError(path, "text, not a number", got=value, hint=hint)
    if kind == "int":
        return expect_int(value, path)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(path, "not a finite number", got=value, expected="a number")
    return float(value)


JSON_VALUES = "numbers, text, true/false, null, lists or objects with text keys"


def _choices(value: Any, path: str) -> tuple[Any, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(path, "not a list of values to try", got=value, expected="a non-empty list")
    seen: dict[str, int] = {}
    for index, choice in enumerate(value):
        _check_json(choice, f"{path}[{index}]")
        text = json.dumps(choice, sort_keys=True)
        if text in seen:
            raise SpecError(f"{path}[{index}]", f"the same as choices[{seen[text]}]", got=choice)
        seen[text] = index
    if not any(isinstance(choice, (list, dict)) for choice in value):  # optuna holds the values (Dimension.as_text)
        for index, choice in enumerate(value):
            equal = next((earlier for earlier in range(index) if value[earlier] == choice), None)
            if equal is not None:
                raise SpecError(
                    f"{path}[{index}]",
                    f"equal to choices[{equal}] ({describe(value[equal])}) in Python, where 1 == 1.0 == true, and "
                    "Optuna tells choices apart that way: it would store both as one",
                    got=choice,
                    hint="Keep one of the two.",
                )
    return tuple(value)


def _check_json(value: Any, path: str) -> None:
    """A choice is stored in the study and in the sweep's state file as JSON, and a trial's experiment gets it back
    from there: a value JSON cannot hold as it is (a YAML date, !!binary bytes, an object with a key that is not
    text, a number that is not finite) is refused at the place it is, rather than failing or changing later."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(path, "not a finite number", got=value)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError(path, "an object with a key that is not text", got=key, expected=JSON_VALUES)
            _check_json(item, f"{path}.{key}")
        return
    hint = (
        "YAML reads a date written without quotes as a date: quote it to keep it text."
        if isinstance(value, datetime.date)
        else None
    )
    raise SpecError(path, "not a JSON value", got=value, expected=JSON_VALUES, hint=hint)


INSTALL_HINT = "pip install 'torchforce[sweep]'"


def optuna_module() -> Any:
    """optuna, imported on first use: a ClientError saying how to install it where it is missing."""
    try:
        import optuna
    except ImportError:
        raise ClientError("sweeps need the optuna package, which is not installed", hint=INSTALL_HINT) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna
