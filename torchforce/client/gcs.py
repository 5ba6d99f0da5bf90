"""A folder in a Cloud Storage bucket, read and written with ``gcloud storage`` (the GKE backend's storage).

Every operation is one ``gcloud storage`` call (``cat``, ``ls``, ``cp``, ``rm``, ``rsync``), so it uses the
credentials of the linked service account and nothing beyond the Google Cloud CLI has to be installed here. The
pods see the same bucket as a folder through the Cloud Storage FUSE driver.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from torchforce.client.gcloud import Cloud
from torchforce.client.storage import Storage


class GcsStorage(Storage):
    """``gs://BUCKET/path``; every path below is relative to it."""

    def __init__(self, location: str, cloud: Cloud) -> None:
        super().__init__(location)
        self.cloud = cloud

    def child(self, *parts: str) -> GcsStorage:
        return GcsStorage("/".join([self.location, *parts]), self.cloud)

    def read_text(self, relative: str) -> str | None:
        result = self.cloud.run(["gcloud", "storage", "cat", self._remote(relative)], check=False)
        return result.stdout if result.code == 0 and not self.cloud.dry_run else None

    def exists(self, relative: str) -> bool:
        result = self.cloud.run(["gcloud", "storage", "ls", self._remote(relative)], check=False)
        return result.code == 0 and not self.cloud.dry_run

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
        target.mkdir(parents=True, exist_ok=True)
        self.cloud.run(["gcloud", "storage", "rsync", self._remote(relative), str(target), "--recursive"])
        for name in skip:
            for path in target.rglob(name):
                path.unlink(missing_ok=True)
        return sum(1 for path in target.rglob("*") if path.is_file())
