"""The option checks the agent configs (``torchforce.agents.config``) add to ``torchforce.spec.options``, and the
option fields several configs share, defined once each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchforce.core.schedules import build_schedule
from torchforce.spec import SpecError, expect_bool
from torchforce.spec.options import Integer, Number, Text, option


@dataclass(frozen=True)
class BatchedObserve:
    """0.4's ``batched_observe``: true or false; 0.3.5's integer is now ``batching_capacity``."""

    def __call__(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise SpecError(
                path,
                "is true or false since 0.4",
                got=value,
                expected="true or false",
                hint=f"The 0.3.5 number is now 'batching_capacity': {value}.",
            )
        return value

    def schema(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class NoEntropy:
    """A deterministic policy's ``entropy_regularization``: left out (null, or 0)."""

    def __call__(self, value: Any, path: str) -> Any:
        if value:
            raise SpecError(path, "a deterministic policy has no entropy", got=value, expected="null")
        return value

    def schema(self) -> dict[str, Any]:
        return {"enum": [None, 0]}


@dataclass(frozen=True)
class Scheduled:
    """A number that may also be a schedule (``torchforce.core.schedules``): ``number``'s check, or a linear
    schedule whose values are at least ``number.minimum``. The spec is kept as given; the agent builds it."""

    number: Number

    def __call__(self, value: Any, path: str) -> Any:
        if isinstance(value, dict):
            build_schedule(value, path, minimum=self.number.minimum or 0.0)
            return value
        return self.number(value, path)

    def schema(self) -> dict[str, Any]:
        return self.number.schema()


@dataclass(frozen=True)
class FlagOr:
    """``true`` or ``false``, or one of ``choices`` (modes beyond on and off)."""

    choices: tuple[str, ...] = ()

    def __call__(self, value: Any, path: str) -> bool | str:
        if isinstance(value, str) and value in self.choices:
            return value
        if self.choices and not isinstance(value, bool):
            expected = "true, false or " + ", ".join(f'"{choice}"' for choice in self.choices)
            raise SpecError(path, "not a boolean or a mode", got=value, expected=expected)
        return expect_bool(value, path)

    def schema(self) -> dict[str, Any]:
        return {"enum": [True, False, *self.choices]} if self.choices else {"type": "boolean"}


# Options several agent configs have, one definition each.


def optimizer_option(doc: str = "The policy's optimizer spec; null: adam with learning rate 1e-3.") -> Any:
    return option(None, doc)


def target_sync_frequency_option() -> Any:
    return option(10000, "Timesteps between updates of the target network.", Integer(minimum=1))


def target_update_weight_option() -> Any:
    return option(
        1.0,
        "How far the target network moves toward the online one at each sync: 1 copies, 0.01 is a slow soft update.",
        Number(minimum=0.0, maximum=1.0, open_minimum=True, hint="1 copies the network, 0.01 is a slow soft update."),
    )


def huber_loss_option() -> Any:
    return option(
        None,
        "Huber loss threshold on the TD error (the gradient clipped to it); null or 0: squared error.",
        Number(minimum=0.0, nullable=True),
    )


def scope_option(name: str | None) -> Any:
    return option(name, "2018 key with no effect: the agent's TensorFlow scope, a name only.", Text(nullable=True))


def no_entropy_option() -> Any:
    return option(None, "Not for a deterministic policy, which has no entropy: null.", NoEntropy())


def random_timesteps_option() -> Any:
    return option(
        0,
        "The first timesteps act uniformly at random within the action bounds instead of by the policy (Spinning "
        "Up's start_steps; SB3's learning_starts also holds updates back, which update_mode.first_update does), "
        "so the replay memory starts diverse; 0: none.",
        Integer(minimum=0),
    )
