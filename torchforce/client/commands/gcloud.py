"""``tfcli gcloud link | show`` and ``tfcli image build``: the project's Google Cloud project, and the workers'
image."""

from __future__ import annotations

import argparse
from pathlib import Path

from torchforce.client.commands import add_command, command
from torchforce.client.commands.output import format_table, print_json
from torchforce.client.errors import ClientError
from torchforce.client.gcloud import Cloud, Link, link_project
from torchforce.client.project import Project

SETUP = """From an empty Google Cloud project to a linked one (once, in a shell with gcloud):
  gcloud services enable container.googleapis.com artifactregistry.googleapis.com cloudbuild.googleapis.com \\
      storage.googleapis.com --project=PROJECT_ID
  gcloud iam service-accounts create tfcli --project=PROJECT_ID
  for role in container.admin storage.admin artifactregistry.admin cloudbuild.builds.editor \\
      iam.serviceAccountUser iam.serviceAccountAdmin; do
    gcloud projects add-iam-policy-binding PROJECT_ID --role=roles/$role \\
        --member=serviceAccount:tfcli@PROJECT_ID.iam.gserviceaccount.com
  done
  gcloud iam service-accounts keys create ~/tfcli-key.json \\
      --iam-account=tfcli@PROJECT_ID.iam.gserviceaccount.com"""


def add_link_arguments(parser: argparse.ArgumentParser, *, project_flag: bool) -> None:
    """The flags of a link (shared by ``tfcli init`` and ``tfcli gcloud link``)."""
    if project_flag:
        parser.add_argument("-r", "--remote-project-id", required=True, help="the Google Cloud project id")
    parser.add_argument("--key-file", help="the service account's JSON key (its path is kept, never its content)")
    parser.add_argument("--zone", help="where clusters go unless their spec says (default us-central1-a)")
    parser.add_argument("--service-account", help="the key's service account e-mail (default: read from the key)")
    parser.add_argument("--bucket", help="results and checkpoints (default gs://PROJECT_ID-tfcli)")
    parser.add_argument("--image", help="the workers' image (default REGION-docker.pkg.dev/PROJECT_ID/tfcli/...)")


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "gcloud",
        help="link the project to a Google Cloud project (for GKE)",
        description="The Google Cloud project that GKE clusters, the results bucket and the workers' image "
        "live in.\n\n" + SETUP,
        examples=["tfcli gcloud link -r my-rl-project --key-file ~/tfcli-key.json", "tfcli gcloud show"],
    )
    commands = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    link = add_command(
        commands,
        "link",
        help="link this project to a Google Cloud project (a service account key)",
        description="Activate the service account with its key (gcloud auth activate-service-account), make the "
        "results\nbucket if it does not exist, and record the link in .tfcli/project.json (readable by you "
        "alone).\nThe key stays where it is: only its path is recorded. Needs gcloud, kubectl and\n"
        "gke-gcloud-auth-plugin on PATH.\n"
        "tfcli runs gcloud and kubectl in its own gcloud configuration (CLOUDSDK_CONFIG=~/.config/tfcli/gcloud/"
        "ACCOUNT):\nyour own gcloud account and project stay as they are.\n\n" + SETUP,
        examples=[
            "tfcli gcloud link -r my-rl-project --key-file ~/tfcli-key.json",
            "tfcli gcloud link -r my-rl-project --key-file key.json --zone europe-west4-a --dry-run",
        ],
    )
    add_link_arguments(link, project_flag=True)
    link.add_argument("--dry-run", action="store_true", help="print the gcloud calls instead of running them")
    show = add_command(
        commands,
        "show",
        help="show the project's Google Cloud link",
        description="The linked Google Cloud project, zone, service account, key file path, bucket and image.",
        examples=["tfcli gcloud show", "tfcli gcloud show --json"],
    )
    show.add_argument("--json", action="store_true", help="machine-readable output")
    images = add_command(
        groups,
        "image",
        help="the workers' container image (for GKE)",
        description="The container image GKE workers run; its name is a setting of the link ('tfcli gcloud show').",
        examples=["tfcli image build --dry-run"],
    )
    image_commands = images.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    build = add_command(
        image_commands,
        "build",
        help="build the workers' image with Cloud Build",
        description="Build the image GKE workers run (the Dockerfile of the torchforce source tree) with Cloud "
        "Build\n(gcloud builds submit), into an Artifact Registry repository 'tfcli' it creates if needed. The "
        "image\nname is the link's (see 'tfcli gcloud show').",
        examples=["tfcli image build --dry-run", "tfcli image build --source ~/src/torchforce"],
    )
    build.add_argument("--source", help="the folder with the Dockerfile (default: torchforce's source tree)")
    build.add_argument("--dry-run", action="store_true", help="print the gcloud calls instead of running them")


def make_link(args: argparse.Namespace) -> Link:
    if not args.key_file:
        raise ClientError(
            "linking needs the service account's key file",
            hint="Give --key-file KEY.json (see 'tfcli gcloud link --help').",
        )
    return Link.make(
        args.remote_project_id,
        args.key_file,
        zone=args.zone,
        service_account=args.service_account,
        bucket=args.bucket,
        image=args.image,
    )


def report(link: Link, dry_run: bool, project: Project | None = None) -> None:
    """What linking did; with ``project``, also the experiments whose GKE runs stay in another bucket."""
    if dry_run:
        print("Dry run: nothing was changed.")
    else:
        print(f"Linked to the Google Cloud project '{link.project}' (zone {link.zone}) as {link.service_account}")
        print(f"  results: {link.bucket}; workers' image: {link.image}")
    for bucket, names in runs_elsewhere(project, link.bucket).items() if project is not None else ():
        many = len(names) > 1
        print(
            f"  {len(names)} experiment{'s' if many else ''} that ran on GKE ({', '.join(names)}) "
            f"{'keep their' if many else 'keeps its'} results and checkpoints in {bucket}, where tfcli reads and "
            f"resumes {'them' if many else 'it'}; a --fresh start moves {'them' if many else 'it'} to {link.bucket}"
        )
    if not dry_run:
        print("Next: tfcli image build, then tfcli cluster create -f single_node_cluster")


@command("gcloud", "link")
def gcloud_link(args: argparse.Namespace) -> None:
    project = Project.find()
    link = make_link(args)
    link_project(project, link, Cloud(link, dry_run=args.dry_run))
    report(link, args.dry_run, project)


def runs_elsewhere(project: Project, bucket: str) -> dict[str, list[str]]:
    """The experiments whose run is on GKE and keeps its results in a bucket other than ``bucket`` (the one it
    began in, ``gke/bucket.json``: see the GKE backend), by that bucket."""
    from torchforce.client.backends.gke import recorded_bucket

    found: dict[str, list[str]] = {}
    for record in project.store.experiments():
        if record.backend != "gke":
            continue
        try:
            other = recorded_bucket(project.root / "experiments" / record.name)
        except ClientError:  # damaged: the commands that read the run say so
            continue
        if other is not None and other != bucket:
            found.setdefault(other, []).append(record.name)
    return found


@command("gcloud", "show")
def gcloud_show(args: argparse.Namespace) -> None:
    link = Link.of(Project.find().settings)
    if args.json:
        print_json(link.to_settings())
        return
    rows = [[key.replace("_", " "), value] for key, value in link.to_settings().items()]
    print(format_table(["Setting", "Value"], rows))


def source_tree() -> Path:
    """The torchforce source tree this package was installed from (it has the Dockerfile)."""
    import torchforce

    root = Path(torchforce.__file__).resolve().parents[1]
    if not (root / "Dockerfile").is_file():
        raise ClientError(
            f"no Dockerfile next to the installed torchforce ({root})",
            hint="Give --source with a checkout of the torchforce repository.",
        )
    return root


@command("image", "build")
def image_build(args: argparse.Namespace) -> None:
    settings = Project.find().settings
    link = Link.for_dry_run(settings) if args.dry_run else Link.of(settings)
    source = Path(args.source).expanduser().resolve() if args.source else source_tree()
    if not (source / "Dockerfile").is_file():
        raise ClientError(f"{source} has no Dockerfile", hint="Give --source with a checkout of torchforce.")
    cloud = Cloud(link, dry_run=args.dry_run)
    where = [f"--location={link.region}", f"--project={link.project}"]
    found = cloud.run(
        ["gcloud", "artifacts", "repositories", "describe", "tfcli", *where, "--format=json"], check=False
    )
    if found.code != 0 or args.dry_run:
        cloud.run(["gcloud", "artifacts", "repositories", "create", "tfcli", "--repository-format=docker", *where])
    cloud.run(["gcloud", "builds", "submit", str(source), f"--tag={link.image}", f"--project={link.project}"])
    print("Dry run: nothing was changed." if args.dry_run else f"Built {link.image}")
