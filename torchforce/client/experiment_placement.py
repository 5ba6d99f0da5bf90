"""Where an experiment's start runs: the cluster given (``-c``), else the one it last ran on when it resumes, else
its spec's cluster, else this machine; what a start on GKE would do (``--dry-run``); and the GKE cluster an
experiment makes for itself, as the 2018 client did: created by its start, deleted when its run ends, made again for
a resume there, and deleted again when the start that made it fails.
"""

from __future__ import annotations

import warnings
from typing import Any

from torchforce.client.backends import Backend, Launch
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.experiment_state import ExperimentState
from torchforce.client.store import ExperimentRecord


def moving(previous: ExperimentRecord, backend: Backend, cluster: str | None, resume: bool) -> tuple[bool, bool]:
    """Whether a start on ``backend``'s ``cluster`` moves the run from where it last ran, and whether a resume must
    carry its checkpoint along: not between clusters of a backend whose clusters share the results' folder (GKE's
    bucket), where they stay."""
    moved = (previous.backend, previous.cluster) != (backend.name, cluster)
    in_place = moved and previous.backend == backend.name and backend.shared_storage
    return moved, resume and moved and not in_place


class Placement(ExperimentState):
    """Where a start runs, and the experiment's own GKE cluster."""

    def _target(
        self, cluster: str | None, record: ExperimentRecord, resume: bool, *, yes: bool = False
    ) -> tuple[str, str | None]:
        """Where a start runs: ``cluster`` ("local", or a cluster of the project), else the row's cluster when
        resuming, else the spec's cluster (a Ray one must have been created; a GKE one is created now if it is not,
        for this experiment, which deletes it when it ends: see ``_own_cluster_to_make``), else this machine."""
        from torchforce.client import ray_cluster

        spec_cluster = (self.spec or {}).get("cluster") or {}
        own = self._own_cluster_to_make(cluster, record, resume)
        if own is not None:
            self._create_own_cluster(own, yes=yes, again=resume)
        if cluster is None and resume:
            return record.backend, record.cluster
        if cluster is None and spec_cluster.get("type") == "ray":
            cluster = spec_cluster["name"]
            if self.project.store.cluster(cluster) is None:
                raise ClientError(
                    f"experiment '{self.name}' runs on the Ray cluster '{cluster}', which this project has not created",
                    hint=f"Create it with 'tfcli cluster create -f {cluster}', or run it here with "
                    f"'tfcli experiment start -e {self.name} -c local'.",
                )
        if cluster is None and spec_cluster.get("type", "gke") == "gke" and spec_cluster.get("name"):
            cluster = spec_cluster["name"]
        if cluster is None or cluster == "local":
            return "local", None
        found = ray_cluster.find(self.project, cluster)  # a clear error for a name that is no cluster of the project
        return ("gke" if found.spec.get("type") == "gke" else "ray"), cluster

    def _dry_start(self, cluster: str | None, record: ExperimentRecord, launch: Launch, fresh: bool = False) -> None:
        """What ``start`` would do on GKE, printed: the cluster it would create for itself, or the calls and the
        manifest of the run, in ``_run``'s order (``fresh``: the results discarded first, in the run's own bucket)."""
        from torchforce.client import gke
        from torchforce.client.backends.gke import GkeBackend
        from torchforce.client.cluster import Cluster

        spec = self.spec or self.validate()
        own = self._own_cluster_to_make(cluster, record, launch.resume)
        if own is not None:
            from torchforce.client.backends.gke import check_fits_before_creating

            planned = Cluster(**{k: v for k, v in own.items() if k != "type"})
            check_fits_before_creating(self.project, planned, spec)  # as the start itself would refuse it
            gke.create(self.project, planned, dry_run=True)
            how = "resume" if launch.resume else "start"
            print(
                f"then the run would {how} on it, as 'tfcli experiment start -e {self.name} -c {own['name']}"
                + (" --resume" if launch.resume else "")
                + "' does"
            )
            return
        where, cluster_name = self._target(cluster, record, launch.resume)
        if where != "gke" or cluster_name is None:
            raise ClientError(
                "--dry-run shows the cloud calls of a run on GKE; this run would be "
                + ("on this machine" if where == "local" else f"on the Ray cluster '{cluster_name}'"),
                hint="Give -c with a GKE cluster of the project.",
            )
        backend = GkeBackend(self.project, cluster_name, dry_run=True)
        backend.check(spec)
        moved, carry = moving(record, backend, cluster_name, launch.resume)
        if (moved or not launch.resume) and record.backend == "gke" and record.cluster and record.job:
            GkeBackend(self.project, record.cluster, dry_run=True).retire(record.job, self.folder)
        if fresh:
            backend.discard(self.folder)
        backend.start(self.folder, self.project.root, Launch(**{**launch.__dict__, "carry": carry}))

    def _own_cluster_to_make(
        self, cluster: str | None, record: ExperimentRecord, resume: bool
    ) -> dict[str, Any] | None:
        """The spec's GKE cluster (its values) that a start without -c creates for the experiment, where the project
        does not have it: at a start that does not resume; and at a resume of a run that last ran there (its own
        cluster, deleted when that run ended), made again in the zone it was in, wherever the link points now."""
        from torchforce.client.backends.gke import recorded_zone

        own = (self.spec or {}).get("cluster") or {}
        if cluster is not None or own.get("type", "gke") != "gke" or not own.get("name"):
            return None
        if self.project.store.cluster(own["name"]) is not None:
            return None
        if not resume:
            return own
        if (record.backend, record.cluster) != ("gke", own["name"]):
            return None  # it ran elsewhere since (-c): it resumes there
        return {**own, "location": own.get("location") or recorded_zone(self.folder, own["name"])}

    def _create_own_cluster(self, values: dict[str, Any], *, yes: bool, again: bool = False) -> None:
        """The experiment's own GKE cluster, as 2018's client made it: created on start, deleted when it ends;
        ``again``: made again for a resume, once the run it was made for has ended and it was deleted."""
        from torchforce.client import gke
        from torchforce.client.cluster import Cluster

        spec = Cluster(**{key: value for key, value in values.items() if key != "type"})
        try:
            gke.Link.of(self.project.settings)
        except ClientError as error:  # before anything else, and with the way to run it here instead
            raise ClientError(
                f"experiment '{self.name}' runs on the GKE cluster '{spec.name}', but {error.message}",
                hint=f"{error.hint} Or run it on this machine: 'tfcli experiment start -e {self.name} -c local'.",
            ) from None
        from torchforce.client.backends.gke import check_fits_before_creating

        check_fits_before_creating(self.project, spec, self.spec or self.validate())
        if again:
            print(
                f"Experiment '{self.name}' resumes on its own GKE cluster '{spec.name}', which was deleted when its "
                "run ended: created again now, as its first start made it, and deleted when it ends."
            )
        else:
            print(
                f"Experiment '{self.name}' runs on its own GKE cluster '{spec.name}', created now and deleted when it "
                "ends."
            )
        existed = self.project.store.cluster(spec.name) is not None
        try:
            gke.create(self.project, spec, yes=yes, owner=self.name)
        finally:  # made, if only in part (its GPU pool refused, say): it goes again if the start fails. Only if made
            # for this experiment: a start of another run racing this one may have made it first (and this create
            # failed as "exists already"), and its run would go with it
            made = self.project.store.cluster(spec.name)
            if not existed and made is not None and made.runtime.get("owner") == self.name:
                self._created_own_cluster = spec.name

    def _delete_own_cluster_after_a_failed_start(self) -> None:
        """A GKE cluster this start created for the experiment goes again when the start fails after all (it
        would cost money, running nothing)."""
        name = getattr(self, "_created_own_cluster", None)
        if not name or self._spawned:  # its workload runs there already: it goes when that run ends
            return
        from torchforce.client import gke

        record = self.project.store.cluster(name)
        try:
            if record is not None:
                gke.delete(self.project, record, force=True, echo=lambda text: None)
        except ClientError as error:
            warnings.warn(
                f"the start failed, and deleting the cluster '{name}' made for it failed too: {error}; delete it "
                f"with 'tfcli cluster delete -c {name}'",
                ClientWarning,
                stacklevel=3,
            )
