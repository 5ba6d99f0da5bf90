"""A fake Google Cloud for the GKE backend's tests: ``gcloud`` and ``kubectl`` executables that answer exactly the
calls of the GKE contract, keep their state in a folder, and run RayJobs as local processes.

    def test_something(fake_cloud):          # PATH and TFCLI_FAKE_CLOUD are set for the test
        subprocess.run(["gcloud", ...])
        assert fake_cloud.calls()[0][:3] == ["gcloud", "auth", "activate-service-account"]

See ``FakeCloud`` for what a test can set up, inject and inspect. The user is logged in to gcloud as themselves
(``common.USER_ACCOUNT``, project ``common.USER_PROJECT``) in their default configuration (``user_config``): a
``gcloud`` call without ``CLOUDSDK_CONFIG`` runs as them, as on a developer's machine. The fake ``kubectl`` checks no
credentials (the real one leaves them to the cluster's auth plugin); every call's record says which configuration
it ran with and the account active there (``call_records``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from . import common

HERE = Path(__file__).resolve().parent


class FakeCloud:
    """The fake cloud rooted at ``root``: ``root/bin`` holds the ``gcloud`` and ``kubectl`` executables, and
    ``root/calls.jsonl``, ``root/state.json``, ``root/buckets/<name>/`` and ``root/jobs/<context>/<rayjob>/``
    what they did."""

    def __init__(self, root: Path, user: str | None = common.USER_ACCOUNT, user_project: str = common.USER_PROJECT):
        self.root = Path(root).resolve()
        self.store = common.Store(self.root)
        self.store.setup()
        if user is not None:
            self.login(user, user_project)
        for tool in ("gcloud", "kubectl"):
            script = self.bin_dir / tool
            script.write_text(
                f"#!{sys.executable}\n"
                "import sys\n"
                f"sys.path.insert(0, {str(HERE)!r})\n"
                f"import fake_{tool}\n"
                f"sys.exit(fake_{tool}.main())\n"
            )
            script.chmod(0o755)
        # GKE's auth plugin, which kubectl runs for a GKE context's credentials: the fake kubectl checks no
        # credentials, but refuses to reach a cluster when the plugin is not on PATH, as kubectl does
        plugin = self.bin_dir / common.AUTH_PLUGIN
        plugin.write_text(
            f"#!{sys.executable}\n"
            "import json\n"
            'print(json.dumps({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1", '
            '"status": {"token": "fake-token"}}))\n'
        )
        plugin.chmod(0o755)

    @property
    def bin_dir(self) -> Path:
        """The fake ``gcloud`` and ``kubectl``, and a ``gke-gcloud-auth-plugin``."""
        return self.root / "bin"

    def env(self, base: dict | None = None) -> dict:
        """An environment in which ``gcloud``/``kubectl`` are the fakes (for a subprocess started without the
        fixture's monkeypatching)."""
        env = dict(os.environ if base is None else base)
        env[common.ENV_ROOT] = str(self.root)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env

    @property
    def user_config(self) -> Path:
        """The user's own gcloud configuration (``~/.config/gcloud`` for the real gcloud): where ``gcloud`` reads
        and writes its configuration when ``CLOUDSDK_CONFIG`` is unset."""
        return common.default_config_dir(self.root)

    def login(self, account: str, project: str | None = None, folder: Path | None = None) -> None:
        """``gcloud auth login`` as ``account`` (and ``gcloud config set project``) in the configuration ``folder``
        (the user's default one when None): the account active there, with credentials."""
        folder = self.user_config if folder is None else Path(folder)
        common.add_credentials(folder, account, {"type": "authorized_user"})
        common.set_properties(folder, False, account=account, **({"project": project} if project else {}))

    # ---- inspection ----

    @staticmethod
    def gcloud_config(folder: Path) -> dict:
        """What a gcloud configuration folder holds: the active ``account`` and ``project`` (None when unset), and
        the accounts it has ``credentials`` for."""
        core = common.properties(Path(folder), environment=False)
        return {
            "account": core.get("account"),
            "project": core.get("project"),
            "credentials": sorted(common.credentials(Path(folder))),
        }

    def calls(self) -> list[list[str]]:
        """Every call's argv, in order, the tool's name first: ``["gcloud", "container", "clusters", ...]``."""
        return [entry["argv"] for entry in self.store.calls()]

    def call_records(self) -> list[dict]:
        """Every call with what is known of it: ``argv``, ``stdin`` (pipe/tty/null/file/closed), ``stdin_piped``,
        ``time``, ``pid``, ``config`` (its ``CLOUDSDK_CONFIG``, None when unset) and ``account`` (the account active
        with credentials in that configuration, as which it ran; None when there was none)."""
        return self.store.calls()

    def state(self) -> dict:
        """A copy of the whole state (clusters, contexts, objects per context, buckets' metadata, ...)."""
        with self.store.transaction() as state:
            return json.loads(json.dumps(state))

    def bucket_dir(self, bucket_name: str) -> Path:
        """Where gs://bucket_name lives (it exists once the bucket was created)."""
        return self.store.bucket_dir(bucket_name.removeprefix("gs://").strip("/"))

    def job_dir(self, context: str, name: str, namespace: str = "default") -> Path:
        """What the fake KubeRay operator keeps of a RayJob's run: ``log``, ``exit_code``, ``started``,
        ``events`` (why its pods would not start), ``workdir/``."""
        return self.store.job_dir(context, namespace, name)

    def events(self, context: str, name: str, namespace: str = "default") -> list[str]:
        """Why a RayJob's pods do not start (empty when nothing holds them)."""
        path = self.job_dir(context, name, namespace) / "events"
        return path.read_text().splitlines() if path.exists() else []

    # ---- set-up ----

    def fail(self, prefix: list[str], stderr: str, code: int = 1, times: int | None = None, stdout: str = "") -> None:
        """The next call(s) whose argv starts with ``prefix`` (tool name first) exit with ``code`` and print
        ``stderr`` (and ``stdout``), without acting; ``times=None``: every such call from now on. The first
        failure added that matches is the one used."""
        failure = {"prefix": list(prefix), "stderr": stderr, "code": code, "times": times, "stdout": stdout}
        with self.store.transaction() as state:
            state["failures"].append(failure)

    def clear_failures(self) -> None:
        with self.store.transaction() as state:
            state["failures"] = []

    def set_accelerators(self, zone: str, types: list[str]) -> None:
        """The accelerator types ``zone`` offers (replacing the default table for that zone)."""
        with self.store.transaction() as state:
            state["accelerators"][zone] = list(types)

    def create_bucket(self, bucket_name: str, project: str = "", location: str = "US") -> Path:
        """A bucket that exists already (as if created outside the test)."""
        name = bucket_name.removeprefix("gs://").strip("/")
        with self.store.transaction() as state:
            self.bucket_dir(name).mkdir(parents=True, exist_ok=True)
            state["buckets"][name] = {
                "project": project,
                "location": location,
                "uniform": True,
                "created": common.now_iso(),
            }
        return self.bucket_dir(name)

    def add_image(self, image: str) -> None:
        """An Artifact Registry image that exists already (as if built outside the test)."""
        tagged = image if ":" in image.rsplit("/", 1)[-1] else image + ":latest"
        with self.store.transaction() as state:
            state["images"][tagged] = {"source": None, "project": "", "created": common.now_iso()}

    def set_namespace(self, context: str, namespace: str | None) -> None:
        """The namespace ``kubectl`` uses on ``context`` when a call names none, as the user's ``kubectl config
        set-context CONTEXT --namespace=NAMESPACE`` (or ``kubens``) sets it in their kubeconfig; None: ``default``."""
        with self.store.transaction() as state:
            namespaces = state.setdefault("context_namespaces", {})
            if namespace is None:
                namespaces.pop(context, None)
            else:
                namespaces[context] = namespace

    def set_delays(
        self, controller: float | None = None, startup: float | None = None, reconcile: float | None = None
    ) -> None:
        """``controller``: seconds after its creation before the operator first looks at a RayJob (until then
        it has no status, as right after ``kubectl apply`` on a real cluster); ``startup``: seconds a run stays
        ``Initializing`` before its entrypoint starts; ``reconcile``: seconds after a change of a RayJob's spec
        (a ``suspend`` patch) before the operator acts on it: until then its status, and ``observedGeneration``,
        are what they were (KubeRay reconciles a change when its controller gets to it, not as it is written)."""
        with self.store.transaction() as state:
            if controller is not None:
                state["settings"]["controller_delay"] = float(controller)
            if startup is not None:
                state["settings"]["startup_delay"] = float(startup)
            if reconcile is not None:
                state["settings"]["reconcile_delay"] = float(reconcile)

    # ---- tear-down ----

    def stop_all(self) -> None:
        """SIGKILL every process the fake started (the run wrappers' process groups, and whatever carries their
        marker), and wait until they are gone."""
        with self.store.transaction() as state:
            processes = list(state["processes"])
        for process in processes:
            common.kill_group(process["pid"], process["starttime"], process["marker"])
        common.kill_group(None, None, f"{self.root}|")


@pytest.fixture(name="fake_cloud")  # the name it has wherever it is imported (``import fake_cloud as x`` too)
def fake_cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh fake cloud whose ``gcloud``, ``kubectl`` and auth plugin come first on PATH; every process it started is
    killed at the end."""
    cloud = FakeCloud(tmp_path / "fakecloud")
    monkeypatch.setenv(common.ENV_ROOT, str(cloud.root))
    for name in (common.ENV_CONFIG, common.ENV_CONFIG_NAME, common.ENV_ACCOUNT):  # the user's default configuration
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", f"{cloud.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        yield cloud
    finally:
        cloud.stop_all()


__all__ = ["FakeCloud", "fake_cloud"]
