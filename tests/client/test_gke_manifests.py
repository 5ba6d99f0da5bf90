"""The GKE backend's manifests, checked offline against the schemas the cluster applies them with.

- The RayJob against KubeRay's CRD (``../shared/kuberay-crds/``, pinned at ``manifests.KUBERAY_VERSION``): jsonschema
  for types, formats and required fields, plus a walk that refuses every field the schema does not name. OpenAPI
  objects accept unknown keys, and the API server silently prunes them from a custom resource, so without the walk a
  misspelled field would pass here and vanish there.
- Each pod template (head and every worker group) wrapped as a Pod, the RayJob's metadata and the ServiceAccount
  against Kubernetes ``manifests.GKE_VERSION``'s own schemas (kubernetes-validate, strict: unknown fields refused).
- What no schema says: the cluster's shape per run mode (replicas, CPUs, GPUs), the entry point, the bucket and key
  mounts, labels and names, and the checks KubeRay's operator makes before it accepts a RayJob.
- The worker image: its Dockerfile and what its build context leaves out.
"""

from __future__ import annotations

import copy
import functools
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from torchforce.client import manifests
from torchforce.spec import SpecError

REPO = Path(__file__).resolve().parents[2]
CRDS = Path(__file__).resolve().parents[3] / "shared" / "kuberay-crds"
KUBERNETES = manifests.GKE_VERSION + ".0"
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # what KubeRay requires of a RayJob's name
ENTRYPOINT = [
    "python",
    "-I",
    "-m",
    "torchforce.client.worker",
    "/mnt/tfcli/demo/cart_pole",
    "--log-file",
    "--resume-if-any",
    "--hold-after-pause",
    "--modules",
    "/mnt/tfcli/demo/cart_pole/modules",
]
# (run mode, GPUs per learning pod, suspend, max_restarts, checkpoint key)
CASES = [
    (mode, gpus, suspend, restarts, key)
    for mode in manifests.RUN_MODES
    for gpus in (0, 2)
    for suspend, restarts, key in ((False, 0, True), (True, 3, False))
]


def case_id(case: tuple[str, int, bool, int, bool]) -> str:
    mode, gpus, suspend, restarts, key = case
    return f"{mode}-{gpus}gpu-{'suspended' if suspend else 'running'}-{restarts}restarts-{'key' if key else 'nokey'}"


def make_job(run_mode: str = "single", *, gpus: int = 0, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "name": manifests.job_name("cart_pole", "0a1f"),
        "project": "demo",
        "experiment": "cart_pole",
        "image": "us-central1-docker.pkg.dev/my-project/tfcli/torchforce:0.1.0",
        "bucket": "gs://my-project-tfcli",
        "entrypoint": ENTRYPOINT,
        "run_mode": run_mode,
        "num_workers": 3,
        "num_parameter_servers": 2,
        "gpus": gpus,
        "gpu_type": "nvidia-l4" if gpus else None,
        "max_restarts": 0,
    }
    arguments.update(overrides)
    return manifests.ray_job(**arguments)


def job_of(case: tuple[str, int, bool, int, bool]) -> dict[str, Any]:
    mode, gpus, suspend, restarts, key = case
    return make_job(mode, gpus=gpus, suspend=suspend, max_restarts=restarts, checkpoint_key=key)


def templates(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod templates of a RayJob by group: ``head`` and each worker group's name."""
    cluster = job["spec"]["rayClusterSpec"]
    found = {"head": cluster["headGroupSpec"]["template"]}
    for group in cluster.get("workerGroupSpecs", []):
        found[group["groupName"]] = group["template"]
    return found


def container(template: dict[str, Any]) -> dict[str, Any]:
    (only,) = template["spec"]["containers"]
    return only


def as_pod(template: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}


# ----------------------------------------------------------------------------------------------- the CRD check


@functools.cache
def rayjob_schema() -> dict[str, Any]:
    """The openAPIV3Schema of KubeRay's RayJob ``v1``; skips the calling test when the CRDs are not there."""
    file = CRDS / "ray.io_rayjobs.yaml"
    if not file.is_file():
        pytest.skip(f"no KubeRay CRDs at {CRDS}")
    crd = yaml.load(file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (version,) = [version for version in crd["spec"]["versions"] if version["name"] == "v1"]
    return dict(version["schema"]["openAPIV3Schema"])


def without_extensions(schema: Any) -> Any:
    """``schema`` without Kubernetes' ``x-kubernetes-*`` keywords, which are no JSON Schema: list and map types
    (merge semantics), int-or-string (written as ``anyOf`` beside it anyway), CEL rules (that none of our fields
    meet is checked below). ``unknown_fields`` reads the one that matters here, preserve-unknown-fields."""
    if isinstance(schema, dict):
        return {key: without_extensions(value) for key, value in schema.items() if not key.startswith("x-kubernetes-")}
    if isinstance(schema, list):
        return [without_extensions(value) for value in schema]
    return schema


FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@functools.cache
def crd_validator() -> jsonschema.protocols.Validator:
    # OpenAPI 3.0 schemas are JSON Schema draft 4 with additions (nullable, format names), which draft 4 ignores
    return jsonschema.Draft4Validator(without_extensions(rayjob_schema()), format_checker=FORMATS)


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The paths of every key in ``value`` that ``schema`` does not name.

    An object's keys must be in its ``properties``; an object with ``additionalProperties`` (a map: labels,
    rayStartParams) takes any key, its values checked against that schema; ``x-kubernetes-preserve-unknown-fields``
    takes anything; an embedded resource takes apiVersion, kind and metadata besides its properties."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, list):
        items = schema.get("items", {})
        return [found for index, item in enumerate(value) for found in unknown_fields(item, items, f"{path}[{index}]")]
    if not isinstance(value, dict):
        return []
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", False)
    embedded = ("apiVersion", "kind", "metadata") if schema.get("x-kubernetes-embedded-resource") else ()
    found = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key in properties:
            found += unknown_fields(item, properties[key], where)
        elif isinstance(extra, dict):
            found += unknown_fields(item, extra, where)
        elif extra is not True and key not in embedded:
            found.append(where)
    return found


def crd_errors(job: dict[str, Any]) -> list[str]:
    """Everything KubeRay's RayJob schema refuses in ``job``, as ``path: problem`` lines.

    The root's ``metadata`` is the API server's ObjectMeta, not the CRD's to describe (its schema is a bare
    object): test_rayjob_metadata_is_object_meta checks it against Kubernetes' own."""
    errors = [
        f"{'.'.join(str(part) for part in error.absolute_path) or '(root)'}: {error.message}"
        for error in crd_validator().iter_errors(job)
    ]
    body = {key: value for key, value in job.items() if key != "metadata"}
    return errors + [f"{path}: no such field" for path in unknown_fields(body, rayjob_schema())]


def schema_keywords(schema: Any) -> set[str]:
    """Every keyword ``schema`` uses, at any depth (property names are no keywords)."""
    if isinstance(schema, list):
        return set().union(*map(schema_keywords, schema))
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        for child in value.values() if key == "properties" else [value]:
            found |= schema_keywords(child)
    return found


def objects_in_any_of(schema: Any, path: str = "") -> list[str]:
    """The paths where an ``anyOf`` branch has properties of its own (unknown_fields does not look there)."""
    found = []
    if isinstance(schema, dict):
        if any("properties" in branch for branch in schema.get("anyOf", [])):
            found.append(path)
        for key, value in schema.items():
            found += objects_in_any_of(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for value in schema:
            found += objects_in_any_of(value, path)
    return found


def rule_paths(schema: dict[str, Any], path: str = "") -> list[str]:
    """The paths (``spec.deletionStrategy``, ``a.b[]``) of every node of ``schema`` with CEL rules."""
    found = [path] if "x-kubernetes-validations" in schema else []
    for key, value in schema.get("properties", {}).items():
        found += rule_paths(value, f"{path}.{key}" if path else key)
    if isinstance(schema.get("items"), dict):
        found += rule_paths(schema["items"], path + "[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += rule_paths(schema["additionalProperties"], path + "{}")
    return found


def value_paths(value: Any, path: str = "") -> set[str]:
    """The paths of every node of ``value``, in rule_paths' form (``[]`` for any list index)."""
    found = {path}
    if isinstance(value, dict):
        for key, item in value.items():
            found |= value_paths(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for item in value:
            found |= value_paths(item, path + "[]")
    return found


# ------------------------------------------------------------------------------------------------ valid manifests


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rayjob_matches_the_kuberay_crd(case: tuple[str, int, bool, int, bool]) -> None:
    assert crd_errors(job_of(case)) == []


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_pod_templates_are_valid_pods(case: tuple[str, int, bool, int, bool]) -> None:
    for template in templates(job_of(case)).values():
        assert kubernetes_validate.validate(as_pod(template), KUBERNETES, strict=True) == manifests.GKE_VERSION


def test_rayjob_metadata_is_object_meta() -> None:
    metadata = make_job()["metadata"]
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}  # any kind: the same ObjectMeta
    kubernetes_validate.validate(config_map, KUBERNETES, strict=True)


def test_service_account_is_valid() -> None:
    account = manifests.service_account("tfcli@my-project.iam.gserviceaccount.com", "demo")
    kubernetes_validate.validate(account, KUBERNETES, strict=True)
    assert account["metadata"] == {
        "name": "tfcli-worker",
        "namespace": "default",
        "labels": {"app.kubernetes.io/managed-by": "tfcli", "torchforce.dev/project": "demo"},
        "annotations": {"iam.gke.io/gcp-service-account": "tfcli@my-project.iam.gserviceaccount.com"},
    }


def test_the_crd_uses_only_what_the_checks_understand() -> None:
    """A newer CRD with ``allOf``/``oneOf``/``not`` around object properties, or preserve-unknown-fields, would
    need the walk extended: fail here rather than check less without saying so."""
    understood = {
        *("type", "properties", "additionalProperties", "items", "required", "enum", "default", "description"),
        *("format", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "nullable"),
        *("anyOf", "rule", "message", "fieldPath", "reason", "messageExpression"),
        *("x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys"),
        *("x-kubernetes-map-type", "x-kubernetes-validations", "x-kubernetes-preserve-unknown-fields"),
    }
    schema = rayjob_schema()
    assert schema_keywords(schema) - understood == set()
    assert objects_in_any_of(schema) == []


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_no_field_we_write_has_cel_rules(case: tuple[str, int, bool, int, bool]) -> None:
    """CEL rules are the API server's to evaluate, not jsonschema's: none may apply to what we write."""
    ruled = set(rule_paths(rayjob_schema()))
    assert ruled  # the CRD has some (deletionStrategy, managedBy, ...): this checks something
    assert not any("{}" in path for path in ruled)  # value_paths names map keys: rules inside maps would be missed
    assert ruled & value_paths(job_of(case)) == set()


# ------------------------------------------------------------------------------------------------- what they say


@pytest.mark.parametrize("gpus", [0, 2])
def test_single_is_one_head_pod_that_learns(gpus: int) -> None:
    cluster = make_job("single", gpus=gpus)["spec"]["rayClusterSpec"]
    assert "workerGroupSpecs" not in cluster
    head = cluster["headGroupSpec"]
    expected = {"cpu": "1", "memory": "4Gi"} | ({"nvidia.com/gpu": "2"} if gpus else {})
    assert container(head["template"])["resources"] == {"requests": expected, "limits": expected}
    assert head["rayStartParams"] == {"num-cpus": "1", "dashboard-host": "0.0.0.0"} | (
        {"num-gpus": "2"} if gpus else {}
    )
    selector = head["template"]["spec"].get("nodeSelector")
    assert selector == ({"cloud.google.com/gke-accelerator": "nvidia-l4"} if gpus else None)


@pytest.mark.parametrize(("num_workers", "memory"), [(1, "4Gi"), (2, "4Gi"), (3, "6Gi"), (16, "32Gi")])
def test_multi_threaded_head_has_a_cpu_per_thread(num_workers: int, memory: str) -> None:
    cluster = make_job("multi-threaded", num_workers=num_workers, gpus=1)["spec"]["rayClusterSpec"]
    assert "workerGroupSpecs" not in cluster
    head = cluster["headGroupSpec"]
    expected = {"cpu": str(num_workers), "memory": memory, "nvidia.com/gpu": "1"}
    assert container(head["template"])["resources"] == {"requests": expected, "limits": expected}
    assert head["rayStartParams"]["num-cpus"] == str(num_workers)
    assert head["rayStartParams"]["num-gpus"] == "1"


@pytest.mark.parametrize("gpus", [0, 2])
def test_distributed_has_a_driver_head_workers_and_parameter_servers(gpus: int) -> None:
    cluster = make_job("distributed", gpus=gpus, num_workers=3, num_parameter_servers=2)["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]
    assert head["rayStartParams"] == {"num-cpus": "0", "dashboard-host": "0.0.0.0"}  # no actor on the driver's pod
    assert container(head["template"])["resources"]["limits"] == {"cpu": "1", "memory": "4Gi"}
    assert "nodeSelector" not in head["template"]["spec"]
    workers, servers = cluster["workerGroupSpecs"]
    assert [workers["groupName"], servers["groupName"]] == ["workers", "parameter-servers"]
    for group, replicas in ((workers, 3), (servers, 2)):
        assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == replicas
        assert group["rayStartParams"]["num-cpus"] == "1"
    learner = {"cpu": "1", "memory": "2Gi"} | ({"nvidia.com/gpu": "2"} if gpus else {})
    assert container(workers["template"])["resources"] == {"requests": learner, "limits": learner}
    assert workers["rayStartParams"].get("num-gpus") == ("2" if gpus else None)
    assert container(servers["template"])["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert "num-gpus" not in servers["rayStartParams"] and "nodeSelector" not in servers["template"]["spec"]
    if gpus:
        assert workers["template"]["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}


@pytest.mark.parametrize(
    ("run_mode", "learner", "learner_cpus", "ray_cpus"),
    [
        ("single", "head", "4", "4"),
        ("multi-threaded", "head", "12", "12"),  # 3 worker threads of 4 torch threads
        ("distributed", "workers", "4", "4"),
    ],
)
def test_torch_threads_give_the_pods_that_run_the_agent_a_cpu_each(
    run_mode: str, learner: str, learner_cpus: str, ray_cpus: str
) -> None:
    job = make_job(run_mode, torch_threads=4)
    assert crd_errors(job) == []
    for template in templates(job).values():
        kubernetes_validate.validate(as_pod(template), KUBERNETES, strict=True)
    cluster = job["spec"]["rayClusterSpec"]
    groups = {"head": cluster["headGroupSpec"]} | {g["groupName"]: g for g in cluster.get("workerGroupSpecs", [])}
    resources = container(groups[learner]["template"])["resources"]
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == learner_cpus
    assert groups[learner]["rayStartParams"]["num-cpus"] == ray_cpus
    if run_mode == "distributed":  # the driver and the parameter servers keep one CPU: they run no agent
        assert container(groups["head"]["template"])["resources"]["limits"]["cpu"] == "1"
        assert groups["parameter-servers"]["rayStartParams"]["num-cpus"] == "1"
    assert make_job(run_mode, torch_threads=1) == make_job(run_mode)  # the default is one thread


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_job_spec_and_what_kuberay_checks_before_accepting_it(case: tuple[str, int, bool, int, bool]) -> None:
    _, _, suspend, restarts, _ = case
    job = job_of(case)
    spec = job["spec"]
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    assert spec["suspend"] is suspend and spec["backoffLimit"] == restarts
    assert spec["submissionMode"] == "K8sJobMode" and spec["shutdownAfterJobFinishes"] is True
    assert spec["ttlSecondsAfterFinished"] == 300
    assert spec["rayClusterSpec"]["rayVersion"] == manifests.ray_version() == "2.60.0"
    assert yaml.safe_load(spec["runtimeEnvYAML"]) == {"env_vars": {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}}
    # the operator's own checks (its RayJob validation): a name it can extend into the Ray cluster's, suspend only
    # with the cluster deleted at the end, non-negative retries and TTL
    name = job["metadata"]["name"]
    assert len(name) <= 47 and DNS_1035.fullmatch(name)
    assert spec["shutdownAfterJobFinishes"] or not spec["suspend"]
    assert spec["backoffLimit"] >= 0 and spec["ttlSecondsAfterFinished"] >= 0


@pytest.mark.parametrize("here", ["2.9.3", None])
def test_ray_version_is_the_images_ray_whatever_ray_is_installed_here(monkeypatch, here) -> None:
    # KubeRay picks the Ray pods' health probes by rayVersion: it must name the Ray the image runs (the pin its
    # pip install takes), not a client's own Ray, an older or newer one, or none
    import importlib.metadata

    real = importlib.metadata.version

    def version(name: str) -> str:
        if name != "ray":
            return real(name)
        if here is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return here

    monkeypatch.setattr(importlib.metadata, "version", version)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = [requirement for requirement in extras["ray"] if requirement.startswith("ray[")]
    assert make_job()["spec"]["rayClusterSpec"]["rayVersion"] == pin.partition("==")[2]
    assert manifests.ray_version() == manifests.RAY_VERSION == pin.partition("==")[2]


def test_entrypoint_round_trips_through_the_shell() -> None:
    awkward = [*ENTRYPOINT[:4], "/mnt/tfcli/my project/it's $HOME", "--log-file"]
    spec = make_job(entrypoint=awkward)["spec"]
    assert shlex.split(spec["entrypoint"]) == awkward
    assert shlex.split(make_job()["spec"]["entrypoint"]) == ENTRYPOINT


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_pod_has_the_bucket_the_key_and_the_identity(case: tuple[str, int, bool, int, bool]) -> None:
    key = case[-1]
    for group, template in templates(job_of(case)).items():
        spec, ray = template["spec"], container(template)
        assert template["metadata"]["annotations"] == {"gke-gcsfuse/volumes": "true"}
        assert spec["serviceAccountName"] == manifests.SERVICE_ACCOUNT
        assert ray["name"] == ("ray-head" if group == "head" else "ray-worker")
        assert ray["image"] == "us-central1-docker.pkg.dev/my-project/tfcli/torchforce:0.1.0"
        assert ray["imagePullPolicy"] == "IfNotPresent"
        assert ray["resources"]["requests"] == ray["resources"]["limits"]
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        mounts = {mount["name"]: mount for mount in ray["volumeMounts"]}
        assert volumes["bucket"]["csi"] == {
            "driver": "gcsfuse.csi.storage.gke.io",
            "volumeAttributes": {
                "bucketName": "my-project-tfcli",
                "mountOptions": "implicit-dirs,rename-dir-limit=1000",
            },
        }
        assert mounts["bucket"] == {"name": "bucket", "mountPath": "/mnt/tfcli"}
        if key:
            assert volumes["checkpoint-key"]["secret"] == {"secretName": "tfcli-checkpoint-key", "defaultMode": 0o400}
            # the file the worker reads: $XDG_DATA_HOME/torchforce/checkpoint.key
            assert ray["env"] == [{"name": "XDG_DATA_HOME", "value": "/var/run/tfcli"}]
            assert mounts["checkpoint-key"] == {
                "name": "checkpoint-key",
                "mountPath": "/var/run/tfcli/torchforce/checkpoint.key",
                "subPath": "checkpoint.key",
                "readOnly": True,
            }
        else:
            assert set(volumes) == set(mounts) == {"bucket"} and "env" not in ray
        ports = {port["name"]: port["containerPort"] for port in ray.get("ports", [])}
        assert ports == ({"gcs-server": 6379, "dashboard": 8265, "client": 10001} if group == "head" else {})


@pytest.mark.parametrize("run_mode", manifests.RUN_MODES)
def test_labels_and_names(run_mode: str) -> None:
    job = make_job(run_mode)
    tags = {
        "app.kubernetes.io/managed-by": "tfcli",
        "torchforce.dev/project": "demo",
        "torchforce.dev/experiment": "cart-pole",
    }
    assert job["metadata"] == {"name": "tf-cart-pole-0a1f", "namespace": "default", "labels": tags}
    dns = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
    for group, template in templates(job).items():
        assert template["metadata"]["labels"] == tags
        assert dns.fullmatch(group) and len(group) <= 63
        names = [container(template)["name"]] + [volume["name"] for volume in template["spec"]["volumes"]]
        assert all(dns.fullmatch(name) and len(name) <= 63 for name in names), names
        assert all(len(port["name"]) <= 15 for port in container(template).get("ports", []))


def test_dump_is_one_yaml_document_per_manifest() -> None:
    account = manifests.service_account("tfcli@my-project.iam.gserviceaccount.com", "demo")
    job = make_job("distributed", gpus=1)
    text = manifests.dump(account, job)
    assert list(yaml.safe_load_all(text)) == [account, job]
    assert text.index("kind: ServiceAccount") < text.index("kind: RayJob")  # keys in the order written
    assert list(yaml.safe_load_all(manifests.dump(job))) == [job]


# -------------------------------------------------------------------------------------- the checks can fail


@pytest.mark.parametrize(
    ("where", "right", "wrong"),
    [
        (("spec",), "shutdownAfterJobFinishes", "shutdownAfterJobFinish"),
        (("spec", "rayClusterSpec"), "workerGroupSpecs", "workerGroupSpec"),
        (("spec", "rayClusterSpec", "headGroupSpec"), "rayStartParams", "rayStartParameters"),
        (("spec", "rayClusterSpec", "workerGroupSpecs", 0), "replicas", "replica"),
        (("spec", "rayClusterSpec", "headGroupSpec", "template", "spec"), "serviceAccountName", "serviceAcountName"),
        (("spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "containers", 0), "volumeMounts", "mounts"),
        (
            ("spec", "rayClusterSpec", "workerGroupSpecs", 1, "template", "spec", "volumes", 0, "csi"),
            "volumeAttributes",
            "attributes",
        ),
    ],
)
def test_a_misspelled_field_is_refused(where: tuple[str | int, ...], right: str, wrong: str) -> None:
    job = make_job("distributed", gpus=1)
    node: Any = job
    for step in where:
        node = node[step]
    node[wrong] = node.pop(right)
    path = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in where).lstrip(".")
    assert f"{path}.{wrong}: no such field" in crd_errors(job)


@pytest.mark.parametrize(
    ("where", "value", "problem"),
    [
        (("spec", "backoffLimit"), "3", "is not of type 'integer'"),
        (("spec", "backoffLimit"), 2**40, "is not a 'int32'"),
        (("spec", "rayClusterSpec", "headGroupSpec", "rayStartParams", "num-cpus"), 1, "is not of type 'string'"),
        (("spec", "rayClusterSpec", "workerGroupSpecs", 0, "replicas"), "3", "is not of type 'integer'"),
        (
            (
                "spec",
                "rayClusterSpec",
                "headGroupSpec",
                "template",
                "spec",
                "containers",
                0,
                "resources",
                "limits",
                "memory",
            ),
            "4 GB",
            "does not match",
        ),
    ],
)
def test_a_wrong_value_is_refused(where: tuple[str | int, ...], value: Any, problem: str) -> None:
    job = copy.deepcopy(make_job("distributed"))
    node: Any = job
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    errors = crd_errors(job)
    assert any(problem in error for error in errors), errors


def test_a_required_field_missing_is_refused() -> None:
    job = copy.deepcopy(make_job("distributed"))
    del job["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["groupName"]
    assert any("'groupName' is a required property" in error for error in crd_errors(job))


def test_a_pod_with_a_misspelled_field_is_refused_by_kubernetes_schema() -> None:
    pod = as_pod(copy.deepcopy(templates(make_job())["head"]))
    pod["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    pod["spec"]["containers"][0]["readOnly"] = True  # a mount's field, put on the container
    with pytest.raises(kubernetes_validate.ValidationError, match="readOnly"):
        kubernetes_validate.validate(pod, KUBERNETES, strict=True)
    pod = as_pod(copy.deepcopy(templates(make_job())["head"]))
    pod["spec"]["volumes"][1]["secret"]["defaultMode"] = "0400"  # a string, not the number 0o400
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES, strict=True)


# ----------------------------------------------------------------------------------------------- names refused


@pytest.mark.parametrize("name", ["My_Exp.1", "exp/1", "-exp", "exp-", "", "é", "a" * 64])
def test_dns_label_refuses_what_no_label_can_be(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        manifests.dns_label(name, "experiment.name", "a Kubernetes label")
    assert caught.value.path == "experiment.name" and caught.value.got == name
    assert str(caught.value).startswith("experiment.name: cannot be used for a Kubernetes label")


def test_dns_label_lowers_and_maps_underscores() -> None:
    assert manifests.dns_label("My_Exp_1", "experiment.name", "a label") == "my-exp-1"
    assert manifests.dns_label("a" * 63, "x", "a label") == "a" * 63
    with pytest.raises(SpecError, match="at most 10 "):
        manifests.dns_label("a" * 11, "x", "a label", max_length=10)


def test_job_name_fits_kuberay_and_refuses_longer_names() -> None:
    assert manifests.job_name("Cart_Pole", "0a1f") == "tf-cart-pole-0a1f"
    longest = "e" * 39
    assert len(manifests.job_name(longest, "ffff")) == 47
    with pytest.raises(SpecError) as caught:
        manifests.job_name(longest + "e", "ffff")
    assert caught.value.path == "experiment.name" and "at most 39 characters" in str(caught.value)
    with pytest.raises(SpecError, match="experiment.name"):
        manifests.job_name("cart.pole", "ffff")
    with pytest.raises(ValueError, match="4 lower-case hex"):
        manifests.job_name("cart_pole", "xyz1")


def test_labels_refuse_a_project_name_no_label_can_be() -> None:
    assert manifests.labels("My_Project", None) == {
        "app.kubernetes.io/managed-by": "tfcli",
        "torchforce.dev/project": "my-project",
    }
    with pytest.raises(SpecError) as caught:
        manifests.labels("my project", "exp")
    assert caught.value.path == "project.name"


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"run_mode": "threaded"}, SpecError),
        ({"name": "Tf-Exp-0a1f"}, ValueError),
        ({"name": "1-exp-0a1f"}, ValueError),  # KubeRay wants a letter first
        ({"bucket": "my-bucket"}, ValueError),
        ({"bucket": "gs://my-bucket/folder"}, ValueError),
        ({"gpus": 1, "gpu_type": None}, ValueError),
        ({"max_restarts": -1}, ValueError),
        ({"run_mode": "distributed", "num_workers": 0}, ValueError),
        ({"torch_threads": 0}, ValueError),
    ],
)
def test_ray_job_refuses_bad_arguments(overrides: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        make_job(**overrides)


# ------------------------------------------------------------------------------------------------- the image


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments): comments dropped, continued lines joined."""
    lines = [line for line in (REPO / "Dockerfile").read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, arguments = line.strip().partition(" ")
            found.append((word.upper(), " ".join(arguments.split())))
    return found


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves ``path`` (relative, with '/') out of the build context: the last pattern matching it
    or a folder above it decides, ``!`` taking it back in; ``**`` spans folders, ``*`` and ``?`` stay in one."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]
    verdict = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        body = pattern.removeprefix("!").strip("/")
        regex = re.sub(r"\\\*\\\*/|\\\*\\\*|\\\*|\\\?", _glob_part, re.escape(body))
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            verdict = not keep
    return verdict


def _glob_part(match: re.Match[str]) -> str:
    return {r"\*\*/": "(?:.*/)?", r"\*\*": ".*", r"\*": "[^/]*", r"\?": "[^/]"}[match.group(0)]


def dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_dockerfile_builds_the_worker_image_from_pinned_parts() -> None:
    steps = dockerfile()
    assert steps[0] == ("FROM", "python:3.11-slim")
    assert [step for step in steps if step[0] == "FROM"] == [steps[0]]  # one stage: what is built is what runs
    assert ("ARG", "TORCH_INDEX=https://download.pytorch.org/whl/cpu") in steps
    runs = [shlex.split(arguments) for word, arguments in steps if word == "RUN"]
    (torch,) = [run for run in runs if "torch" in run]
    assert torch[:2] == ["pip", "install"] and "--index-url" in torch and "${TORCH_INDEX}" in torch
    (package,) = [run for run in runs if ".[ray,atari,mujoco]" in run]  # the environments workers run
    assert package[:2] == ["pip", "install"]
    for run in (torch, package):  # both installs held to the same pins
        assert run[run.index("-c") + 1] == "constraints.txt"
    constraints = (REPO / "constraints.txt").read_text()
    assert re.search(r"^torch==\S+", constraints, re.MULTILINE)
    # the image's Ray is the one every RayJob names as rayVersion
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"ray[default]=={manifests.ray_version()}" in extras["ray"]
    # wget: the exec probes KubeRay adds to the Ray containers (bash -c "wget ... | grep success") need it
    (system,) = [run for run in runs if run[:2] == ["apt-get", "update"]]
    assert "install" in system and "wget" in system and "--no-install-recommends" in system
    assert runs.index(system) < runs.index(torch)
    env = " ".join(arguments for word, arguments in steps if word == "ENV")
    assert "PYTHONUNBUFFERED=1" in env.split()
    assert [arguments for word, arguments in steps if word == "WORKDIR"][-1] == "/home/tfcli"
    assert all(word != "USER" or arguments == "root" for word, arguments in steps)  # root: see the Dockerfile


def test_dockerfile_bakes_in_no_secret() -> None:
    steps = dockerfile()
    secretive = re.compile(r"key|secret|token|password|credential|\.tfcli", re.IGNORECASE)
    for word, arguments in steps:
        if word in ("COPY", "ADD"):
            sources = [part for part in arguments.split() if not part.startswith("--")][:-1]
            assert not any(secretive.search(source) for source in sources), arguments
        if word in ("ARG", "ENV"):
            names = [part.split("=")[0] for part in arguments.split()]
            assert not any(secretive.search(name) for name in names), arguments


def test_build_context_leaves_out_local_state_and_keys_but_keeps_the_package() -> None:
    patterns = dockerignore()
    for path in (
        ".tfcli/project.json",
        "demo/.tfcli/state.db",
        "experiments/cart_pole/results/checkpoints/latest.json",
        "key.json",
        "secrets/my-project-key.json",
        "checkpoint.key",
        ".git/config",
        ".venv/bin/python",
        "torchforce/__pycache__/x.cpython-311.pyc",
    ):
        assert ignored(path, patterns), path
    needed = ["pyproject.toml", "README.md", "constraints.txt"] + [
        str(path.relative_to(REPO))
        for path in (REPO / "torchforce").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
    assert "torchforce/configs/experiments/cartpole_ppo.json" in needed
    assert [path for path in needed if ignored(path, patterns)] == []


@pytest.mark.parametrize(
    ("stderr", "seen"),
    [
        ('Error from server (NotFound): rayjobs.ray.io "tf-run-1a2b" not found\n', "gone"),
        # kubectl's words for other things missing: nothing is judged of the RayJob (a run judged gone fails, and
        # the cluster made for it is deleted)
        ('error: context "gke_p_z_c" not found\n', "unknown"),
        ("error: exec: executable gke-gcloud-auth-plugin not found\n", "unknown"),
        ('Error from server (NotFound): namespaces "tf" not found\n', "unknown"),
        ("Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout\n", "unknown"),
    ],
)
def test_a_rayjob_is_gone_only_when_the_api_server_says_so_of_it(stderr, seen):
    from torchforce.client.backends.gke import STATUS_SECONDS, GkeBackend
    from torchforce.client.errors import ClientError
    from torchforce.client.gcloud import Result

    backend = GkeBackend.__new__(GkeBackend)  # its kubectl answers as given, nothing else is asked
    backend.cluster, backend.context = "lab", "gke_p_z_c"
    waits = []
    backend.kubectl = lambda *arguments, check=True, timeout=0: waits.append(timeout) or Result(1, "", stderr)
    assert backend.job("tf-run-1a2b") == seen and waits == [STATUS_SECONDS] and STATUS_SECONDS <= 60

    def hangs(*arguments, check=True, timeout=0):
        raise ClientError(f"'kubectl --context=gke_p_z_c get rayjob ...' did not finish in {timeout:.0f} s")

    backend.kubectl = hangs  # a status read that hangs is no status: nothing is judged
    assert backend.job("tf-run-1a2b") == "unknown"
    backend.context = None  # the cluster was deleted, and every object on it
    assert backend.job("tf-run-1a2b") == "gone"


@pytest.mark.parametrize(
    ("suspend", "status", "seen"),
    [
        (False, "Suspended", "Resuming"),  # unsuspended, KubeRay has not acted on it yet
        (False, "Suspending", "Resuming"),  # KubeRay finishes a suspension it began, then starts it again
        (True, "Running", "Suspending"),  # suspended, KubeRay has not acted on it yet
        (True, "Initializing", "Suspending"),
        (True, None, "Suspending"),  # no status yet
        (True, "Suspending", "Suspending"),
        (True, "Suspended", "Suspended"),
        (False, "Running", "Running"),
        (False, None, "Initializing"),
        (True, "Complete", "Complete"),  # KubeRay ignores a suspension of a RayJob that has ended
        (True, "Failed", "Failed"),
    ],
)
def test_a_suspend_kuberay_has_not_acted_on_reads_as_on_its_way(suspend, status, seen):
    from torchforce.client.backends.gke import ENDED, GONE, deployment_status

    job = {"spec": {"suspend": suspend}, "status": {"jobDeploymentStatus": status} if status else {}}
    assert deployment_status(job) == seen
    if seen in ("Resuming", "Suspending"):  # alive, not ended: never judged paused, failed or gone
        assert seen not in (GONE, "Suspended", *ENDED)
