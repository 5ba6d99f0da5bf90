"""``tfcli project repair``: adopt again the experiment folders a lost or emptied state database left stranded.
``tfcli project config``: the project's settings of how it runs experiments (how many at once on this machine)."""

from __future__ import annotations

import argparse

from torchforce.client import queue
from torchforce.client.commands import add_command, command, positive_int
from torchforce.client.commands.output import format_table, print_json
from torchforce.client.project import Adoption, Project


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "project",
        help="check and repair the project itself",
        description="The project itself: its state database (.tfcli/state.db) and its experiment folders.",
        examples=["tfcli project repair --dry-run", "tfcli project repair", "tfcli project config --max-parallel 2"],
    )
    commands = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    repair = add_command(
        commands,
        "repair",
        help="adopt experiment folders the state database does not know",
        description="After the state database was deleted, emptied or replaced, the experiment folders in "
        "experiments/\nare stranded: 'repair' gives each folder with a valid experiment.json its row again. The "
        "status comes\nfrom its results: what its worker last wrote (finished, paused, stopped), failed for a run "
        "that ended\nwithout saying so (resumable where it has a checkpoint), new where there are no results. "
        "Files are\nnever changed; folders it cannot adopt are listed with the reason.",
        examples=["tfcli project repair --dry-run", "tfcli project repair", "tfcli project repair --json"],
    )
    repair.add_argument("--dry-run", action="store_true", help="show what would be done, change nothing")
    repair.add_argument("--json", action="store_true", help="machine-readable output")
    config = add_command(
        commands,
        "config",
        help="show or change how many experiments run at once on this machine",
        description="Experiments started on this machine beyond the limit wait in a queue (status 'queued') and "
        "start by\nthemselves, first come first served, as running ones end. Without a setting, as many run at "
        "once as\nfit the CPUs: a single-mode run takes its torch_threads, 1 by default (with subprocess "
        "vectorization,\nat least num_environments), a multi-threaded one num_workers, a distributed one "
        "num_workers + 1\n(each worker times its torch_threads). --max-parallel N allows N at once whatever their "
        "size;\n'auto' goes back to counting CPUs. Runs on Ray and GKE clusters are placed by their cluster and "
        "not\ncounted. The setting is 'queue' in .tfcli/project.json.",
        examples=[
            "tfcli project config",
            "tfcli project config --max-parallel 2",
            "tfcli project config --max-parallel auto",
        ],
    )
    config.add_argument(
        "--max-parallel",
        type=_max_parallel,
        metavar="N|auto",
        default=argparse.SUPPRESS,
        help="at most N experiments at once on this machine; 'auto': as many as fit its CPUs",
    )


@command("project", "repair")
def project_repair(args: argparse.Namespace) -> None:
    adoptions = Project.find().repair(dry_run=args.dry_run)
    if args.json:
        print_json([_as_dict(adoption) for adoption in adoptions])
        return
    if not adoptions:
        print("Nothing to repair: the state database knows every experiment folder.")
        return
    adopted = sum(adoption.action == "adopt" for adoption in adoptions)
    skipped = len(adoptions) - adopted
    action = {"adopt": "would adopt", "skip": "would skip"} if args.dry_run else {"adopt": "adopted", "skip": "skipped"}
    rows = [[a.name, action[a.action], a.status, a.message] for a in adoptions]
    print(format_table(["Experiment", "Action", "Status", "Why / message"], rows))
    done = "Would adopt" if args.dry_run else "Adopted"
    print(
        f"\n{done} {adopted} experiment folder{'s' if adopted != 1 else ''}"
        + (f", {skipped} skipped" if skipped else "")
    )
    if args.dry_run and adopted:
        print("Run 'tfcli project repair' without --dry-run to do it.")


def _as_dict(adoption: Adoption) -> dict:
    return {"name": adoption.name, "action": adoption.action, "status": adoption.status, "message": adoption.message}


def _max_parallel(text: str) -> int | None:
    """An argparse type: a whole number >= 1, or "auto" (None: as many as fit the CPUs)."""
    return None if text == "auto" else positive_int(text)


@command("project", "config")
def project_config(args: argparse.Namespace) -> None:
    project = Project.find()
    changing = hasattr(args, "max_parallel")  # (absent unless given: 'auto' gives None)
    if changing:
        queue.set_max_parallel(project, args.max_parallel)
    print(f"Experiments on this machine: {queue.limit(project).describe()}")
    started = queue.promote(project) if changing else []
    if started:
        print("Started from the queue: " + ", ".join(started))
