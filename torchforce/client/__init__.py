"""tfcli, the experiment client: projects, experiments and where they run (the local backend by default)."""

from torchforce.client.cluster import Cluster, get_cluster_from_string
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.experiment import Experiment, get_experiment_from_string, get_local_experiments
from torchforce.client.project import Project

__all__ = [
    "ClientError",
    "ClientWarning",
    "Cluster",
    "Experiment",
    "Project",
    "get_cluster_from_string",
    "get_experiment_from_string",
    "get_local_experiments",
]
