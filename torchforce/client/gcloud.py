"""Google Cloud for the GKE backend: the project's link to a Google Cloud project, and running ``gcloud`` and
``kubectl``.

A link (``tfcli init -r PROJECT --key-file KEY``, or ``tfcli gcloud link``) records the Google Cloud project, the
zone, the service account and the path of its key in the project settings (``.tfcli/project.json``, mode 0600), after
``gcloud auth activate-service-account`` accepted the key. The key's content is read once, for its ``client_email``
and to keep it out of messages; it is never copied anywhere: commands get its path, pods run as the service account
through Workload Identity and need no key.

Every call is an argument list run without a shell; ``Cloud(link, dry_run=True)`` prints each call instead and runs
none, so a dry run changes nothing. A failing call is a ClientError with the command and the tool's own error text.

tfcli's own gcloud configuration: every ``gcloud`` and ``kubectl`` that tfcli starts runs with ``CLOUDSDK_CONFIG``
set to a folder of tfcli's, one per linked service account (``config_dir``: ``$XDG_CONFIG_HOME/tfcli/gcloud/E``,
``~/.config/tfcli/gcloud/E`` by default, mode 0700). ``gcloud auth activate-service-account`` makes the account the
active one of the configuration it runs in, and its project the default: in tfcli's folder, that leaves the user's
own configuration (``~/.config/gcloud``, or their ``CLOUDSDK_CONFIG``) as it was, and their own ``gcloud`` and
``kubectl`` commands run as they did. ``kubectl`` gets the folder too: the auth plugin it runs for a GKE context
(``gke-gcloud-auth-plugin``, required on PATH with gcloud and kubectl) asks gcloud, in that environment, for the
token. A ``Cloud`` makes sure the account is active there before its first call, activating it from the link's key
file when it is not (a link made before tfcli kept its own configuration, or a folder removed since): see
``Cloud.prepare``.
"""

from __future__ import annotations

import configparser
import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.spec import SpecError

PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
EMAIL = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}@[a-z0-9][a-z0-9.-]{0,253}\.[a-z]{2,}")
BUCKET = re.compile(r"gs://[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]")
IMAGE = re.compile(r"[a-z0-9][a-z0-9.-]*(:[0-9]+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9._-]{1,128})?")
DEFAULT_ZONE = "us-central1-a"
TIMEOUT_SECONDS = 1800.0  # creating a cluster with a GPU pool takes minutes; nothing takes half an hour
CONFIG_VARIABLE = "CLOUDSDK_CONFIG"  # the folder gcloud reads its whole configuration from, credentials included
# What would make a call run as someone other than the active account of tfcli's configuration (gcloud reads these
# from the environment, over the configuration's own properties): a shell's settings are not passed on to tfcli's
# calls. CLOUDSDK_ACTIVE_CONFIG_NAME would pick a named configuration that tfcli's folder does not have.
ACCOUNT_OVERRIDES = (
    "CLOUDSDK_ACTIVE_CONFIG_NAME",
    "CLOUDSDK_CORE_ACCOUNT",
    "CLOUDSDK_AUTH_ACCESS_TOKEN",
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
    "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE",
    "CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT",
)
AUTH_PLUGIN = "gke-gcloud-auth-plugin"  # kubectl runs it for the credentials of every GKE context
INSTALL_HINTS = {
    "gcloud": "Install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install) and put it on PATH.",
    "kubectl": "Install it with 'gcloud components install kubectl' (or your package manager).",
    AUTH_PLUGIN: "Install it with 'gcloud components install gke-gcloud-auth-plugin' (or your package manager's "
    "google-cloud-cli-gke-gcloud-auth-plugin): kubectl runs it to reach a GKE cluster.",
}
GKE_TOOLS = ("gcloud", "kubectl", AUTH_PLUGIN)  # what the GKE backend needs on PATH before it creates anything
NEEDS = {"kubectl": ("kubectl", AUTH_PLUGIN)}  # what a call of a tool needs on PATH, beyond the tool


def _checked(value: Any, path: str, pattern: re.Pattern[str], expected: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SpecError(path, "not a valid value", got=value, expected=expected)
    return value


@dataclass(frozen=True)
class Link:
    """A tfcli project's Google Cloud project: where its clusters, bucket and worker image live."""

    project: str
    zone: str
    service_account: str
    key_file: str
    bucket: str
    image: str

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    def context(self, cluster: str) -> str:
        """The kubeconfig context ``gcloud container clusters get-credentials`` writes for ``cluster``."""
        return f"gke_{self.project}_{self.zone}_{cluster}"

    def where(self) -> list[str]:
        """The flags that place a GKE call: every call names its project and zone (none relies on gcloud's
        defaults, which are some other project's on a shared machine)."""
        return [f"--project={self.project}", f"--zone={self.zone}"]

    def to_settings(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def make(
        cls,
        project: str,
        key_file: str | Path,
        *,
        zone: str | None = None,
        service_account: str | None = None,
        bucket: str | None = None,
        image: str | None = None,
    ) -> Link:
        """A link from what the user gave, checked: every value becomes an argument of gcloud calls."""
        from torchforce import __version__

        project = _checked(project, "gcloud.project", PROJECT_ID, "a Google Cloud project id like 'my-rl-project'")
        zone = _checked(zone or DEFAULT_ZONE, "gcloud.zone", ZONE, "a zone like 'us-central1-a'")
        path = Path(key_file).expanduser().resolve()
        email = key_email(path)
        if service_account is not None and service_account != email:
            raise SpecError(
                "gcloud.service_account",
                f"the key file {path} belongs to another service account",
                got=service_account,
                expected=email,
            )
        bucket = _checked(bucket or f"gs://{project}-tfcli", "gcloud.bucket", BUCKET, "a bucket like 'gs://my-bucket'")
        region = zone.rsplit("-", 1)[0]
        version = re.sub(r"[^A-Za-z0-9._-]", "-", __version__)
        image = image or f"{region}-docker.pkg.dev/{project}/tfcli/torchforce:{version}"
        image = _checked(
            image, "gcloud.image", IMAGE, "an image name like 'REGION-docker.pkg.dev/PROJECT/REPO/NAME:TAG'"
        )
        return cls(project, zone, email, str(path), bucket.rstrip("/"), image)

    @classmethod
    def of(cls, settings: dict[str, Any]) -> Link:
        """The link recorded in a project's settings; a ClientError saying how to make one when there is none."""
        values = settings.get("gcloud")
        if not isinstance(values, dict):
            remote = settings.get("remote_id")
            raise ClientError(
                "this project is not linked to a Google Cloud project",
                hint="Link it: tfcli gcloud link -r "
                + (str(remote) if remote else "PROJECT_ID")
                + " --key-file KEY.json [--zone ZONE]  (see 'tfcli gcloud link --help').",
            )
        try:
            return cls(**{key: str(values[key]) for key in cls.__dataclass_fields__})
        except KeyError as error:
            raise ClientError(
                f"the project's Google Cloud link lacks '{error.args[0]}'",
                hint="Link it again: tfcli gcloud link -r PROJECT_ID --key-file KEY.json",
            ) from None

    @classmethod
    def for_dry_run(cls, settings: dict[str, Any], echo: Any = print) -> Link:
        """The project's link, or for a project not linked yet a ``placeholder`` (said with ``echo``): what a dry
        run shows its calls with."""
        try:
            return cls.of(settings)
        except ClientError:
            link = cls.placeholder(settings)
            echo(
                f"(not linked to a Google Cloud project yet: the project '{link.project}' and the service account "
                f"'{link.service_account}' stand for what 'tfcli gcloud link' records)"
            )
            return link

    @classmethod
    def placeholder(cls, settings: dict[str, Any]) -> Link:
        """What a dry run shows in place of a link the project does not have yet (values of the right form, which
        the calls check): the 2018 ``remote_id`` as the project where the settings keep a valid one, else
        ``your-project-id``; a service account ``tfcli@`` it; the default zone, bucket and image."""
        remote = settings.get("remote_id")
        project = remote if isinstance(remote, str) and PROJECT_ID.fullmatch(remote) else "your-project-id"
        region = DEFAULT_ZONE.rsplit("-", 1)[0]
        image = f"{region}-docker.pkg.dev/{project}/tfcli/torchforce:latest"
        account = f"tfcli@{project}.iam.gserviceaccount.com"
        return cls(project, DEFAULT_ZONE, account, "key.json", f"gs://{project}-tfcli", image)


def key_email(path: Path) -> str:
    """The service account a key file belongs to (its ``client_email``); the key itself is not kept."""
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise SpecError("gcloud.key_file", f"cannot read the key file: {error.strerror}", got=str(path)) from None
    except ValueError:
        raise SpecError(
            "gcloud.key_file", "not a JSON key file", got=str(path), expected="a service account key"
        ) from None
    email = data.get("client_email") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("type") != "service_account" or not isinstance(email, str):
        raise SpecError(
            "gcloud.key_file",
            "not a service account key",
            got=str(path),
            expected="the JSON key of a service account (IAM > Service accounts > Keys > Add key > JSON)",
        )
    return _checked(email, "gcloud.key_file", EMAIL, "a service account e-mail")


def secrets_of(key_file: str | Path | None) -> list[str]:
    """The parts of a key file that must never appear in what tfcli prints or writes."""
    if key_file is None:
        return []
    try:
        data = json.loads(Path(key_file).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict):
        return []
    return [str(data[key]) for key in ("private_key", "private_key_id") if isinstance(data.get(key), str) and data[key]]


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    return text


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout or "null")
        except ValueError:
            raise ClientError(f"expected JSON from the cloud tools, got: {self.stdout[:200]!r}") from None


def config_home() -> Path:
    """Where tfcli keeps its own gcloud configurations: ``$XDG_CONFIG_HOME/tfcli/gcloud`` (``~/.config`` when the
    variable is unset or not an absolute path, as the XDG spec says)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".config") / "tfcli" / "gcloud"


def config_dir(service_account: str) -> Path:
    """tfcli's gcloud configuration for ``service_account``: the folder every call of a project linked to it runs
    with (``CLOUDSDK_CONFIG``). The account is a checked e-mail (``EMAIL``): a plain folder name."""
    return config_home() / _checked(service_account, "gcloud.service_account", EMAIL, "a service account e-mail")


def make_private(folder: Path) -> None:
    """``folder`` and the folders of tfcli's configurations above it, readable by the user alone (0700): gcloud
    keeps the service account's credentials there."""
    home = config_home()
    try:
        for path in (home.parent, home, folder):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
    except OSError as error:
        raise ClientError(
            f"cannot make tfcli's own gcloud configuration {folder}: {error.strerror}",
            hint="It must be a folder of yours (under $XDG_CONFIG_HOME, or ~/.config).",
        ) from None


def active_account(folder: Path) -> str | None:
    """The account that is active in the gcloud configuration ``folder`` when it has credentials there, else None.
    Read from the files gcloud keeps (``active_config``, ``configurations/config_NAME``, ``credentials.db``),
    without running it: a missing, unreadable or foreign file is None."""
    try:
        name = (folder / "active_config").read_text().strip() or "default"
    except FileNotFoundError:
        name = "default"
    except OSError:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(folder / "configurations" / f"config_{name}")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    account = parser.get("core", "account", fallback="").strip()
    database = folder / "credentials.db"
    if not account or not database.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as connection:
            row = connection.execute("SELECT 1 FROM credentials WHERE account_id = ?", (account,)).fetchone()
    except sqlite3.Error:
        return None
    return account if row is not None else None


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Held while a configuration is looked at and activated: two tfcli processes activate it once."""
    with open(folder / "tfcli.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Cloud:
    """Runs ``gcloud`` and ``kubectl`` argument lists as the ``link``'s service account, in tfcli's own gcloud
    configuration (``config_dir``); with ``dry_run`` prints them (``would run: ...``) instead."""

    def __init__(self, link: Link, *, dry_run: bool = False, echo: Any = print) -> None:
        self.link = link
        self.dry_run = dry_run
        self.secrets = secrets_of(link.key_file)
        self.echo = echo
        self.config = config_dir(link.service_account)
        self._prepared = False
        self._lock = threading.Lock()  # ssh_parallel calls from threads

    @staticmethod
    def require(*tools: str) -> None:
        """A ClientError for the first tool that is not on PATH, with how to install it."""
        for tool in tools:
            if shutil.which(tool) is None:
                raise ClientError(f"'{tool}' is not installed (not found on PATH)", hint=INSTALL_HINTS.get(tool))

    def environment(self) -> dict[str, str]:
        """The environment of every call: this one, with tfcli's configuration as ``CLOUDSDK_CONFIG`` and without
        the settings that would choose another account (``ACCOUNT_OVERRIDES``)."""
        env = {key: value for key, value in os.environ.items() if key not in ACCOUNT_OVERRIDES}
        env[CONFIG_VARIABLE] = str(self.config)
        return env

    def activation(self) -> list[str]:
        """``gcloud auth activate-service-account``: the account active, its project the default (in tfcli's
        configuration, where every call runs)."""
        account, key, project = self.link.service_account, self.link.key_file, self.link.project
        return ["gcloud", "auth", "activate-service-account", account, f"--key-file={key}", f"--project={project}"]

    def activate(self) -> None:
        """Activate the service account with its key in tfcli's configuration (linking: gcloud checks the key)."""
        with self._lock:
            self._announce()
            if self.dry_run:
                self._call(self.activation())
            else:
                make_private(self.config)
                with _locked(self.config):
                    self._call(self.activation())
            self._prepared = True

    def prepare(self) -> None:
        """Before the first call: tfcli's configuration exists and has the service account active, activated from
        the link's key file when it has not (a link made before tfcli kept its own configuration, or the folder
        removed since). A dry run creates nothing: it shows the activation it would run."""
        with self._lock:
            if self._prepared:
                return
            self._announce()
            if self.dry_run:
                if active_account(self.config) != self.link.service_account:
                    self._call(self.activation())
            else:
                make_private(self.config)
                with _locked(self.config):
                    if active_account(self.config) != self.link.service_account:
                        self.require("gcloud")
                        self._activate_lazily()
            self._prepared = True

    def _announce(self) -> None:
        if self.dry_run and not self._prepared:
            self.echo(
                f"gcloud and kubectl would run with {CONFIG_VARIABLE}={self.config} (tfcli's own gcloud "
                f"configuration for {self.link.service_account}; yours is left as it is)"
            )

    def _activate_lazily(self) -> None:
        link = self.link
        try:
            self._call(self.activation())
        except ClientError as error:
            raise ClientError(
                f"cannot activate the linked service account {link.service_account} in tfcli's own gcloud "
                f"configuration ({self.config}): {error.message}",
                hint=f"Link the project again with the account's key: tfcli gcloud link -r {link.project} "
                "--key-file KEY.json",
            ) from None
        print(
            f"tfcli: activated {link.service_account} in tfcli's own gcloud configuration ({self.config}); "
            "your gcloud configuration is left as it is",
            file=sys.stderr,
        )

    def run(
        self, argv: list[str], *, check: bool = True, input: str | None = None, timeout: float = TIMEOUT_SECONDS
    ) -> Result:
        """Run ``argv``; a non-zero exit is a ClientError (with the tool's error text) when ``check``."""
        self.prepare()
        return self._call(argv, check=check, input=input, timeout=timeout)

    def _call(
        self, argv: list[str], *, check: bool = True, input: str | None = None, timeout: float = TIMEOUT_SECONDS
    ) -> Result:
        if self.dry_run:
            self.echo("would run: " + shlex.join(argv))
            return Result(0, "", "")
        self.require(*NEEDS.get(argv[0], (argv[0],)))  # kubectl: its auth plugin too
        try:
            done = subprocess.run(  # noqa: S603 - an argument list, no shell
                argv,
                capture_output=True,
                text=True,
                errors="replace",  # a log's bytes are the run's own: one that is no UTF-8 is shown, not a traceback
                input=input,
                stdin=subprocess.DEVNULL if input is None else None,  # a tool never waits on a prompt
                timeout=timeout,
                env=self.environment(),
            )
        except subprocess.TimeoutExpired:
            raise ClientError(f"'{shlex.join(argv[:4])} ...' did not finish in {timeout:.0f} s") from None
        except OSError as error:
            raise ClientError(f"cannot run {argv[0]}: {error.strerror}", hint=INSTALL_HINTS.get(argv[0])) from None
        result = Result(done.returncode, redact(done.stdout, self.secrets), redact(done.stderr, self.secrets))
        if check and result.code != 0:
            raise self.failure(argv, result)
        return result

    def attached(self, argv: list[str]) -> int:
        """Run ``argv`` with this process's stdout and stderr (``kubectl logs --follow``): its exit code."""
        self.prepare()
        if self.dry_run:
            self.echo("would run: " + shlex.join(argv))
            return 0
        self.require(*NEEDS.get(argv[0], (argv[0],)))  # kubectl: its auth plugin too
        return subprocess.run(argv, check=False, env=self.environment()).returncode  # noqa: S603 - no shell

    def failure(self, argv: list[str], result: Result) -> ClientError:
        said = "\n".join(line for line in result.stderr.strip().splitlines()[-6:] if line.strip())
        shown = " ".join(argv[:4]) + (" ..." if len(argv) > 4 else "")
        return ClientError(f"'{shown}' failed (exit code {result.code})" + (f":\n{said}" if said else ""))

    def json(self, argv: list[str]) -> Any:
        """The parsed JSON a read-only call prints (None in a dry run, which runs nothing)."""
        result = self.run(argv)
        return None if self.dry_run else result.json()


def link_project(project: Any, link: Link, cloud: Cloud) -> None:
    """Activate the service account and make sure the bucket exists (``activate``), then record the link."""
    activate(link, cloud)
    if not cloud.dry_run:
        record_link(project, link)


def activate(link: Link, cloud: Cloud) -> None:
    """``gcloud auth activate-service-account`` with the key, in tfcli's own gcloud configuration (the user's is
    left alone), and the results bucket made if it is missing."""
    Cloud.require(*GKE_TOOLS)
    cloud.activate()
    ensure_bucket(link, cloud)


def record_link(project: Any, link: Link) -> None:
    """The link in the project settings, which become readable by the user alone (they name a key file)."""
    from torchforce.client.project import MARKER, SETTINGS, write_json_atomically

    settings = {**project.settings, "remote_id": link.project, "gcloud": link.to_settings()}
    write_json_atomically(project.root / MARKER / SETTINGS, settings, mode=0o600)
    project.settings = settings


def ensure_bucket(link: Link, cloud: Cloud) -> None:
    found = cloud.run(
        ["gcloud", "storage", "buckets", "describe", link.bucket, f"--project={link.project}", "--format=json"],
        check=False,
    )
    if found.code == 0 and not cloud.dry_run:
        return
    cloud.run(
        ["gcloud", "storage", "buckets", "create", link.bucket, f"--project={link.project}"]
        + [f"--location={link.region}", "--uniform-bucket-level-access"]
    )
