"""tfcli's own gcloud configuration, against the fake cloud (``tests/fakecloud``), where the user is logged in to
gcloud as themselves (``me@example.com``, their project ``my-own-project``) in their default configuration.

``gcloud auth activate-service-account`` makes the account the active one of the configuration it runs in, and its
project the default. tfcli runs every ``gcloud`` and ``kubectl`` with ``CLOUDSDK_CONFIG`` set to a folder of its own
(``$XDG_CONFIG_HOME/tfcli/gcloud/ACCOUNT``), so linking, creating a cluster and running an experiment leave the
user's configuration, and what their own commands run as, as it was. A link made before tfcli kept its own
configuration has none: the next command activates the account there, once, from the link's key file.
"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from tests.client.conftest import tfcli, wait_for
from tests.client.gke_common import (
    BUCKET,
    CLUSTER,
    EMAIL,
    PPO,
    PROJECT,
    ZONE,
    assert_own_config,
    cluster_create_call,
    files_of,
    key_file,
    own_config,
    setup_calls,
)
from tests.fakecloud import FakeCloud
from tests.fakecloud.common import USER_ACCOUNT, USER_PROJECT
from torchforce import __version__
from torchforce.client import Experiment, Project
from torchforce.client.checkpoints import Checkpoints
from torchforce.client.gcloud import Cloud, Link, record_link

IMAGE = f"us-central1-docker.pkg.dev/{PROJECT}/tfcli/torchforce:{__version__}"
CREATE = ["cluster", "create", "-n", CLUSTER, "-m", "n1-standard-4", "-s", "2", "--disk-size", "50"]


def activation(key: Path) -> list[str]:
    return ["gcloud", "auth", "activate-service-account", EMAIL, f"--key-file={key}", f"--project={PROJECT}"]


def linked_before(project: Project, key: Path) -> Link:
    """The link as a tfcli that kept no configuration of its own left it: recorded in the project, nothing in
    tfcli's configuration (that tfcli activated the account in the user's, who has switched back since)."""
    link = Link.make(PROJECT, key, zone=ZONE)
    record_link(project, link)
    return link


def test_the_configuration_is_one_folder_per_service_account_under_xdg_config_home(tmp_path, monkeypatch):
    link = Link.make(PROJECT, key_file(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name, value in (("CLOUDSDK_CORE_ACCOUNT", USER_ACCOUNT), ("CLOUDSDK_ACTIVE_CONFIG_NAME", "mine")):
        monkeypatch.setenv(name, value)
    cloud = Cloud(link)
    assert cloud.config == tmp_path / "xdg" / "tfcli" / "gcloud" / EMAIL
    env = cloud.environment()
    assert env["CLOUDSDK_CONFIG"] == str(cloud.config)
    assert "CLOUDSDK_CORE_ACCOUNT" not in env and "CLOUDSDK_ACTIVE_CONFIG_NAME" not in env  # they would pick others
    assert not (tmp_path / "xdg").exists()  # made before the first call, not before
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/path")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Cloud(link).config == tmp_path / "home" / ".config" / "tfcli" / "gcloud" / EMAIL


@pytest.mark.slow
def test_linking_a_cluster_and_a_run_leave_the_users_gcloud_configuration_alone(project, cloud: FakeCloud, tmp_path):
    mine = files_of(cloud.user_config)
    assert cloud.gcloud_config(cloud.user_config) == {
        "account": USER_ACCOUNT,
        "project": USER_PROJECT,
        "credentials": [USER_ACCOUNT],
    }
    key = key_file(tmp_path)
    linked = tfcli(project.root, "gcloud", "link", "-r", PROJECT, "--key-file", str(key), "--zone", ZONE)
    assert linked.returncode == 0, linked.stderr
    assert cloud.calls()[0] == activation(key)
    own = own_config()
    assert stat.S_IMODE(own.stat().st_mode) == 0o700
    assert cloud.gcloud_config(own) == {"account": EMAIL, "project": PROJECT, "credentials": [EMAIL]}
    cloud.add_image(IMAGE)
    created = tfcli(project.root, *CREATE, "--yes")
    assert created.returncode == 0, created.stderr
    assert tfcli(project.root, "experiment", "new", "-n", "mine", *PPO, "-t", "400000").returncode == 0
    started = tfcli(project.root, "experiment", "start", "-e", "mine", "-c", CLUSTER)
    assert started.returncode == 0, started.stderr
    experiment = Experiment.load(Project(project.root), "mine")
    wait_for(lambda: experiment.progress().get("timesteps", 0) > 0, 120, 0.5, "the run to make progress")
    stopped = tfcli(project.root, "experiment", "stop", "-e", "mine", timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert experiment.record().status == "stopped"
    records = cloud.call_records()
    assert {record["argv"][0] for record in records} == {"gcloud", "kubectl"}
    assert_own_config(records)
    assert [record["argv"] for record in records].count(activation(key)) == 1  # linking's, and no other
    # the user's configuration is as it was, and their own gcloud commands still run as them
    assert files_of(cloud.user_config) == mine
    theirs = subprocess.run(
        ["gcloud", "storage", "buckets", "describe", BUCKET, f"--project={PROJECT}", "--format=json"],
        capture_output=True,
        text=True,
    )
    assert theirs.returncode == 0, theirs.stderr
    assert (cloud.call_records()[-1]["config"], cloud.call_records()[-1]["account"]) == (None, USER_ACCOUNT)


@pytest.mark.slow
def test_a_link_made_before_tfcli_kept_its_own_configuration_works_on_the_next_command(project, cloud, tmp_path):
    key = key_file(tmp_path)
    linked_before(project, key)
    mine = files_of(cloud.user_config)
    assert not own_config().exists()
    created = tfcli(project.root, *CREATE, "--yes")
    assert created.returncode == 0, created.stderr
    assert f"activated {EMAIL} in tfcli's own gcloud configuration ({own_config()})" in created.stderr
    signing_key = Checkpoints.default_key_file()
    assert cloud.calls() == [
        activation(key),  # first, in tfcli's configuration
        cluster_create_call(CLUSTER, ZONE, "n1-standard-4", 2, 50),
        *setup_calls(CLUSTER, ZONE, project.root, signing_key),
    ]
    assert stat.S_IMODE(own_config().stat().st_mode) == 0o700
    listed = tfcli(project.root, "cluster", "list", "--json")  # the next command finds it active: no activation
    assert listed.returncode == 0, listed.stderr
    assert cloud.calls()[-1][:4] == ["gcloud", "container", "clusters", "list"]
    assert [call[:3] for call in cloud.calls()].count(["gcloud", "auth", "activate-service-account"]) == 1
    assert_own_config(cloud.call_records())
    assert files_of(cloud.user_config) == mine


@pytest.mark.slow
def test_without_its_configuration_or_the_key_file_a_command_says_to_link_again(project, cloud, tmp_path):
    key = key_file(tmp_path)
    linked_before(project, key)
    key.unlink()  # moved away since the link was made
    built = tfcli(project.root, "image", "build")
    assert built.returncode == 2 and "Traceback" not in built.stderr, built.stderr
    assert f"cannot activate the linked service account {EMAIL} in tfcli's own gcloud configuration" in built.stderr
    assert "Unable to read file" in built.stderr and f"tfcli gcloud link -r {PROJECT} --key-file" in built.stderr
    assert cloud.calls() == [activation(key)]  # nothing ran without it


@pytest.mark.slow
def test_a_dry_run_shows_the_configuration_and_the_activation_and_creates_nothing(project, cloud, tmp_path):
    key = key_file(tmp_path)
    linked_before(project, key)
    dry = tfcli(project.root, *CREATE, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"gcloud and kubectl would run with CLOUDSDK_CONFIG={own_config()}" in dry.stdout
    shown = [line.removeprefix("would run: ") for line in dry.stdout.splitlines() if line.startswith("would run: ")]
    assert shown[:2] == [
        f"gcloud auth activate-service-account {EMAIL} --key-file={key} --project={PROJECT}",
        " ".join(cluster_create_call(CLUSTER, ZONE, "n1-standard-4", 2, 50)),
    ]
    assert cloud.calls() == [] and not (tmp_path / "config").exists()


@pytest.mark.slow
def test_the_users_own_cloudsdk_config_and_account_setting_are_left_to_them(project, cloud, tmp_path, monkeypatch):
    theirs = tmp_path / "their-gcloud"
    cloud.login(USER_ACCOUNT, USER_PROJECT, folder=theirs)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(theirs))  # their own configuration, and account, in their shell
    monkeypatch.setenv("CLOUDSDK_CORE_ACCOUNT", USER_ACCOUNT)
    before, default = files_of(theirs), files_of(cloud.user_config)
    key = key_file(tmp_path)
    linked = tfcli(project.root, "gcloud", "link", "-r", PROJECT, "--key-file", str(key), "--zone", ZONE)
    assert linked.returncode == 0, linked.stderr
    built = tfcli(project.root, "image", "build")
    assert built.returncode == 0, built.stderr
    assert cloud.calls()[-1][:3] == ["gcloud", "builds", "submit"]
    assert_own_config(cloud.call_records())
    assert (files_of(theirs), files_of(cloud.user_config)) == (before, default)
