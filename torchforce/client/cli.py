"""tfcli: run reinforcement-learning experiments from the command line.

    tfcli init                                   make this folder a project (configs/, experiments/, .tfcli/)
    tfcli experiment new -n NAME -A AGENT -E ENV  create an experiment (validated completely first)
    tfcli experiment start -e NAME [--follow]     run it (on this machine by default)
    tfcli experiment list | show | logs | plot | compare | pause | stop | download | delete

Bad input gets one clear message and exit code 2; ``--debug`` shows the traceback as well.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.spec import SpecError

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse with our error format: one line, the usage hint, exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"tfcli: error: {message}\n  See '{self.prog} --help'.\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=34)


def build_parser() -> Parser:
    parser = Parser(prog="tfcli", description=__doc__, formatter_class=_formatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", parser_class=Parser)

    init = groups.add_parser(
        "init",
        help="make the current folder a tfcli project",
        formatter_class=_formatter,
        description="Create .tfcli/ (settings, state database), configs/ filled with the "
        "default agent, network, environment, experiment and cluster configs, and "
        "experiments/. Existing config files are kept unless --force.",
    )
    init.add_argument("-n", "--name", help="the project's name (default: the folder's name)")
    init.add_argument("-r", "--remote-project-id", help="the Google Cloud project id (for the GKE backend)")
    init.add_argument("-f", "--force", action="store_true", help="overwrite default configs and project settings")

    cluster = groups.add_parser("cluster", help="cluster specs (GKE backend: to come)").add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser
    )
    create = cluster.add_parser("create", help="create a GKE cluster (not available yet)")
    create.add_argument("-f", "--file", help="a cluster spec file or a name in configs/clusters/")
    create.add_argument("-n", "--name")
    create.add_argument("-s", "--size", type=int, default=None, help="number of nodes (default 3)")
    create.add_argument("-m", "--machine-type")
    create.add_argument("-d", "--disk-size", type=int, default=None, help="GB per node (default 100)")
    create.add_argument("--dry-run", action="store_true", help="print the gcloud command instead of running it")
    delete = cluster.add_parser("delete", help="delete a GKE cluster (not available yet)")
    delete.add_argument("-c", "--cluster")
    delete.add_argument("-A", "--all", action="store_true")
    cluster.add_parser("list", help="list the cluster specs of this project")

    experiment = groups.add_parser("experiment", help="create, run and inspect experiments").add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser
    )
    new = experiment.add_parser(
        "new",
        help="create an experiment",
        formatter_class=_formatter,
        description="Create experiments/NAME/experiment.json from a spec file and/or flags "
        "(flags override the file). Bare names resolve to configs/<kind>/NAME.json. The "
        "whole experiment is validated (the environment and agent are built once) before "
        "anything is written.",
    )
    new.add_argument("-f", "--file", help="an experiment spec file, or a name in configs/experiments/")
    new.add_argument("-n", "--name", help="the experiment's name (lower-case letters, digits, '-', '_')")
    new.add_argument("-A", "--agent", help="agent config (file or name in configs/agents/)")
    new.add_argument("-M", "--network", help="network config (file or name in configs/networks/)")
    new.add_argument("-E", "--environment", help="environment config (file, name in configs/environments/)")
    new.add_argument("-C", "--cluster", help="cluster config (file or name in configs/clusters/)")
    new.add_argument("-e", "--episodes", type=int, help="stop after this many episodes in all")
    new.add_argument("-t", "--total-timesteps", type=int, help="stop after this many timesteps in all")
    new.add_argument("--max-timesteps-per-episode", type=int, help="cut episodes at this many timesteps")
    new.add_argument("-d", "--deterministic", action="store_true", default=None, help="act without exploration")
    new.add_argument("-w", "--num-workers", type=int, help="workers (multi-threaded and distributed run modes)")
    new.add_argument("-p", "--num-parameter-servers", type=int, help="parameter servers (distributed run mode)")
    new.add_argument("-R", "--run-mode", choices=("single", "multi-threaded", "distributed"))
    new.add_argument("-N", "--num-environments", type=int, help="vectorized environment copies (default 1)")
    new.add_argument("--seed", type=int, help="random seed (default 0)")
    new.add_argument("--description")
    new.add_argument("-s", "--start", action="store_true", help="start it right away")

    experiment.add_parser("list", help="a table of the project's experiments").add_argument(
        "--json", action="store_true", help="machine-readable output"
    )
    start = experiment.add_parser("start", help="start (or resume) an experiment")
    start.add_argument("-e", "--experiment", required=True)
    start.add_argument("-R", "--resume", action="store_true", help="continue from the latest checkpoint")
    start.add_argument("--fresh", action="store_true", help="discard earlier results and start over")
    start.add_argument("-c", "--cluster", help="run on this cluster (Ray/GKE backends: to come)")
    start.add_argument("-F", "--follow", action="store_true", help="show progress until the experiment ends")
    pause = experiment.add_parser("pause", help="checkpoint a running experiment and stop its worker")
    pause.add_argument("-e", "--experiment", required=True)
    stop = experiment.add_parser("stop", help="end an experiment for good (checkpointing first)")
    stop.add_argument("-e", "--experiment", required=True)
    stop.add_argument("--no-download", action="store_true", help="do not fetch the results first")
    download = experiment.add_parser("download", help="fetch an experiment's results into experiments/NAME/results")
    download.add_argument("-e", "--experiment", required=True)
    show = experiment.add_parser("show", help="an experiment's spec, status, counters and recent returns")
    show.add_argument("-e", "--experiment", required=True)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    logs = experiment.add_parser("logs", help="print an experiment's worker log")
    logs.add_argument("-e", "--experiment", required=True)
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until the worker ends")
    watch = experiment.add_parser("watch", help="show a progress bar until the experiment ends")
    watch.add_argument("-e", "--experiment", required=True)
    plot = experiment.add_parser("plot", help="learning curves of one or more experiments (PNG)")
    plot.add_argument("-e", "--experiment", nargs="+", required=True, metavar="NAME")
    plot.add_argument("-o", "--output", help="the PNG to write (default: experiments/NAME/results/learning_curve.png)")
    plot.add_argument("-w", "--window", type=int, default=20, help="episodes to average over (default 20)")
    compare = experiment.add_parser("compare", help="a table comparing experiments")
    compare.add_argument("experiments", nargs="+", metavar="NAME")
    compare.add_argument("--threshold", type=float, help="report steps and time until the mean-100 return reaches it")
    compare.add_argument("--json", action="store_true", help="machine-readable output")
    remove = experiment.add_parser("delete", help="remove an experiment that is not running, with its results")
    remove.add_argument("-e", "--experiment", required=True)
    _add_debug_everywhere(parser)
    return parser


def _add_debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """Accept ``--debug`` after the command too (``tfcli experiment new ... --debug``), not only before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
                _add_debug_everywhere(child)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from torchforce import __version__

        print(f"tfcli (torchforce) {__version__}")
        return 0
    if args.group is None or (args.group != "init" and getattr(args, "command", None) is None):
        (parser if args.group is None else parser._subparsers._group_actions[0].choices[args.group]).print_help()
        return EXIT_USAGE
    from torchforce.client import commands

    handler = commands.HANDLERS[(args.group, getattr(args, "command", None))]
    try:
        return int(handler(args) or 0)
    except (SpecError, ClientError) as error:
        if args.debug:
            traceback.print_exc()
        print(f"tfcli: {error}", file=sys.stderr)
        return EXIT_USAGE
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


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain text table with left-aligned text and right-aligned numbers."""
    cells = [[("-" if value is None else str(value)) for value in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    numeric = [
        all(_is_number(row[i]) for row in rows if row[i] is not None) and bool(rows) for i in range(len(headers))
    ]

    def line(values: list[str]) -> str:
        cells = (v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True))
        return "  ".join(cells).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(row) for row in cells]).rstrip()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) or (
        isinstance(value, str) and value.replace(",", "").replace(".", "").replace("%", "").replace("-", "").isdigit()
    )


def elapsed(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def now() -> float:
    return time.time()


def relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
