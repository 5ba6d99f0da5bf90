"""parse_frequency: the client's "600s" / "100e" / "5000t" and bare numbers (seconds), and every refusal."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from torchforce.spec import Frequency, SpecError, SpecWarning, parse_frequency

EXPECTED = "expected a whole number and a unit, like '600s', '100e' or '5000t'"
UNITS = "  Units: s = seconds, t = timesteps, e = episodes; a bare number means seconds."


@pytest.mark.parametrize(
    ("value", "frequency"),
    [
        ("600s", Frequency(600, "seconds")),
        ("100e", Frequency(100, "episodes")),
        ("5000t", Frequency(5000, "timesteps")),
        ("600", Frequency(600, "seconds")),
        (600, Frequency(600, "seconds")),
        (600.0, Frequency(600, "seconds")),
        ("1e", Frequency(1, "episodes")),
        ("007t", Frequency(7, "timesteps")),
    ],
)
def test_parse(value: Any, frequency: Frequency) -> None:
    parsed = parse_frequency(value, "saver_frequency")
    assert parsed == frequency
    assert type(parsed.amount) is int


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (50000, "every 50000 seconds (13.9 hours); write '50000s' to say so, or '50000t' for timesteps"),
        ("600", "every 600 seconds (10 minutes); write '600s'"),
        (30.0, "every 30 seconds; write '30s'"),
        (60, "every 60 seconds (1 minute); write '60s'"),
        (86400000, "every 86400000 seconds (1,000 days); write '86400000s'"),
        (1, "every 1 second; write '1s'"),
    ],
)
def test_a_bare_number_means_seconds_and_warns_naming_the_path(value: Any, said: str) -> None:
    with pytest.warns(SpecWarning) as caught:
        assert parse_frequency(value, "experiment.evaluation.frequency").unit == "seconds"
    (warning,) = caught
    path = "experiment.evaluation.frequency"
    assert str(warning.message).startswith(f"{path}: {value!r} has no unit, so it means {said}")


@pytest.mark.parametrize("value", ["600s", "50000t", "10e", Frequency(600, "seconds")])
def test_a_frequency_with_its_unit_does_not_warn(value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_frequency(value, "experiment.saver_frequency")


def test_a_frequency_passes_through_and_prints_as_written() -> None:
    frequency = Frequency(100, "episodes")
    assert parse_frequency(frequency, "p") is frequency
    assert str(frequency) == "100e"
    assert str(Frequency(600, "seconds")) == "600s"
    assert str(Frequency(5000, "timesteps")) == "5000t"
    assert parse_frequency(str(Frequency(5000, "timesteps")), "p") == Frequency(5000, "timesteps")


def message(value: Any, path: str = "saver_frequency") -> str:
    with pytest.raises(SpecError) as caught:
        parse_frequency(value, path)
    return str(caught.value)


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("10m", "There is no 'm' unit; write '600s'."),
        ("2h", "There is no 'h' unit; write '7200s'."),
        ("5min", "There is no 'min' unit; write '300s'."),
        ("600S", "Write '600s'."),
        ("100E", "Write '100e'."),
        ("600 s", "Write '600s'."),
        (" 600", "Write '600s'."),
    ],
)
def test_near_misses_get_a_suggestion(value: str, hint: str) -> None:
    assert message(value) == f'saver_frequency: not a frequency; {EXPECTED}, got "{value}".\n  {hint}'


@pytest.mark.parametrize("value", ["", "s", "-5s", "1.5e", "10x", "ten seconds", "600ss", "0x10"])
def test_other_strings(value: str) -> None:
    assert message(value, "summary_frequency") == (
        f'summary_frequency: not a frequency; {EXPECTED}, got "{value}".\n' + UNITS
    )


@pytest.mark.parametrize(("value", "got"), [(True, "true"), (None, "null"), (1.5, "1.5"), ([600, "s"], '[600, "s"]')])
def test_other_values(value: Any, got: str) -> None:
    assert message(value) == f"saver_frequency: not a frequency; {EXPECTED}, got {got}.\n" + UNITS


@pytest.mark.parametrize(("value", "got"), [("0s", '"0s"'), ("0", '"0"'), (0, "0"), (-5, "-5")])
def test_amount_at_least_one(value: Any, got: str) -> None:
    assert message(value) == f"saver_frequency: out of range; expected an amount of at least 1, like '600s', got {got}."


def test_a_hand_built_frequency_is_checked() -> None:
    assert message(Frequency(0, "episodes")) == (
        "saver_frequency: out of range; expected an amount of at least 1, like '600s', got "
        "Frequency(amount=0, unit='episodes')."
    )
    assert message(Frequency(5, "minutes")) == (  # type: ignore[arg-type]
        "saver_frequency: unknown frequency unit; expected 'seconds', 'timesteps' or 'episodes', got \"minutes\"."
    )
