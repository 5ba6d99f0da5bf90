"""Symbolic links where tfcli writes: an experiment folder or a results folder copied from someone else may hold
links that would send what a run or a download writes elsewhere on this machine; both are refused before anything
is written. The local worker's scratch folder (``.worker``, emptied at every start) is not looked into."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchforce.client.errors import ClientError
from torchforce.client.storage import Storage, links_below, refuse_links


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    return folder


def test_links_are_found_without_being_followed_and_a_skipped_folder_is_not_looked_into(tmp_path, victim):
    folder = tmp_path / "experiment"
    (folder / "results").mkdir(parents=True)
    (folder / ".worker" / "wandb").mkdir(parents=True)
    (folder / ".worker" / "wandb" / "latest-run").symlink_to(victim)  # what wandb leaves in a run's folder
    (folder / "results" / "linked").symlink_to(victim)
    assert links_below(folder) == [folder / ".worker" / "wandb" / "latest-run", folder / "results" / "linked"]
    assert links_below(folder, skip=(".worker",)) == [folder / "results" / "linked"]
    (folder / "results" / "linked").unlink()
    assert links_below(folder, skip=(".worker",)) == []
    refuse_links(folder, "experiment 'x'", skip=(".worker",))  # nothing left to refuse
    linked = tmp_path / "linked-experiment"
    linked.symlink_to(folder)
    with pytest.raises(ClientError, match=r"^experiment 'y' holds a symbolic link, linked-experiment -> "):
        refuse_links(linked, "experiment 'y'")


def test_a_download_into_a_results_folder_with_a_link_is_refused_with_nothing_written(tmp_path, victim):
    source = tmp_path / "bucket" / "results"
    source.mkdir(parents=True)
    (source / "worker.log").write_text("the run's log\n")
    target = tmp_path / "experiment" / "results"
    target.mkdir(parents=True)
    (target / "worker.log").symlink_to(victim / "notes.txt")
    with pytest.raises(ClientError, match=r"holds a symbolic link, worker\.log -> .*notes\.txt: what tfcli writes"):
        Storage(tmp_path / "bucket").download("results", target)
    assert (victim / "notes.txt").read_text() == "precious"
    (target / "worker.log").unlink()
    assert Storage(tmp_path / "bucket").download("results", target) == 1
    assert (target / "worker.log").read_text() == "the run's log\n"
