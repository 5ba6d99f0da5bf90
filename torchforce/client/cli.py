"""The ``tfcli`` entry point: it mounts the command groups (``torchforce.client.commands``: init, cluster,
experiment, project, config) and turns errors into one clear message with exit code 2."""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from torchforce.client.commands import (
    HANDLERS,
    cluster,
    config,
    experiment,
    formatter,
    gcloud,
    init,
    project,
    retired_flag_error,
    sweep,
)
from torchforce.client.completion import SHELLS, completion_script
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.spec import SpecError, SpecWarning, did_you_mean

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # as a shell reports a process that SIGPIPE ended
GROUPS = (init, gcloud, cluster, experiment, sweep, project, config)
DESCRIPTION = """Run reinforcement-learning experiments from the command line.

  tfcli init                                    make this folder a project
  tfcli experiment new -n NAME -A AGENT -E ENV  create an experiment (validated completely first)
  tfcli experiment start -e NAME --follow       run it (on this machine) with a progress bar
  tfcli experiment list | show | logs | watch | plot | compare | pause | stop | download | delete
  tfcli experiment evaluate | export -e NAME    play a trained agent (returns, video); export it (TorchScript, ONNX)
  tfcli gcloud link -r PROJECT --key-file KEY   link a Google Cloud project (for GKE clusters)
  tfcli cluster create | list | delete          Ray clusters here or attached; GKE clusters
  tfcli sweep new -f FILE --start               a hyperparameter search (Optuna); sweep show | plot | stop
  tfcli project repair                          adopt experiment folders a lost state database left behind
  tfcli config schema                           JSON Schemas of the agent configs, for editors

Each short flag means one thing in every command: -e is the experiment a command acts on, -n the name of what
it creates, -f a spec file, -c a cluster of the project; see a command's --help for its flags.
Shell completion: add 'source <(tfcli --print-completion bash)' to ~/.bashrc, or the same with zsh to ~/.zshrc.
Bad input gets one clear message and exit code 2; --debug shows the traceback as well."""
EXAMPLES = [
    "tfcli init",
    "tfcli experiment new -n cp -A ppo_cartpole -E cartpole -t 50000 --start",
    "tfcli experiment watch -e cp",
    "tfcli --print-completion bash > ~/.local/share/bash-completion/completions/tfcli",
]
INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class Parser(argparse.ArgumentParser):
    """argparse with our error format: one line, a hint line (with a did-you-mean for a mistyped command or
    choice), exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        hint = None
        match = INVALID_CHOICE.search(message)
        if match:
            guess = did_you_mean(match.group(1), [c.strip().strip("'\"") for c in match.group(2).split(",")])
            hint = f"Did you mean '{guess}'?" if guess else None
        self.fail(message, hint)

    def fail(self, message: str, hint: str | None = None) -> NoReturn:
        """Exit with code 2 after ``tfcli: error: MESSAGE`` and a hint line that ends by pointing at --help."""
        see = f"See '{self.prog} --help'."
        self.exit(EXIT_USAGE, f"tfcli: error: {message}\n  {hint + ' ' if hint else ''}{see}\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[Any, list[str]]:
        """Arguments parsed; a short flag this command had before, which means something else now, is an error
        naming its long form (``experiment new -e 5``: give ``--episodes 5``), never taken for another setting."""
        parsed, extras = super().parse_known_args(args, namespace)
        retired = retired_flag_error(self, extras)
        if retired is not None:
            self.fail(*retired)
        if extras and self.prog != "tfcli":  # a command's parser: its help, not the top level's, says what it takes
            self.fail(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> Parser:
    parser = Parser(prog="tfcli", description=DESCRIPTION, epilog="examples:\n  " + "\n  ".join(EXAMPLES))
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument(
        "--print-completion",
        choices=SHELLS,
        metavar="SHELL",
        help="print the shell completion script for bash or zsh and exit (see above)",
    )
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", parser_class=Parser, help="one of:")
    for group in GROUPS:
        group.add_parser(groups)
    _add_debug_everywhere(parser)
    return parser


def _add_debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """Accept ``--debug`` after the command too (``tfcli experiment new ... --debug``), not only before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
                _add_debug_everywhere(child)


def _group_parser(parser: argparse.ArgumentParser, group: str) -> argparse.ArgumentParser:
    """The parser of the command group ``group`` (to print its help)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[group]
    raise KeyError(group)


def main(argv: list[str] | None = None) -> int:
    """tfcli: ``argv`` (default: the program's own arguments, when tfcli runs as a program, which then reads no
    PYTHONPATH, as its workers do not: ``modules.ignore_python_path``); returns the exit code."""
    if argv is None:
        from torchforce.client.modules import ignore_python_path

        ignore_python_path()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from torchforce import __version__

        print(f"tfcli (torchforce) {__version__}")
        return 0
    if args.print_completion:
        print(completion_script(parser, args.print_completion), end="")
        return 0
    handler = HANDLERS.get((args.group, getattr(args, "command", None)))
    if handler is None:  # a group without its command: its help
        (parser if args.group is None else _group_parser(parser, args.group)).print_help()
        return EXIT_USAGE
    try:
        with _warnings_as_lines():
            code = int(handler(args) or 0)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return code
    except (SpecError, ClientError) as error:
        if args.debug:
            traceback.print_exc()
        print(f"tfcli: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (tfcli experiment list | head -1): stop quietly
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("tfcli: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - an unexpected failure still gets a readable line
        if args.debug:
            traceback.print_exc()
        print(
            f"tfcli: unexpected error: {type(error).__name__}: {error}\n  Run again with --debug for the traceback.",
            file=sys.stderr,
        )
        return 1


@contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Print a ClientWarning, SpecWarning or other warning class of torchforce's as one ``tfcli: warning: ...`` line
    on stderr (the code line Python would show is tfcli's own or torchforce's, not the user's); other warnings as
    Python does."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", ClientWarning)
        show = warnings.showwarning

        def one_line(
            message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
        ) -> None:
            if issubclass(category, (ClientWarning, SpecWarning)) or category.__module__.startswith("torchforce."):
                print(f"tfcli: warning: {message}", file=sys.stderr)
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = one_line
        yield


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


__all__ = ["EXIT_USAGE", "Parser", "build_parser", "main"]
