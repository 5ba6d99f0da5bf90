"""``tfcli init``: make the current folder a project."""

from __future__ import annotations

import argparse

from torchforce.client.commands import add_command, command
from torchforce.client.project import CONFIG_SUFFIXES, Project, current_folder
from torchforce.configs import KINDS, folder


def add_parser(groups: argparse._SubParsersAction) -> None:
    init = add_command(
        groups,
        "init",
        help="make the current folder a tfcli project",
        description="Make the current folder a tfcli project: .tfcli/ (settings and the state database), "
        "configs/ filled with\nthe default agent, network, environment, experiment and cluster configs, and "
        "experiments/.\nRe-running it is safe: existing config files and settings are kept unless --force "
        "(files of your own\nare kept even then). It refuses a folder inside another project unless --force.",
        examples=["tfcli init", "tfcli init -n cartpole-study", "tfcli init --force   # restore the default configs"],
    )
    init.add_argument("-n", "--name", help="the project's name (default: the folder's name)")
    init.add_argument("-r", "--remote-project-id", help="the Google Cloud project id (for the GKE backend, to come)")
    init.add_argument(
        "-f", "--force", action="store_true", help="overwrite the default configs and the project settings"
    )


@command("init")
def init(args: argparse.Namespace) -> None:
    project, written = Project.init(
        current_folder(), name=args.name, remote_project_id=args.remote_project_id, force=args.force
    )
    kept = _shipped_count() - len(written)
    print(f"Project '{project.name}' in {project.root}")
    print(f"  {len(written)} default config files written" + (f" ({kept} existing ones kept)" if kept else ""))
    print("Next: tfcli experiment new -n NAME -A ppo_cartpole -E cartpole -t 50000 --start")


def _shipped_count() -> int:
    return sum(1 for kind in KINDS for file in folder(kind).glob("*") if file.suffix in CONFIG_SUFFIXES)
