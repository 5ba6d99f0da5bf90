"""A folder in a Cloud Storage bucket, read and written with ``gcloud storage`` (the GKE backend's storage).

Every operation is one ``gcloud storage`` call (``cat``, ``ls``, ``cp``, ``rm``, ``rsync``), so it uses the
credentials of the linked service account and nothing beyond the Google Cloud CLI has to be installed here. The
pods see the same bucket as a folder through the Cloud Storage FUSE driver.

An object is "not there" only by gcloud's word that it does not exist (``NOT_THERE``); any other failure (a token
that did not refresh, the network, a 403, a 503) is a ClientError with gcloud's error. Callers judge on what they
read: a run without ``progress.json`` ended failed, a run without a checkpoint must start afresh. A read that
failed for a moment must not be taken for either; the callers that judge treat a ClientError as "nothing judged".
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from torchforce.client.gcloud import Cloud, Result
from torchforce.client.storage import Storage, refuse_links

# What gcloud says of an object or folder that does not exist: "The following URLs matched no objects or files"
# (cat, cp), "One or more URLs matched no objects" (ls), "gs://B not found: 404" (a bucket that does not exist).
NOT_THERE = ("matched no objects", "not found: 404", "HTTPError 404")


def not_there(result: Result) -> bool:
    """Whether a failed ``gcloud storage`` call failed because what it named does not exist."""
    return any(words in result.stderr for words in NOT_THERE)


class GcsStorage(Storage):
    """``gs://BUCKET/path``; every path below is relative to it."""

    def __init__(self, location: str, cloud: Cloud) -> None:
        super().__init__(location)
        self.cloud = cloud

    def child(self, *parts: str) -> GcsStorage:
        return GcsStorage("/".join([self.location, *parts]), self.cloud)

    def read_text(self, relative: str) -> str | None:
        """The object's text; None when it does not exist (or in a dry run). A ClientError when gcloud fails
        otherwise."""
        result = self._look("cat", relative)
        return None if result is None else result.stdout

    def exists(self, relative: str) -> bool:
        """Whether the object, or any object below the folder, exists (False in a dry run). A ClientError when
        gcloud fails for another reason than that nothing is there."""
        return self._look("ls", relative) is not None

    def _look(self, verb: str, relative: str) -> Result | None:
        """``gcloud storage VERB`` of the object or folder: its result, None where nothing is there (or in a dry
        run), a ClientError where gcloud failed otherwise."""
        argv = ["gcloud", "storage", verb, self._remote(relative)]
        result = self.cloud.run(argv, check=False)
        if self.cloud.dry_run or (result.code != 0 and not_there(result)):
            return None
        if result.code != 0:
            raise self.cloud.failure(argv, result)
        return result

    def write_text(self, relative: str, text: str) -> None:
        with tempfile.TemporaryDirectory(prefix="tfcli-") as folder:
            source = Path(folder) / Path(relative).name
            source.write_text(text)
            self.upload(source, relative)

    def remove(self, relative: str) -> None:
        """Remove the object, or every object below a folder (``relative`` "" is the whole folder); nothing there
        is no error."""
        recursive = ["--recursive"] if not relative or relative.endswith("/") else []
        result = self.cloud.run(["gcloud", "storage", "rm", *recursive, self._remote(relative)], check=False)
        if result.code != 0 and "matched no objects" not in result.stderr:
            raise self.cloud.failure(["gcloud", "storage", "rm", self._remote(relative)], result)

    def upload(self, source: Path, relative: str) -> None:
        if source.is_dir():
            target = self._remote(relative).rsplit("/", 1)[0] + "/"
            self.cloud.run(["gcloud", "storage", "cp", "--recursive", str(source), target])
            return
        self.cloud.run(["gcloud", "storage", "cp", str(source), self._remote(relative)])

    def download(self, relative: str, target: Path, skip: tuple[str, ...] = ()) -> int:
        """Bring the folder ``relative`` into ``target`` (``gcloud storage rsync``: files there that the bucket
        lacks are kept); files named in ``skip`` are removed afterwards. Returns the number of files there."""
        refuse_links(target, f"the folder {target}")
        target.mkdir(parents=True, exist_ok=True)
        self.cloud.run(["gcloud", "storage", "rsync", self._remote(relative), str(target), "--recursive"])
        for name in skip:
            for path in target.rglob(name):
                path.unlink(missing_ok=True)
        return sum(1 for path in target.rglob("*") if path.is_file())
