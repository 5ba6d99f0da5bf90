"""A fake ``gcloud`` for the tests: exactly the commands of the GKE contract, answered as the real tool answers
them (JSON on ``--format=json``, human text otherwise, gcloud's error lines on stderr and exit codes).

Anything outside the contract exits 2 the way gcloud's argument parser does (``Invalid choice``,
``unrecognized arguments``), so a client that strays from the contract fails its tests.

Credentials are gcloud's: ``auth activate-service-account`` makes the account the active one of the configuration
the call runs with (``CLOUDSDK_CONFIG``, else the user's default one: see ``common``) and ``--project`` its default
project; every other command fails as gcloud does when that configuration has no active account with credentials."""

from __future__ import annotations

import json
import re
import shutil
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

try:
    from . import common
except ImportError:  # run as a script: tests/fakecloud is on sys.path
    import common  # type: ignore[no-redef]

Exit = common.Exit
Store = common.Store

GLOBAL_FLAGS = {"--project": "value", "--format": "value", "--quiet": "bool", "-q": "bool", "--verbosity": "value"}
ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
CLUSTER_NAME_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")
BUCKET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
KNOWN_ADDONS = {
    "RayOperator",
    "GcsFuseCsiDriver",
    "HttpLoadBalancing",
    "HorizontalPodAutoscaling",
    "NetworkPolicy",
    "NodeLocalDNS",
    "GcePersistentDiskCsiDriver",
    "GcpFilestoreCsiDriver",
    "ConfigConnector",
    "BackupRestore",
}
MASTER_VERSION = "1.33.5-gke.1201000"


@dataclass
class Command:
    path: tuple[str, ...]
    handler: object
    positionals: tuple[int, int | None] = (0, 0)  # how many: at least, at most (None: any number)
    positional_name: str = "NAME"
    flags: dict[str, str] = field(default_factory=dict)  # name -> "bool" | "value" | "multi"
    project: bool = False  # --project required
    zone: bool = False  # --zone (or --region) required


@dataclass
class Call:
    name: str  # gcloud.container.clusters.create
    positionals: list[str]
    flags: dict


COMMANDS: dict[tuple[str, ...], Command] = {}


def command(path: str, **kwargs):
    def register(handler):
        spec = Command(tuple(path.split()), handler, **kwargs)
        COMMANDS[spec.path] = spec
        return handler

    return register


def main(argv: list[str] | None = None) -> int:
    return common.run_tool("gcloud", argv, dispatch)


def dispatch(store: Store, args: list[str]) -> int:
    spec, call = parse(args)
    if call.flags.get("--format") not in (None, "json"):
        raise Exit(
            2,
            f"ERROR: ({call.name}) fake cloud: only --format=json is in the contract, not {call.flags['--format']!r}\n",
        )
    if spec.project and not call.flags.get("--project"):
        raise Exit(1, f"ERROR: ({call.name}) The required property [project] is not currently set.\n")
    if spec.zone and not (call.flags.get("--zone") or call.flags.get("--region")):
        raise Exit(1, f"ERROR: ({call.name}) One of [--zone, --region] must be supplied: Please specify location.\n")
    if spec.path != ("auth", "activate-service-account"):
        check_credentials(store, call)
    return spec.handler(store, call) or 0


LOGIN_HINT = "Please run:\n\n  $ gcloud auth login\n\nto obtain new credentials.\n\n"


def check_credentials(store: Store, call: Call) -> None:
    """Fail as gcloud does when the configuration the call runs with has no active account, or none with
    credentials there."""
    folder = common.config_dir(store.root)
    account = common.properties(folder).get("account")
    if not account:
        raise Exit(
            1,
            f"ERROR: ({call.name}) You do not currently have an active account selected.\n"
            + LOGIN_HINT
            + "If you have already logged in with a different account, run:\n\n  $ gcloud config set account "
            "ACCOUNT\n\nto select an already authenticated account to use.\n",
        )
    if account not in common.credentials(folder):
        raise Exit(
            1,
            f"ERROR: ({call.name}) Your current active account [{account}] does not have any valid credentials\n"
            + LOGIN_HINT
            + "For service account, please activate it first:\n\n  $ gcloud auth activate-service-account ACCOUNT\n",
        )


# ---- parsing --------------------------------------------------------------------------------------------------


def parse(args: list[str]) -> tuple[Command, Call]:
    path, rest = split_command(args)
    spec = COMMANDS[path]
    name = "gcloud." + ".".join(path)
    known = {**GLOBAL_FLAGS, **spec.flags}
    flags: dict = {}
    positionals: list[str] = []
    unknown: list[str] = []
    index = 0
    while index < len(rest):
        token = rest[index]
        index += 1
        if not token.startswith("-") or token == "-":
            positionals.append(token)
            continue
        flag, eq, value = token.partition("=")
        kind = known.get(flag)
        if kind is None:
            unknown.append(token)
            continue
        if kind == "bool":
            if eq:
                raise Exit(2, f"ERROR: ({name}) argument {flag}: ignored explicit argument '{value}'\n")
            flags[flag] = True
            continue
        if not eq:
            if index >= len(rest):
                raise Exit(2, f"ERROR: ({name}) argument {flag}: expected one argument\n")
            value = rest[index]
            index += 1
        if kind == "multi":
            flags.setdefault(flag, []).append(value)
        else:
            flags[flag] = value
    least, most = spec.positionals
    if most is not None and len(positionals) > most:
        unknown += positionals[most:]
    if unknown:
        raise Exit(2, f"ERROR: ({name}) unrecognized arguments: {' '.join(unknown)}\n" + HELP_HINT)
    if len(positionals) < least:
        raise Exit(
            2,
            f"ERROR: ({name}) argument {spec.positional_name}: Must be specified.\n"
            f"Usage: gcloud {' '.join(path)} {spec.positional_name} [optional flags]\n",
        )
    return spec, Call(name, positionals, flags)


HELP_HINT = "\nTo search the help text of gcloud commands, run:\n  gcloud help -- SEARCH_TERMS\n"


def usage(path: tuple[str, ...]) -> str:
    return f"Usage: {' '.join(('gcloud', *path))} [optional flags] <command>\n"


def split_command(args: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The command's path (``container clusters create``) and the other arguments, global flags before the
    command included."""
    groups = {spec_path[:n] for spec_path in COMMANDS for n in range(len(spec_path))}
    path: tuple[str, ...] = ()
    rest: list[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if token.startswith("-"):
            rest.append(token)
            flag = token.partition("=")[0]
            if GLOBAL_FLAGS.get(flag) == "value" and "=" not in token and index < len(args):
                rest.append(args[index])
                index += 1
            continue
        candidate = (*path, token)
        if candidate in COMMANDS:
            return candidate, rest + args[index:]
        if candidate in groups:
            path = candidate
            continue
        where = ".".join(("gcloud", *path))
        outside = " ".join(("gcloud", *candidate))
        raise Exit(
            2,
            f"ERROR: ({where}) Invalid choice: '{token}'.\n"
            f"(fake cloud: `{outside}` is not a command of the GKE contract)\n" + usage(path),
        )
    where = ".".join(("gcloud", *path))
    raise Exit(2, f"ERROR: ({where}) Command name argument expected.\n" + usage(path))


# ---- output ---------------------------------------------------------------------------------------------------


def emit(call: Call, value, human: str = "") -> None:
    if call.flags.get("--format") == "json":
        sys.stdout.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
    elif human:
        sys.stdout.write(human if human.endswith("\n") else human + "\n")


def table(rows: list[list[str]]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n" for row in rows)


def err(call: Call, message: str, code: int = 1) -> Exit:
    return Exit(code, f"ERROR: ({call.name}) {message}\n")


def to_int(call: Call, flag: str, minimum: int = 0) -> int:
    raw = str(call.flags[flag])
    try:
        value = int(raw[:-2] if flag == "--disk-size" and raw.upper().endswith("GB") else raw)
    except ValueError:
        raise Exit(2, f"ERROR: ({call.name}) argument {flag}: invalid int value: '{raw}'\n") from None
    if value < minimum:
        raise Exit(2, f"ERROR: ({call.name}) argument {flag}: Value must be greater than or equal to {minimum}\n")
    return value


# ---- auth -----------------------------------------------------------------------------------------------------


@command(
    "auth activate-service-account",
    positionals=(0, 1),
    positional_name="ACCOUNT",
    flags={"--key-file": "value"},
)
def auth_activate(store: Store, call: Call) -> None:
    key = call.flags.get("--key-file")
    if not key:
        raise err(call, "Must provide --key-file.")
    email = read_key(call, Path(key))
    if call.positionals and call.positionals[0] != email:
        raise err(
            call,
            "The given account name does not match the account name in the key file.  "
            "This argument can be omitted when using .json keys.",
        )
    folder = common.config_dir(store.root)
    path = Path(key).resolve()
    stored = {"type": "service_account", "key_file": str(path), "key_sha256": common.sha256_of(path)}
    with store.transaction() as state:
        common.add_credentials(folder, email, stored)
        project = call.flags.get("--project")
        common.set_properties(folder, account=email, **({"project": project} if project else {}))
        state["auth"]["accounts"][email] = {**stored, "config": str(folder)}
    sys.stderr.write(f"Activated service account credentials for: [{email}]\n")


def read_key(call: Call, path: Path) -> str:
    """The client_email of a service-account key file; nothing of its content ever reaches a message."""
    try:
        text = path.read_text()
    except OSError as error:
        raise err(call, f"Unable to read file [{path}]: {error.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise err(call, f"Could not read json file {path}: {error.msg}") from None
    if not isinstance(data, dict) or data.get("type") != "service_account" or not data.get("client_email"):
        raise err(call, "The .json key file is not in a valid format.")
    return str(data["client_email"])


# ---- storage: buckets -----------------------------------------------------------------------------------------


def parse_gs(call: Call, url: str) -> tuple[str, str]:
    """``gs://bucket/some/path`` -> (bucket, "some/path")."""
    if not url.startswith("gs://") or len(url) <= 5:
        raise err(call, f"Expected a Cloud Storage URL, got: {url}")
    bucket, _, path = url[5:].partition("/")
    return bucket, path


def bucket_json(store: Store, state: dict, name: str) -> dict:
    meta = state["buckets"].get(name, {})
    created = meta.get("created", common.now_iso())
    return {
        "creation_time": created,
        "default_storage_class": "STANDARD",
        "location": meta.get("location", "US").upper(),
        "location_type": "region" if REGION_RE.match(meta.get("location", "").lower()) else "multi-region",
        "metageneration": 1,
        "name": name,
        "public_access_prevention": "inherited",
        "soft_delete_policy": {"effectiveTime": created, "retentionDurationSeconds": "604800"},
        "storage_url": f"gs://{name}/",
        "uniform_bucket_level_access": meta.get("uniform", False),
        "update_time": created,
    }


@command("storage buckets describe", positionals=(1, 1), positional_name="URL", flags={}, project=False)
def buckets_describe(store: Store, call: Call) -> None:
    bucket, path = parse_gs(call, call.positionals[0])
    if path:
        raise err(call, f"Expected a bucket URL, got: {call.positionals[0]}")
    with store.transaction() as state:
        if not store.bucket_dir(bucket).is_dir():
            raise err(call, f"gs://{bucket} not found: 404.")
        value = bucket_json(store, state, bucket)
    emit(call, value, yaml_text(value))


@command(
    "storage buckets create",
    positionals=(1, 1),
    positional_name="URL",
    flags={"--location": "value", "--uniform-bucket-level-access": "bool", "--default-storage-class": "value"},
    project=True,
)
def buckets_create(store: Store, call: Call) -> None:
    bucket, path = parse_gs(call, call.positionals[0])
    if path:
        raise err(call, f"Expected a bucket URL, got: {call.positionals[0]}")
    if not BUCKET_NAME_RE.match(bucket) or ".." in bucket:
        raise err(call, f"HTTPError 400: Invalid bucket name: '{bucket}'")
    sys.stderr.write(f"Creating gs://{bucket}/...\n")
    with store.transaction() as state:
        if store.bucket_dir(bucket).is_dir():
            raise err(
                call,
                "HTTPError 409: Your previous request to create the named bucket succeeded and you already own it.",
            )
        store.bucket_dir(bucket).mkdir(parents=True)
        state["buckets"][bucket] = {
            "project": call.flags["--project"],
            "location": call.flags.get("--location", "US"),
            "uniform": bool(call.flags.get("--uniform-bucket-level-access")),
            "created": common.now_iso(),
        }


# ---- storage: objects -----------------------------------------------------------------------------------------


class Objects:
    """gs:// URLs of one call resolved to the bucket folders of the fake cloud."""

    def __init__(self, store: Store, call: Call):
        self.store = store
        self.call = call

    def locate(self, url: str) -> tuple[str, str, Path]:
        bucket, path = parse_gs(self.call, url)
        folder = self.store.bucket_dir(bucket)
        if not folder.is_dir():
            raise err(self.call, f"gs://{bucket} not found: 404.")
        return bucket, path.strip("/"), folder / path.strip("/") if path.strip("/") else folder

    def under(self, local: Path) -> list[Path]:
        """The files under a folder (objects under a prefix), sorted."""
        return sorted(p for p in local.rglob("*") if p.is_file()) if local.is_dir() else []

    def no_match(self, urls: list[str]) -> Exit:
        return err(self.call, "The following URLs matched no objects or files:\n" + "\n".join(urls))


def copy_file(source: Path, target: Path, call: Call) -> None:
    if target.is_dir():
        raise err(call, f"fake cloud: cannot write {target.name!r}: a folder of that name exists")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise err(call, f"fake cloud: cannot write under {target.parent}: an object of that name exists") from None
    shutil.copyfile(source, target)


def is_gs(url: str) -> bool:
    return url.startswith("gs://")


def url_of(store: Store, path: Path) -> str:
    """gs://bucket/object for a path in a bucket folder, else file://PATH."""
    buckets = (store.root / "buckets").resolve()
    resolved = path.resolve()
    if buckets in resolved.parents:
        bucket, *rest = resolved.relative_to(buckets).parts
        return f"gs://{bucket}/{'/'.join(rest)}"
    return f"file://{resolved}"


def remove_empty_parents(path: Path, stop: Path) -> None:
    path = path.parent
    while path != stop and stop in path.parents:
        try:
            path.rmdir()
        except OSError:
            return
        path = path.parent


@command(
    "storage cp",
    positionals=(2, None),
    positional_name="SOURCE DESTINATION",
    flags={"--recursive": "bool", "-r": "bool", "-R": "bool", "--no-clobber": "bool", "-n": "bool"},
)
def storage_cp(store: Store, call: Call) -> None:
    objects = Objects(store, call)
    recursive = any(call.flags.get(f) for f in ("--recursive", "-r", "-R"))
    *sources, destination = call.positionals
    plan: list[tuple[Path, str, Path]] = []  # (source file, destination URL for messages, destination path)
    missing = []
    for source in sources:
        found = resolve_source(objects, source, recursive)
        if not found:
            missing.append(source)
        for local, relative in found:
            plan.append((local, *destination_of(objects, source, relative, destination, len(sources) > 1)))
    for local, shown, target in plan:
        sys.stderr.write(f"Copying {url_of(store, local)} to {shown}\n")
        if call.flags.get("--no-clobber") or call.flags.get("-n"):
            if target.exists():
                continue
        copy_file(local, target, call)
    if plan:
        sys.stderr.write(f"  Completed files {len(plan)}/{len(plan)}\n")
    if missing:
        raise objects.no_match(missing)


def resolve_source(objects: Objects, source: str, recursive: bool) -> list[tuple[Path, str]]:
    """(file, path relative to what the copy names) for each file a source names; [] when it names none."""
    if is_gs(source):
        _, path, local = objects.locate(source)
        if local.is_file() and path:
            return [(local, local.name)]
        if recursive and local.is_dir() and path:
            return [(file, f"{local.name}/{file.relative_to(local).as_posix()}") for file in objects.under(local)]
        return []
    local = Path(source)
    if local.is_file():
        return [(local, local.name)]
    if local.is_dir():
        if not recursive:
            raise err(objects.call, f'Omitting directory "{url_of(objects.store, local)}". (Did you mean to do cp -r?)')
        name = local.resolve().name
        return [(file, f"{name}/{file.relative_to(local).as_posix()}") for file in objects.under(local)]
    return []


def destination_of(objects: Objects, source: str, relative: str, destination: str, many: bool) -> tuple[str, Path]:
    """Where one file goes: into the destination as a folder when it ends with '/', exists as a folder, or a
    recursive/many-source copy names it; else the destination names the copy itself (the file, or the
    folder's new name)."""
    if is_gs(destination):
        _, path, target = objects.locate(destination)
        as_folder = destination.endswith("/") or not path or target.is_dir() or many
    else:
        target = Path(destination)
        as_folder = destination.endswith("/") or target.is_dir() or many
    _, _, inner = relative.partition("/")
    if as_folder:
        final = target / relative
    elif inner:  # a folder copied to a new name: its contents go under the destination itself
        final = target / inner
    else:
        final = target
    return url_of(objects.store, final), final


@command("storage cat", positionals=(1, None), positional_name="URL", flags={})
def storage_cat(store: Store, call: Call) -> None:
    objects = Objects(store, call)
    missing = []
    for url in call.positionals:
        _, path, local = objects.locate(url)
        if not path or not local.is_file():
            missing.append(url)
            continue
        sys.stdout.buffer.write(local.read_bytes())
    sys.stdout.flush()
    if missing:
        raise objects.no_match(missing)


@command("storage ls", positionals=(0, None), positional_name="URL", flags={"--recursive": "bool", "-r": "bool"})
def storage_ls(store: Store, call: Call) -> None:
    objects = Objects(store, call)
    if not call.positionals:
        for folder in sorted((store.root / "buckets").iterdir()):
            sys.stdout.write(f"gs://{folder.name}/\n")
        return
    recursive = call.flags.get("--recursive") or call.flags.get("-r")
    lines = []
    for url in call.positionals:
        bucket, path, local = objects.locate(url)
        if local.is_file() and path:
            lines.append(f"gs://{bucket}/{path}")
        elif local.is_dir():
            lines += listing(store, bucket, local, bool(recursive))
    if not lines:
        raise err(call, "One or more URLs matched no objects.")
    sys.stdout.write("\n".join(lines) + "\n")


def listing(store: Store, bucket: str, folder: Path, recursive: bool) -> list[str]:
    root = store.bucket_dir(bucket)

    def url(path: Path) -> str:
        return f"gs://{bucket}/{path.relative_to(root).as_posix()}"

    if recursive:
        return [url(file) for file in sorted(folder.rglob("*")) if file.is_file()]
    entries = []
    for child in sorted(folder.iterdir()):
        if child.is_file():
            entries.append(url(child))
        elif any(p.is_file() for p in child.rglob("*")):
            entries.append(url(child) + "/")
    return entries


@command(
    "storage rm",
    positionals=(1, None),
    positional_name="URLS",
    flags={"--recursive": "bool", "-r": "bool", "-R": "bool", "--all-versions": "bool", "-a": "bool"},
)
def storage_rm(store: Store, call: Call) -> None:
    objects = Objects(store, call)
    recursive = any(call.flags.get(f) for f in ("--recursive", "-r", "-R"))
    missing = []
    removed = 0
    sys.stderr.write("Removing objects:\n")
    for url in call.positionals:
        bucket, path, local = objects.locate(url)
        root = store.bucket_dir(bucket)
        targets = [local] if (local.is_file() and path) else []
        if recursive and local.is_dir():
            targets += objects.under(local)
        if not targets and not (recursive and not path):
            missing.append(url)
        for target in targets:
            sys.stderr.write(f"Removing gs://{bucket}/{target.relative_to(root).as_posix()}...\n")
            target.unlink()
            remove_empty_parents(target, root)
            removed += 1
        if recursive and not path:  # the bucket itself goes too
            sys.stderr.write(f"Removing gs://{bucket}/...\n")
            shutil.rmtree(root)
            with store.transaction() as state:
                state["buckets"].pop(bucket, None)
    if removed:
        sys.stderr.write(f"  Completed {removed}/{removed}\n")
    if missing:
        raise objects.no_match(missing)


@command(
    "storage rsync",
    positionals=(2, 2),
    positional_name="SOURCE DESTINATION",
    flags={"--recursive": "bool", "-r": "bool", "--delete-unmatched-destination-objects": "bool"},
)
def storage_rsync(store: Store, call: Call) -> None:
    objects = Objects(store, call)
    recursive = call.flags.get("--recursive") or call.flags.get("-r")
    source, destination = call.positionals
    source_dir = objects.locate(source)[2] if is_gs(source) else Path(source)
    target_dir = objects.locate(destination)[2] if is_gs(destination) else Path(destination)
    if not is_gs(source) and not source_dir.is_dir():
        raise objects.no_match([source])
    files = objects.under(source_dir) if recursive else sorted(p for p in source_dir.glob("*") if p.is_file())
    wanted = {file.relative_to(source_dir) for file in files}
    if not is_gs(destination):
        target_dir.mkdir(parents=True, exist_ok=True)
    for file in files:
        target = target_dir / file.relative_to(source_dir)
        if target.is_file() and target.read_bytes() == file.read_bytes():
            continue
        sys.stderr.write(f"Copying {url_of(store, file)} to {url_of(store, target)}\n")
        copy_file(file, target, call)
    if call.flags.get("--delete-unmatched-destination-objects"):
        for extra in objects.under(target_dir):
            if extra.relative_to(target_dir) not in wanted and (recursive or extra.parent == target_dir):
                extra.unlink()


# ---- artifacts and builds ---------------------------------------------------------------------------------------


def repository_key(call: Call) -> str:
    location = call.flags.get("--location")
    if not location:
        raise err(call, "The required property [location] is not currently set.")
    return f"{call.flags['--project']}/{location}/{call.positionals[0]}"


def repository_json(key: str, record: dict) -> dict:
    project, location, name = key.split("/")
    return {
        "createTime": record["created"],
        "format": record["format"],
        "mode": "STANDARD_REPOSITORY",
        "name": f"projects/{project}/locations/{location}/repositories/{name}",
        "updateTime": record["created"],
        "description": record.get("description", ""),
    }


@command(
    "artifacts repositories describe",
    positionals=(1, 1),
    positional_name="REPOSITORY",
    flags={"--location": "value"},
    project=True,
)
def repositories_describe(store: Store, call: Call) -> None:
    key = repository_key(call)
    with store.transaction() as state:
        record = state["repositories"].get(key)
    if record is None:
        raise err(call, "NOT_FOUND: Requested entity was not found.")
    value = common.prune(repository_json(key, record))
    emit(call, value, yaml_text(value))


@command(
    "artifacts repositories create",
    positionals=(1, 1),
    positional_name="REPOSITORY",
    flags={"--location": "value", "--repository-format": "value", "--description": "value"},
    project=True,
)
def repositories_create(store: Store, call: Call) -> None:
    key = repository_key(call)
    kind = str(call.flags.get("--repository-format", "")).lower()
    if kind not in ("docker", "maven", "npm", "python", "apt", "yum", "go", "generic", "kfp"):
        raise Exit(2, f"ERROR: ({call.name}) argument --repository-format: Invalid choice: '{kind}'.\n")
    with store.transaction() as state:
        if key in state["repositories"]:
            raise err(call, f"ALREADY_EXISTS: the repository already exists: {call.positionals[0]}")
        state["repositories"][key] = {
            "format": kind.upper(),
            "created": common.now_iso(),
            "description": call.flags.get("--description", ""),
        }
    project, location, name = key.split("/")
    sys.stderr.write(
        f"Create request issued for: [{name}]\n"
        f"Waiting for operation [projects/{project}/locations/{location}/operations/{uuid.uuid4()}] to complete"
        "...done.\n"
        f"Created repository [{name}].\n"
    )


IMAGE_RE = re.compile(r"^(?P<location>[a-z0-9-]+)-docker\.pkg\.dev/(?P<project>[^/]+)/(?P<repo>[^/]+)/(?P<name>[^:@]+)")


@command(
    "builds submit",
    positionals=(1, 1),
    positional_name="SOURCE",
    flags={"--tag": "value", "-t": "value", "--timeout": "value", "--region": "value", "--machine-type": "value"},
    project=True,
)
def builds_submit(store: Store, call: Call) -> None:
    source = Path(call.positionals[0])
    image = call.flags.get("--tag") or call.flags.get("-t")
    if not source.exists():
        raise err(call, f"could not find source [{source}]")
    if not image:
        raise err(call, "fake cloud: only `builds submit SOURCE --tag=IMAGE` is in the contract")
    if not (source / "Dockerfile").is_file():
        raise err(call, "Invalid value for [source]: Dockerfile required when specifying --tag")
    build = str(uuid.uuid4())
    sys.stderr.write(
        f"Creating temporary archive of the files in [{source}] (less those .gcloudignore leaves out).\n"
        f"Created [https://cloudbuild.googleapis.com/v1/projects/{call.flags['--project']}/locations/global/builds/"
        f"{build}].\n"
    )
    match = IMAGE_RE.match(image)
    with store.transaction() as state:
        repo = f"{match['project']}/{match['location']}/{match['repo']}" if match else None
        if repo not in state["repositories"]:
            sys.stdout.write(f'name unknown: Repository "{match["repo"] if match else image}" not found\n')
            raise err(call, f'build {build} completed with status "FAILURE"')
        tagged = image if ":" in image.rsplit("/", 1)[-1] else image + ":latest"
        state["images"][tagged] = {
            "source": str(source.resolve()),
            "project": call.flags["--project"],
            "dockerfile_sha256": common.sha256_of(source / "Dockerfile"),
            "build": build,
            "created": common.now_iso(),
        }
    sys.stdout.write(
        "DONE\n"
        + table(
            [
                ["ID", "CREATE_TIME", "DURATION", "SOURCE", "IMAGES", "STATUS"],
                [build, common.now_iso(), "1M2S", str(source), tagged, "SUCCESS"],
            ]
        )
    )


# ---- iam ------------------------------------------------------------------------------------------------------


MEMBER_RE = re.compile(r"^(user|serviceAccount|group|domain|principal|principalSet):\S+$")
WORKLOAD_MEMBER_RE = re.compile(r"^serviceAccount:(?P<pool>[^\[]+\.svc\.id\.goog)\[(?P<ns>[^/\]]+)/(?P<ksa>[^\]]+)\]$")


@command(
    "iam service-accounts add-iam-policy-binding",
    positionals=(1, 1),
    positional_name="SERVICE_ACCOUNT",
    flags={"--role": "value", "--member": "value", "--condition": "value"},
    project=True,
)
def iam_binding(store: Store, call: Call) -> None:
    account = call.positionals[0]
    role, member = call.flags.get("--role"), call.flags.get("--member")
    if not role or not member:
        raise Exit(2, f"ERROR: ({call.name}) argument --member --role: Must be specified.\n")
    if not EMAIL_RE.match(account):
        raise err(
            call,
            f"INVALID_ARGUMENT: Invalid form of account ID {account}. "
            "Should be [Gaia ID |Email |Unique ID |] of the account",
        )
    if not MEMBER_RE.match(member):
        raise err(call, f"INVALID_ARGUMENT: Invalid principal: {member}")
    if not (role.startswith("roles/") or re.match(r"^(projects|organizations)/[^/]+/roles/", role)):
        raise err(call, f"INVALID_ARGUMENT: Role ({role}) does not exist in the resource's hierarchy.")
    with store.transaction() as state:
        workload = WORKLOAD_MEMBER_RE.match(member)
        if workload and not any(
            c.get("workloadIdentityConfig", {}).get("workloadPool") == workload["pool"]
            for c in state["clusters"].values()
        ):
            raise err(
                call,
                f"INVALID_ARGUMENT: Identity Pool does not exist ({workload['pool']}). Please check that you "
                "specified a valid resource name as returned in the `name` attribute in the configuration API.",
            )
        policy = state["iam"].setdefault(account, {"bindings": [], "version": 1})
        binding = next((b for b in policy["bindings"] if b["role"] == role), None)
        if binding is None:
            binding = {"role": role, "members": []}
            policy["bindings"].append(binding)
        if member not in binding["members"]:
            binding["members"] = sorted([*binding["members"], member])
        policy["etag"] = "BwY" + uuid.uuid4().hex[:9]
        value = {"bindings": sorted(policy["bindings"], key=lambda b: b["role"]), "etag": policy["etag"], "version": 1}
    sys.stderr.write(f"Updated IAM policy for serviceAccount [{account}].\n")
    emit(call, value, yaml_text(value))


# ---- compute --------------------------------------------------------------------------------------------------


def filter_zone(call: Call) -> str | None:
    raw = call.flags.get("--filter")
    if raw is None:
        return None
    match = re.fullmatch(r"\s*zone\s*[:=]\s*\(?\s*([a-z0-9-]+)\s*\)?\s*", raw)
    if not match:
        raise Exit(2, f"ERROR: ({call.name}) fake cloud: only --filter=zone:ZONE is in the contract, not {raw!r}\n")
    return match.group(1)


@command("compute accelerator-types list", flags={"--filter": "value"}, project=True)
def accelerator_types_list(store: Store, call: Call) -> None:
    project = call.flags["--project"]
    wanted = filter_zone(call)
    with store.transaction() as state:
        zones = sorted(set(common.DEFAULT_ZONE_ACCELERATORS) | set(state["accelerators"]))
        items = []
        for zone in zones:
            if wanted is not None and zone != wanted:
                continue
            for name in common.accelerator_table(state, zone):
                description, cards = common.ACCELERATORS.get(name, (name, 8))
                zone_url = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
                items.append(
                    {
                        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
                        "description": description,
                        "id": str(10000 + len(items)),
                        "kind": "compute#acceleratorType",
                        "maximumCardsPerInstance": cards,
                        "name": name,
                        "selfLink": f"{zone_url}/acceleratorTypes/{name}",
                        "zone": zone_url,
                    }
                )
    rows = [["NAME", "ZONE", "DESCRIPTION"]] + [
        [i["name"], i["zone"].rsplit("/", 1)[1], i["description"]] for i in items
    ]
    emit(call, items, table(rows) if items else "")
    if not items and call.flags.get("--format") != "json":
        sys.stderr.write("Listed 0 items.\n")


def cluster_nodes(project: str, cluster: dict) -> list[dict]:
    """The nodes of a cluster, as ``kubectl get nodes`` lists them (GKE nodes are Compute Engine instances)."""
    try:
        from . import fake_kubectl
    except ImportError:  # run as a script: tests/fakecloud is on sys.path
        import fake_kubectl  # type: ignore[no-redef]

    return fake_kubectl.cluster_nodes(project, cluster)


def instance_of(store: Store, call: Call, instance: str) -> tuple[str, str, str]:
    """(user, instance, zone) of ``[USER@]INSTANCE``: a node of a cluster in ``--project`` and ``--zone``; else
    gcloud's "Could not fetch resource" (exit 1)."""
    user, _, name = instance.rpartition("@")
    project, zone = call.flags["--project"], call.flags["--zone"]
    with store.transaction() as state:
        for key, cluster in sorted(state["clusters"].items()):
            if key.split("/")[0] != project:
                continue
            for node in cluster_nodes(project, cluster):
                if (
                    node["metadata"]["name"] == name
                    and node["metadata"]["labels"]["topology.kubernetes.io/zone"] == zone
                ):
                    return user, name, zone
    raise err(
        call,
        f"Could not fetch resource:\n - The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found",
    )


SSH_FLAGS = {
    "--zone": "value",
    "--command": "value",
    "--internal-ip": "bool",
    "--tunnel-through-iap": "bool",
    "--strict-host-key-checking": "value",
}


@command("compute ssh", positionals=(1, 1), positional_name="[USER@]INSTANCE", flags=SSH_FLAGS, project=True, zone=True)
def compute_ssh(store: Store, call: Call) -> None:
    """Runs nothing: the command is recorded (``state["ssh"]``) and a line saying what ran where is its output."""
    command = call.flags.get("--command")
    if command is None:
        raise Exit(
            2, f"ERROR: ({call.name}) fake cloud: an interactive session is not in the contract (give --command)\n"
        )
    user, node, zone = instance_of(store, call, call.positionals[0])
    with store.transaction() as state:
        state.setdefault("ssh", []).append(
            {"project": call.flags["--project"], "zone": zone, "node": node, "user": user, "command": command}
        )
    sys.stdout.write(f"fake cloud: ran on {node} in {zone}: {command}\n")


@command(
    "compute scp",
    positionals=(2, None),
    positional_name="[[USER@]INSTANCE:]SRC [[USER@]INSTANCE:]DEST",
    flags={"--zone": "value", "--recurse": "bool", "--internal-ip": "bool", "--tunnel-through-iap": "bool"},
    project=True,
    zone=True,
)
def compute_scp(store: Store, call: Call) -> None:
    """Local SOURCE(s) to ``NODE:TARGET`` (the contract's direction): each source must exist here (a folder needs
    --recurse); nothing is copied, what would be is recorded (``state["scp"]``: the files' sha256)."""
    *sources, destination = call.positionals
    remote = re.fullmatch(r"(?P<instance>(?:[^@:/]+@)?[a-z][-a-z0-9]*):(?P<target>.*)", destination)
    if remote is None or any(re.match(r"[^/]*:", source) for source in sources):
        raise Exit(2, f"ERROR: ({call.name}) fake cloud: only `scp LOCAL... INSTANCE:TARGET` is in the contract\n")
    user, node, zone = instance_of(store, call, remote["instance"])
    target = remote["target"]
    failed = f"ERROR: ({call.name}) [/usr/bin/scp] exited with return code [1].\n"
    copies = []
    for source in sources:
        path = Path(source)
        if not path.exists():
            raise Exit(1, f"{source}: No such file or directory\n{failed}")
        if path.is_dir() and not call.flags.get("--recurse"):
            raise Exit(1, f"scp: {source}: not a regular file\n{failed}")
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        copies.append(
            {
                "project": call.flags["--project"],
                "zone": zone,
                "node": node,
                "user": user,
                "source": str(path.resolve()),
                "target": target,
                "files": {
                    (file.name if file == path else file.relative_to(path).as_posix()): common.sha256_of(file)
                    for file in files
                },
            }
        )
    with store.transaction() as state:
        state.setdefault("scp", []).extend(copies)
    for copy in copies:
        sys.stderr.write(f"fake cloud: copied {copy['source']} to {node}:{target} in {zone}\n")


# ---- container ------------------------------------------------------------------------------------------------


CLUSTER_CREATE_FLAGS = {
    "--zone": "value",
    "--region": "value",
    "--machine-type": "value",
    "--num-nodes": "value",
    "--disk-size": "value",
    "--addons": "value",
    "--workload-pool": "value",
    "--service-account": "value",
    "--release-channel": "value",
    "--spot": "bool",
    "--enable-autoscaling": "bool",
    "--min-nodes": "value",
    "--max-nodes": "value",
}
LOCATION_FLAGS = {"--zone": "value", "--region": "value"}


def location_of(call: Call) -> str:
    location = call.flags.get("--zone") or call.flags.get("--region")
    if not (ZONE_RE.match(location) or REGION_RE.match(location)):
        raise err(call, f'ResponseError: code=400, message=Location "{location}" is not a valid zone or region.')
    return location


def cluster_key(call: Call, name: str) -> str:
    return f"{call.flags['--project']}/{location_of(call)}/{name}"


def cluster_path(key: str) -> str:
    project, location, name = key.split("/")
    return f"projects/{project}/zones/{location}/clusters/{name}"


def autoscaling_of(call: Call) -> dict:
    if not call.flags.get("--enable-autoscaling"):
        if "--min-nodes" in call.flags or "--max-nodes" in call.flags:
            raise err(call, "Cannot specify --min-nodes or --max-nodes without --enable-autoscaling.", 1)
        return {}
    if "--max-nodes" not in call.flags:
        raise err(call, "Must specify --max-nodes (or --total-max-nodes) when --enable-autoscaling is set.")
    low, high = to_int(call, "--min-nodes") if "--min-nodes" in call.flags else 0, to_int(call, "--max-nodes", 1)
    if low > high:
        raise err(
            call, "ResponseError: code=400, message=Max node count must be greater than or equal to min node count."
        )
    return {"enabled": True, "minNodeCount": low, "maxNodeCount": high, "locationPolicy": "BALANCED"}


def node_pool(call: Call, name: str, accelerators: list[dict]) -> dict:
    machine = call.flags.get("--machine-type", "e2-medium")
    if not re.match(r"^[a-z0-9]+-[a-z0-9-]+$", machine):
        raise err(call, f'ResponseError: code=400, message=Invalid machine type: "{machine}".')
    nodes = to_int(call, "--num-nodes") if "--num-nodes" in call.flags else 3
    disk = to_int(call, "--disk-size", 10) if "--disk-size" in call.flags else 100
    autoscaling = autoscaling_of(call)
    return {
        "name": name,
        "config": {
            "machineType": machine,
            "diskSizeGb": disk,
            "diskType": "pd-balanced",
            "imageType": "COS_CONTAINERD",
            "serviceAccount": call.flags.get("--service-account", "default"),
            "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
            "spot": bool(call.flags.get("--spot")),
            "accelerators": accelerators,
            "workloadMetadataConfig": {"mode": "GKE_METADATA"},
        },
        "initialNodeCount": nodes,
        "autoscaling": autoscaling,
        "management": {"autoUpgrade": True, "autoRepair": True},
        "status": "RUNNING",
        "version": MASTER_VERSION,
    }


def parse_addons(call: Call) -> set[str]:
    addons = {a for a in str(call.flags.get("--addons", "")).split(",") if a}
    unknown = sorted(addons - KNOWN_ADDONS)
    if unknown:
        raise Exit(
            2,
            f"ERROR: ({call.name}) argument --addons: {unknown[0]} must be one of "
            f"[{', '.join(sorted(KNOWN_ADDONS))}]\n",
        )
    return addons


def check_cluster_create(call: Call, name: str) -> None:
    project = call.flags["--project"]
    if not CLUSTER_NAME_RE.match(name):
        raise err(
            call,
            f'ResponseError: code=400, message=Invalid value for field "cluster.name": "{name}". Must be a match of '
            "regex '(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)' (only alphanumerics and '-' allowed, must start with a "
            "letter and end with an alphanumeric, and must be no longer than 40 characters).",
        )
    pool = call.flags.get("--workload-pool")
    if pool is not None and pool != f"{project}.svc.id.goog":
        raise err(
            call,
            f'ResponseError: code=400, message=Workload Identity Pool "{pool}" is invalid: it must be of the form '
            f'"{project}.svc.id.goog".',
        )
    channel = call.flags.get("--release-channel")
    if channel is not None and channel not in ("rapid", "regular", "stable", "extended", "None"):
        raise Exit(2, f"ERROR: ({call.name}) argument --release-channel: Invalid choice: '{channel}'.\n")
    account = call.flags.get("--service-account")
    if account is not None and not EMAIL_RE.match(account):
        raise err(call, f'ResponseError: code=400, message=Invalid service account "{account}".')


@command(
    "container clusters create",
    positionals=(1, 1),
    flags={**CLUSTER_CREATE_FLAGS},
    project=True,
    zone=True,
)
def clusters_create(store: Store, call: Call) -> None:
    name = call.positionals[0]
    key = cluster_key(call, name)
    check_cluster_create(call, name)
    addons = parse_addons(call)
    pool = node_pool(call, "default-pool", [])
    project, location, _ = key.split("/")
    sys.stderr.write(f"Creating cluster {name} in {location}...\n")
    with store.transaction() as state:
        if key in state["clusters"]:
            raise err(call, f"ResponseError: code=409, message=Already exists: {cluster_path(key)}.")
        number = store.next_number(state)
        cluster = {
            "name": name,
            "location": location,
            "zone": location,
            "locations": [location],
            "status": "RUNNING",
            "createTime": common.now_iso(),
            "endpoint": f"34.{number % 250}.{number // 250 % 250}.{number % 7 + 1}",
            "currentMasterVersion": MASTER_VERSION,
            "currentNodeVersion": MASTER_VERSION,
            "initialClusterVersion": MASTER_VERSION,
            "releaseChannel": {"channel": str(call.flags.get("--release-channel", "regular")).upper()},
            "workloadIdentityConfig": {"workloadPool": call.flags.get("--workload-pool", "")},
            "nodeConfig": pool["config"],
            "nodePools": [pool],
            "addonsConfig": {
                "rayOperatorConfig": {"enabled": "RayOperator" in addons},
                "gcsFuseCsiDriverConfig": {"enabled": "GcsFuseCsiDriver" in addons},
                "gcePersistentDiskCsiDriverConfig": {"enabled": True},
                "networkPolicyConfig": {"disabled": True},
            },
            "network": "default",
            "subnetwork": "default",
            "selfLink": f"https://container.googleapis.com/v1/{cluster_path(key)}",
            "id": uuid.uuid4().hex,
        }
        refresh_node_count(cluster)
        state["clusters"][key] = cluster
        value = common.prune(cluster)
    sys.stderr.write(f"Created [https://container.googleapis.com/v1/{cluster_path(key)}].\n")
    del project
    emit(call, [value], cluster_table([value]))


def refresh_node_count(cluster: dict) -> None:
    cluster["currentNodeCount"] = sum(pool["initialNodeCount"] for pool in cluster["nodePools"])


def cluster_table(clusters: list[dict]) -> str:
    rows = [["NAME", "LOCATION", "MASTER_VERSION", "MASTER_IP", "MACHINE_TYPE", "NODE_VERSION", "NUM_NODES", "STATUS"]]
    for c in clusters:
        machine = c.get("nodePools", [{}])[0].get("config", {}).get("machineType", "")
        rows.append(
            [
                c["name"],
                c["location"],
                c["currentMasterVersion"],
                c["endpoint"],
                machine,
                c["currentNodeVersion"],
                str(c.get("currentNodeCount", 0)),
                c["status"],
            ]
        )
    return table(rows)


@command("container clusters list", flags={**LOCATION_FLAGS, "--filter": "value", "--limit": "value"}, project=True)
def clusters_list(store: Store, call: Call) -> None:
    project = call.flags["--project"]
    where = call.flags.get("--zone") or call.flags.get("--region")
    if call.flags.get("--filter") or call.flags.get("--limit"):
        raise Exit(2, f"ERROR: ({call.name}) fake cloud: --filter/--limit are not in the contract\n")
    with store.transaction() as state:
        clusters = [
            common.prune(c)
            for key, c in sorted(state["clusters"].items())
            if key.split("/")[0] == project and (where is None or c["location"].startswith(where))
        ]
    if call.flags.get("--format") == "json":
        emit(call, clusters)
    elif clusters:
        sys.stdout.write(cluster_table(clusters))
    else:
        sys.stderr.write("Listed 0 items.\n")


@command(
    "container clusters delete",
    positionals=(1, None),
    flags={**LOCATION_FLAGS, "--async": "bool"},
    project=True,
    zone=True,
)
def clusters_delete(store: Store, call: Call) -> None:
    keys = [cluster_key(call, name) for name in call.positionals]
    with store.transaction() as state:
        for key in keys:
            if key not in state["clusters"]:
                raise err(call, f"ResponseError: code=404, message=Not found: {cluster_path(key)}.")
    if not call.flags.get("--quiet") and not call.flags.get("-q"):
        listed = "".join(f" - [{k.split('/')[2]}] in [{k.split('/')[1]}]\n" for k in keys)
        sys.stderr.write(f"The following clusters will be deleted.\n{listed}\nDo you want to continue (Y/n)?  ")
        answer = sys.stdin.readline().strip().lower() if common.stdin_kind() in ("pipe", "file") else ""
        if answer.startswith("n"):
            raise err(call, "Aborted by user.")
    for key in keys:
        sys.stderr.write(f"Deleting cluster {key.split('/')[2]}...\n")
        with store.transaction() as state:
            delete_cluster(store, state, key)
        sys.stderr.write(f"Deleted [https://container.googleapis.com/v1/{cluster_path(key)}].\n")


def delete_cluster(store: Store, state: dict, key: str) -> None:
    """The cluster's kube contexts go (gcloud purges its kubeconfig entries), and with them every object and
    every process its RayJobs started."""
    for context in [c for c, k in state["contexts"].items() if k == key]:
        for record in state["objects"].pop(context, {}).values():
            run = (record.get("job") or {}).get("run")
            if run:
                common.kill_group(run["pid"], run["starttime"], run["marker"])
        del state["contexts"][context]
        state.get("context_namespaces", {}).pop(context, None)
        if state["current_context"] == context:
            state["current_context"] = None
    del state["clusters"][key]


def existing_cluster(call: Call, state: dict, name: str) -> tuple[str, dict]:
    key = cluster_key(call, name)
    if key not in state["clusters"]:
        raise err(call, f"ResponseError: code=404, message=Not found: {cluster_path(key)}.")
    return key, state["clusters"][key]


@command("container clusters get-credentials", positionals=(1, 1), flags={**LOCATION_FLAGS}, project=True, zone=True)
def clusters_get_credentials(store: Store, call: Call) -> None:
    with store.transaction() as state:
        key, _ = existing_cluster(call, state, call.positionals[0])
        project, location, name = key.split("/")
        context = f"gke_{project}_{location}_{name}"
        state["contexts"][context] = key
        state.get("context_namespaces", {}).pop(context, None)  # gcloud writes the context anew: no namespace
        state["objects"].setdefault(context, {})
        state["current_context"] = context
    sys.stderr.write("Fetching cluster endpoint and auth data.\n")
    if shutil.which(common.AUTH_PLUGIN) is None:  # gcloud writes the entry all the same, and only warns
        sys.stderr.write(
            f"CRITICAL: ACTION REQUIRED: {common.AUTH_PLUGIN}, which is needed for continued use of kubectl, was not "
            f"found or is not executable. Install {common.AUTH_PLUGIN} for use with kubectl by following "
            "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin\n"
        )
    sys.stderr.write(f"kubeconfig entry generated for {name}.\n")


@command("container clusters describe", positionals=(1, 1), flags={**LOCATION_FLAGS}, project=True, zone=True)
def clusters_describe(store: Store, call: Call) -> None:
    with store.transaction() as state:
        _, cluster = existing_cluster(call, state, call.positionals[0])
        value = common.prune(cluster)
    emit(call, value, yaml_text(value))


def parse_accelerator(call: Call) -> dict:
    raw = call.flags.get("--accelerator")
    parts = dict(item.partition("=")[::2] for item in str(raw).split(",") if item)
    unknown = sorted(
        set(parts)
        - {
            "type",
            "count",
            "gpu-driver-version",
            "gpu-partition-size",
            "gpu-sharing-strategy",
            "max-shared-clients-per-gpu",
        }
    )
    if unknown or "type" not in parts:
        problem = (
            f"valid keys are [count, gpu-driver-version, type]; received: {unknown[0]}"
            if unknown
            else "type is required"
        )
        raise Exit(2, f"ERROR: ({call.name}) argument --accelerator: {problem}\n")
    count = parts.get("count", "1")
    if not count.isdigit() or int(count) < 1:
        raise Exit(2, f"ERROR: ({call.name}) argument --accelerator: count must be a positive integer: {count}\n")
    driver = parts.get("gpu-driver-version")
    if driver is not None and driver.lower() not in ("default", "latest", "disabled", "installation_disabled"):
        raise Exit(
            2,
            f"ERROR: ({call.name}) argument --accelerator: gpu-driver-version must be one of "
            "[default, latest, disabled]\n",
        )
    accelerator = {"acceleratorType": parts["type"], "acceleratorCount": count}
    if driver is not None:
        accelerator["gpuDriverInstallationConfig"] = {"gpuDriverVersion": driver.upper()}
    return accelerator


def check_accelerator(call: Call, state: dict, zone: str, accelerator: dict) -> None:
    kind, count = accelerator["acceleratorType"], int(accelerator["acceleratorCount"])
    if kind not in common.accelerator_table(state, zone):
        raise err(
            call,
            f'ResponseError: code=400, message=Accelerator type "{kind}" does not exist in zone {zone}.',
        )
    family = common.ACCELERATOR_MACHINE_FAMILY.get(kind)
    machine = call.flags.get("--machine-type", "e2-medium")
    if family and not machine.startswith(family + "-"):
        raise err(
            call,
            f'ResponseError: code=400, message=Accelerator type "{kind}" is not supported with machine type '
            f'"{machine}": use a {family} machine type.',
        )
    cards = common.ACCELERATORS.get(kind, ("", 8))[1]
    if count > cards:
        raise err(
            call,
            f'ResponseError: code=400, message=The number of accelerators {count} for "{kind}" exceeds the '
            f"maximum of {cards} per instance.",
        )


@command(
    "container node-pools create",
    positionals=(1, 1),
    flags={
        **LOCATION_FLAGS,
        "--cluster": "value",
        "--machine-type": "value",
        "--num-nodes": "value",
        "--disk-size": "value",
        "--accelerator": "value",
        "--service-account": "value",
        "--spot": "bool",
        "--enable-autoscaling": "bool",
        "--min-nodes": "value",
        "--max-nodes": "value",
    },
    project=True,
    zone=True,
)
def node_pools_create(store: Store, call: Call) -> None:
    name = call.positionals[0]
    if not call.flags.get("--cluster"):
        raise err(call, "The required property [cluster] is not currently set.")
    if not CLUSTER_NAME_RE.match(name):
        raise err(call, f'ResponseError: code=400, message=Invalid value for field "node_pool.name": "{name}".')
    accelerators = [parse_accelerator(call)] if call.flags.get("--accelerator") else []
    with store.transaction() as state:
        key, cluster = existing_cluster(call, state, call.flags["--cluster"])
        for accelerator in accelerators:
            check_accelerator(call, state, key.split("/")[1], accelerator)
        if any(p["name"] == name for p in cluster["nodePools"]):
            raise err(call, f"ResponseError: code=409, message=Already exists: {cluster_path(key)}/nodePools/{name}.")
        sys.stderr.write(f"Creating node pool {name}...\n")
        pool = node_pool(call, name, accelerators)  # GKE: the project's default account unless --service-account
        cluster["nodePools"].append(pool)
        refresh_node_count(cluster)
        value = common.prune(pool)
    sys.stderr.write(f"Created [https://container.googleapis.com/v1/{cluster_path(key)}/nodePools/{name}].\n")
    rows = [
        ["NAME", "MACHINE_TYPE", "DISK_SIZE_GB", "NODE_VERSION"],
        [name, value["config"]["machineType"], str(value["config"].get("diskSizeGb", "")), MASTER_VERSION],
    ]
    emit(call, [value], table(rows))


def yaml_text(value) -> str:
    import yaml

    return yaml.safe_dump(value, sort_keys=True, default_flow_style=False)


if __name__ == "__main__":
    sys.exit(main())
