"""An agent's ``device`` across the client: an experiment for a cluster's GPUs is made on a machine without one
(checked on the CPU, with a warning), a run that needs CUDA is refused where there is none (here, a Ray cluster,
GKE) before anything changes, idle GPUs are pointed out, a Ray job gets a GPU for an agent on one, and the
distributed workers share a cluster's GPUs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from tests.client.conftest import tfcli
from tests.client.gke_common import CLUSTER, PPO
from tests.client.test_gke_runs import IMAGE
from torchforce.client import Experiment, Project
from torchforce.client.backends.base import check_gpus
from torchforce.client.backends.ray import RayBackend
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.execution.distributed_actors import worker_resources
from torchforce.spec.device import gpu_index, needs_gpu, uses_gpu

WITHOUT_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="about a machine without CUDA")


@pytest.mark.parametrize(
    ("device", "needs", "uses"),
    [
        (None, False, False),
        ("cpu", False, False),
        ("auto", False, True),
        ("cuda", True, True),
        ("cuda:1", True, True),
        ("cuda:x", False, False),  # not a device: building the agent says so, wherever it is built
        (3, False, False),
    ],
)
def test_what_a_device_asks_of_the_machine(device, needs, uses):
    assert (needs_gpu(device), uses_gpu(device)) == (needs, uses)
    assert gpu_index(device) == (1 if device == "cuda:1" else 0)


@pytest.mark.parametrize(
    ("device", "gpus", "workers", "bundle"),
    [
        (None, 4, 2, {"CPU": 1}),  # an agent on the CPU asks for no GPU, and Ray shows it none
        ("auto", 0, 2, {"CPU": 1}),  # "auto" on a cluster without GPUs: the CPU
        ("auto", 1, 2, {"CPU": 1, "GPU": 0.5}),
        ("cuda", 1, 3, {"CPU": 1, "GPU": 0.3333}),  # rounded down to Ray's resolution: 3 of them fit on one GPU
        ("cuda", 8, 2, {"CPU": 1, "GPU": 1.0}),  # at most one each
        ("cuda", 2, 3, {"CPU": 1, "GPU": 0.5}),  # two thirds each would not fit: Ray keeps a share within one GPU
        ("auto", 4, 6, {"CPU": 1, "GPU": 0.5}),
        ("auto", 0.5, 2, {"CPU": 1, "GPU": 0.25}),  # a cluster declaring half a GPU
    ],
)
def test_distributed_workers_share_the_gpus_of_the_cluster(device, gpus, workers, bundle):
    assert worker_resources(device, gpus, workers) == bundle


def test_distributed_workers_on_cuda_need_a_cluster_with_gpus():
    with pytest.raises(ValueError, match=r"agents compute on 'cuda' \(device\), and the Ray cluster has no GPUs"):
        worker_resources("cuda", 0, 2)


def test_a_run_on_cuda_is_refused_where_there_are_no_gpus_and_idle_gpus_are_pointed_out():
    spec = {"name": "pong", "agent": {"type": "ppo", "device": "cuda"}}
    with pytest.raises(ClientError) as refused:
        check_gpus(spec, "the Ray cluster 'ray_local'", 0)
    assert str(refused.value) == (
        "experiment 'pong' computes on 'cuda' (agent.device), and the Ray cluster 'ray_local' has no GPUs\n"
        "  Start it where there are GPUs, or make a copy that takes a GPU only where there is one: 'tfcli experiment "
        "new -n pong-auto -f experiments/pong/experiment.json --set agent.device=auto'."
    )
    check_gpus(spec, "a cluster", None)  # not known: nothing to say
    check_gpus({**spec, "agent": {"device": "cuda:1"}}, "this machine", 2)
    with pytest.raises(ClientError) as refused:
        check_gpus({**spec, "agent": {"device": "cuda:1"}}, "the Ray cluster 'big'", 4, visible=1)
    assert str(refused.value).startswith(
        "experiment 'pong' computes on 'cuda:1' (agent.device), and a run on the Ray cluster 'big' sees 1 GPU, "
        'numbered from 0\n  Use "cuda" (the first GPU it sees)'
    )
    for device in ("cuda", "auto"):
        check_gpus({**spec, "agent": {"device": device}}, "a cluster", 2)  # quiet: the agent takes them
    with pytest.warns(ClientWarning) as warned:
        check_gpus({**spec, "agent": {"type": "ppo"}}, "the GKE cluster 'big'", 1)
    assert str(warned[0].message) == (
        "the GKE cluster 'big' has 1 GPU, and experiment 'pong' computes on the CPU (agent.device null): they stay "
        'idle; agent.device "auto" or "cuda" puts the agent on them'
    )


@pytest.mark.parametrize(
    ("device", "gpus", "asked"),
    [("auto", 2, 1.0), ("cuda", 0.5, 0.5), ("auto", 0, 0), (None, 2, 0), ("cuda", None, 1.0), ("auto", None, 0)],
)
def test_a_ray_job_gets_a_gpu_for_an_agent_on_one(device, gpus, asked, monkeypatch):
    monkeypatch.setattr("torchforce.client.ray_cluster.status", lambda record: {"gpus": gpus})
    backend = SimpleNamespace(record=None)
    assert RayBackend._job_gpus(backend, {"agent": {"device": device}}) == asked


@WITHOUT_CUDA
def test_an_experiment_for_gpus_is_made_here_and_refused_to_start_here(project: Project):
    made = tfcli(project.root, "experiment", "new", "-n", "gpu", *PPO, "-t", "1100", "--set", "agent.device=cuda")
    assert made.returncode == 0, made.stderr
    assert "tfcli: warning: experiment.agent.device: 'cuda', and this machine has no CUDA: the agent was checked " in (
        made.stderr
    )
    assert "Start it on a cluster with GPUs (this machine has no CUDA): tfcli experiment start -e gpu -c CLUSTER" in (
        made.stdout
    )
    assert "Created experiment 'gpu' in experiments/gpu: ppo (cuda) on CartPole-v1" in made.stdout
    folder = project.root / "experiments" / "gpu"
    assert json.loads((folder / "experiment.json").read_text())["agent"]["device"] == "cuda"  # kept as asked

    started = tfcli(project.root, "experiment", "start", "-e", "gpu")
    assert started.returncode == 2 and "Traceback" not in started.stderr
    assert "experiment 'gpu' computes on 'cuda' (agent.device), and this machine has no GPUs" in started.stderr
    assert Experiment.load(project, "gpu").record().status == "new" and not (folder / "results").exists()

    copy = tfcli(
        project.root,
        "experiment",
        "new",
        "-n",
        "gpu-auto",
        "-f",
        "experiments/gpu/experiment.json",
        "--set",
        "agent.device=auto",
    )
    assert copy.returncode == 0 and "warning" not in copy.stderr, copy.stderr


@WITHOUT_CUDA
@pytest.mark.slow
def test_gke_refuses_cuda_without_gpus_and_points_out_idle_ones(linked: Project, cloud):
    cloud.add_image(IMAGE)
    for name, flags in (("gpu", ("--set", "agent.device=cuda")), ("cpu", ())):
        assert tfcli(linked.root, "experiment", "new", "-n", name, *PPO, "-t", "1100", *flags).returncode == 0
    plain = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-m", "n1-standard-4", "-s", "2", "--yes")
    assert plain.returncode == 0, plain.stderr
    refused = tfcli(linked.root, "experiment", "start", "-e", "gpu", "-c", CLUSTER, "--dry-run")
    assert refused.returncode == 2, refused.stderr
    assert f"computes on 'cuda' (agent.device), and the GKE cluster '{CLUSTER}' has no GPUs" in refused.stderr

    gpus = ("-n", "gpus", "-m", "n1-standard-4", "-s", "1", "--gpus", "1", "--gpu-type", "nvidia-tesla-t4", "--yes")
    assert (created := tfcli(linked.root, "cluster", "create", *gpus)).returncode == 0, created.stderr
    idle = tfcli(linked.root, "experiment", "start", "-e", "cpu", "-c", "gpus", "--dry-run")
    assert idle.returncode == 0, idle.stderr
    assert "the GKE cluster 'gpus' has 1 GPU a node, and experiment 'cpu' computes on the CPU" in idle.stderr
    used = tfcli(linked.root, "experiment", "start", "-e", "gpu", "-c", "gpus", "--dry-run")
    assert used.returncode == 0 and "stay idle" not in used.stderr, used.stderr
    assert "nvidia.com/gpu: '1'" in used.stdout  # the head, which learns, has the GPU


@WITHOUT_CUDA
def test_an_own_gke_cluster_without_gpus_is_never_created_for_a_run_on_cuda(linked: Project, cloud):
    cloud.add_image(IMAGE)
    spec = linked.root / "configs" / "clusters" / "plain.json"
    spec.write_text(json.dumps({"name": "plain-one", "num_nodes": 2, "machine_type": "n1-standard-4"}))
    made = tfcli(
        linked.root,
        "experiment",
        "new",
        "-n",
        "gpu",
        *PPO,
        "-t",
        "1100",
        "--set",
        "agent.device=cuda",
        "--cluster",
        "plain",
    )
    assert made.returncode == 0, made.stderr
    started = tfcli(linked.root, "experiment", "start", "-e", "gpu", "--yes")
    assert started.returncode == 2 and "and the GKE cluster 'plain-one' has no GPUs" in started.stderr
    assert not any(call[:4] == ["gcloud", "container", "clusters", "create"] for call in cloud.calls())
    assert linked.store.clusters() == [] and Experiment.load(linked, "gpu").record().status == "new"
