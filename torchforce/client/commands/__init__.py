"""The command groups of ``tfcli``, one module each: ``init``, ``cluster``, ``experiment``.

Each module adds its parsers with ``add_parser(groups)`` and registers a handler per command with ``@command``; a
handler is a thin wrapper over the Python API (``Project``, ``Experiment``, ``Cluster``) that the tests call too.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int | None]
HANDLERS: dict[tuple[str, str | None], Handler] = {}

# The one meaning of each short flag, in every command that has it (tests/client/test_flags.py holds the parsers
# to it). The 2018 client gave some letters two meanings (-e was the episodes of 'experiment new' and the experiment
# everywhere else; -A, -d, -s, -f, -R, -w and -c/-C likewise): each letter kept its most used meaning, the others
# are long only (and -p, which went with -w's --num-workers).
SHORT_FLAGS = {
    "-A": "--agent",
    "-E": "--environment",
    "-F": "--follow",
    "-M": "--network",
    "-N": "--num-environments",
    "-c": "--cluster",
    "-e": "--experiment",
    "-f": "--file",
    "-h": "--help",
    "-k": "--kind",
    "-m": "--machine-type",
    "-n": "--name",
    "-o": "--output",
    "-r": "--remote-project-id",
    "-s": "--size",
    "-t": "--total-timesteps",
    "-y": "--yes",
}
# Short flags a command had before, that mean something else (or nothing) there now, with the long form they
# stood for: giving one is an error whose hint spells that long form out, never a different setting.
RETIRED_FLAGS = {
    "experiment new": {
        "-e": "--episodes",
        "-C": "--cluster",
        "-d": "--deterministic",
        "-w": "--num-workers",
        "-p": "--num-parameter-servers",
        "-R": "--run-mode",
        "-s": "--start",
    },
    "experiment start": {"-R": "--resume"},
    "experiment logs": {"-f": "--follow"},
    "experiment plot": {"-w": "--window"},
    "init": {"-f": "--force"},
    "cluster create": {"-d": "--disk-size"},
    "cluster delete": {"-A": "--all"},
}


def command(group: str, name: str | None = None) -> Callable[[Handler], Handler]:
    """Register the handler of ``tfcli GROUP [NAME]``."""

    def register(function: Handler) -> Handler:
        HANDLERS[(group, name)] = function
        return function

    return register


def formatter(prog: str) -> argparse.HelpFormatter:
    """Descriptions and examples keep their line breaks; option help wraps."""
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=34)


def add_command(
    parent: argparse._SubParsersAction, name: str, *, help: str, description: str, examples: Sequence[str]
) -> argparse.ArgumentParser:
    """A (sub)command with a one-line ``help`` for its parent's list, a ``description`` paragraph and examples."""
    return parent.add_parser(
        name,
        help=help,
        description=description,
        epilog="examples:\n" + "\n".join(f"  {example}" for example in examples),
        formatter_class=formatter,
    )


# A value that may follow a retired flag although it starts with "-" (-p -1).
NUMBER = re.compile(r"-?\d+(\.\d*)?([eE][-+]?\d+)?")


def retired_flag_error(parser: argparse.ArgumentParser, extras: Sequence[str]) -> tuple[str, str] | None:
    """For arguments ``parser`` did not know: when one is a short flag its command used to have (``RETIRED_FLAGS``),
    the error message and the hint that spells out the long form with the value given (``--episodes 5``)."""
    command = parser.prog.removeprefix("tfcli").strip()
    retired = RETIRED_FLAGS.get(command, {})
    for index, argument in enumerate(extras):
        flag = argument[:2]
        if argument.startswith("--") or flag not in retired:
            continue
        long = retired[flag]
        action = next(a for a in parser._actions if long in a.option_strings)
        spelled = long
        if action.nargs != 0:
            value = argument[2:].removeprefix("=")
            following = extras[index + 1] if index + 1 < len(extras) else ""
            if not value and following and (not following.startswith("-") or NUMBER.fullmatch(following)):
                value = following
            spelled += f" {value or action.metavar or action.dest.upper()}"
        elsewhere = f" (elsewhere {flag} is {SHORT_FLAGS[flag]})" if flag in SHORT_FLAGS else ""
        short = [option for option in action.option_strings if not option.startswith("--")]
        also = f" (or {short[0]})" if short else ""
        return f"'tfcli {command}' has no {flag} any more: it was {long}{elsewhere}", f"Give {spelled}{also}."
    return None


def finite_float(text: str) -> float:
    """An argparse type: a finite number (nan and inf are no return to reach)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got '{text}'")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value
