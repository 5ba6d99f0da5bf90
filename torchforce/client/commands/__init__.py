"""The command groups of ``tfcli``, one module each: ``init``, ``cluster``, ``experiment``.

Each module adds its parsers with ``add_parser(groups)`` and registers a handler per command with ``@command``; a
handler is a thin wrapper over the Python API (``Project``, ``Experiment``, ``Cluster``) that the tests call too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int | None]
HANDLERS: dict[tuple[str, str | None], Handler] = {}


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


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value
