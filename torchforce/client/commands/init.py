"""``tfcli init``: make the current folder a project."""

from __future__ import annotations

import argparse
import warnings

from torchforce.client.commands import add_command, command
from torchforce.client.commands.gcloud import add_link_arguments, make_link, report
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.gcloud import Cloud, activate, record_link
from torchforce.client.manifests import dns_label
from torchforce.client.project import CONFIG_SUFFIXES, Project, current_folder
from torchforce.configs import KINDS, folder
from torchforce.spec import SpecError


def add_parser(groups: argparse._SubParsersAction) -> None:
    init = add_command(
        groups,
        "init",
        help="make the current folder a tfcli project",
        description="Make the current folder a tfcli project: .tfcli/ (settings and the state database), "
        "configs/ filled with\nthe default agent, network, environment, experiment, cluster and sweep configs, "
        "and experiments/.\nRe-running it is safe: existing config files and settings are kept unless --force "
        "(files of your own\nare kept even then). It refuses a folder inside another project unless --force.",
        examples=[
            "tfcli init",
            "tfcli init -n cartpole-study",
            "tfcli init --force   # restore the default configs",
            "tfcli init -r my-rl-project --key-file ~/tfcli-key.json   # and link a Google Cloud project",
        ],
    )
    init.add_argument("-n", "--name", help="the project's name (default: the folder's name)")
    init.add_argument("-r", "--remote-project-id", help="the Google Cloud project id; with --key-file, link it")
    add_link_arguments(init, project_flag=False)
    init.add_argument("--dry-run", action="store_true", help="with a link: print the gcloud calls, change nothing")
    init.add_argument("--force", action="store_true", help="overwrite the default configs and the project settings")


@command("init")
def init(args: argparse.Namespace) -> None:
    link = None
    if args.key_file or args.zone or args.service_account or args.bucket or args.image or args.dry_run:
        if not args.remote_project_id:
            raise ClientError("the link flags need the Google Cloud project", hint="Give -r PROJECT_ID as well.")
        link = make_link(args)  # checked, and the key accepted by gcloud, before anything is written here
        activate(link, Cloud(link, dry_run=args.dry_run))
        if args.dry_run:
            report(link, True)
            return
    project, written = Project.init(
        current_folder(), name=args.name, remote_project_id=args.remote_project_id, force=args.force
    )
    kept = _shipped_count() - len(written)
    print(f"Project '{project.name}' in {project.root}")
    _warn_if_not_for_gke(project.name, given=args.name is not None)
    print(f"  {len(written)} default config files written" + (f" ({kept} existing ones kept)" if kept else ""))
    if link is not None:
        record_link(project, link)
        report(link, False, project)
        return
    print("Next: tfcli experiment new -n NAME -A ppo_cartpole -E cartpole -t 50000 --start")


def _warn_if_not_for_gke(name: str, *, given: bool) -> None:
    """A project name that GKE cannot use (it becomes part of the RayJobs' names and bucket paths) is fine here and
    on Ray: a warning now, rather than an error at the first GKE start."""
    try:
        dns_label(name, "project.name", "a project name on GKE")
    except SpecError as error:
        source = "" if given else " (the folder's name)"
        warnings.warn(
            f"the project name {name!r}{source} cannot run experiments on GKE, whose names take {error.expected}; "
            "runs on this machine and on Ray are not affected. 'tfcli init --force -n NAME' renames the project",
            ClientWarning,
            stacklevel=2,
        )


def _shipped_count() -> int:
    return sum(1 for kind in KINDS for file in folder(kind).glob("*") if file.suffix in CONFIG_SUFFIXES)
