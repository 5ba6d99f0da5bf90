"""A fake ``kubectl`` for the tests, with a fake KubeRay operator behind it.

The kube contexts are those ``gcloud container clusters get-credentials`` wrote (one per GKE cluster); objects live
per context. A RayJob that is not suspended runs for real: its entrypoint becomes a local process (``python`` is
this interpreter; paths under a GCS FUSE mount point name the bucket's folder), started through this file's
``__run`` wrapper, which records the exit code and retries per ``spec.backoffLimit``. Its status follows the
process as KubeRay's would; suspending kills it (SIGKILL, as KubeRay deletes the pods), resuming runs it again.

What the fake checks before it lets a RayJob's pods run (else the RayJob stays ``Initializing``, as on GKE, and
the reason is in ``status.rayClusterStatus.conditions`` and in the job folder's ``events`` file): the pods'
service account and secrets exist, a GCS FUSE volume has the ``gke-gcsfuse/volumes`` annotation, the cluster's
GcsFuseCsiDriver add-on, an existing bucket and a Workload Identity binding of the service account; an Artifact
Registry image was built; requested GPUs exist in a node pool.

``kubectl get nodes`` lists the nodes of the context's cluster, one per node of each pool, named and labelled as
GKE's (``cluster_nodes``); ``gcloud compute ssh``/``scp`` reach the same nodes as Compute Engine instances.

Credentials are not checked here (the real ``kubectl`` leaves them to the context's auth plugin, which asks gcloud
in the environment it inherits): each call's record says which gcloud configuration it ran with (``CLOUDSDK_CONFIG``)
and the account active there, as which the plugin would have fetched the token. So the tests' own ``kubectl`` calls
need no login; but a call that reaches a cluster fails, as kubectl's does, when the plugin
(``gke-gcloud-auth-plugin``) is not on PATH."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

try:
    from . import common
except ImportError:  # run as a script: tests/fakecloud is on sys.path
    import common  # type: ignore[no-redef]

Exit = common.Exit
Store = common.Store

GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
GLOBAL_FLAGS = {"--context": "value", "--namespace": "value", "--kubeconfig": "value", "--request-timeout": "value"}
VERB_FLAGS = {
    "apply": {"--filename": "multi", "--validate": "value"},
    "get": {"--output": "value", "--ignore-not-found": "bool"},
    "patch": {"--type": "value", "--patch": "value"},
    "delete": {"--ignore-not-found": "bool", "--wait": "bool", "--now": "bool"},
    "logs": {"--follow": "bool", "--tail": "value", "--container": "value"},
    "create": {"--from-file": "multi", "--from-literal": "multi"},
}
SHORT_BY_VERB = {
    "apply": {"-f": "--filename"},
    "logs": {"-f": "--follow", "-c": "--container"},
}

# kind -> (apiVersion, plural resource, singular for "x/NAME created", group suffix for NotFound)
KINDS = {
    "RayJob": ("ray.io/v1", "rayjobs.ray.io", "rayjob.ray.io"),
    "ServiceAccount": ("v1", "serviceaccounts", "serviceaccount"),
    "Secret": ("v1", "secrets", "secret"),
    "ConfigMap": ("v1", "configmaps", "configmap"),
}
TYPE_ALIASES = {
    **dict.fromkeys(("rayjob", "rayjobs", "rayjob.ray.io", "rayjobs.ray.io"), "RayJob"),
    **dict.fromkeys(("sa", "serviceaccount", "serviceaccounts"), "ServiceAccount"),
    **dict.fromkeys(("secret", "secrets"), "Secret"),
    **dict.fromkeys(("cm", "configmap", "configmaps"), "ConfigMap"),
}
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
PLACEHOLDER = b"<fake cloud: secret content is not stored>"
IMAGE_RE = re.compile(r"^(?P<location>[a-z0-9-]+)-docker\.pkg\.dev/")
GO_KINDS = {"integer": "number", "number": "number", "boolean": "bool"}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["__run"]:
        return run_job(Path(args[1]), args[2], args[3], args[4], int(args[5]))
    return common.run_tool("kubectl", args, dispatch)


# ---- parsing --------------------------------------------------------------------------------------------------


class Call:
    def __init__(self, verb: str, positionals: list[str], flags: dict):
        self.verb = verb
        self.positionals = positionals
        self.flags = flags
        self.context_namespace = "default"  # the context's own namespace, once ``context_of`` has found it

    @property
    def namespace(self) -> str:
        """``--namespace``, else the namespace set on the call's context in the kubeconfig, else ``default``."""
        return self.flags.get("--namespace") or self.context_namespace


def unknown_flag(token: str, verb: str | None) -> Exit:
    what = f"shorthand flag: '{token[1]}' in {token}" if not token.startswith("--") else f"flag: {token}"
    hint = f"See 'kubectl {verb} --help' for usage." if verb else "See 'kubectl --help' for usage."
    return Exit(1, f"error: unknown {what}\n{hint}\n")


def take_flag(token: str, verb: str | None, tokens: list[str], flags: dict) -> None:
    """Read one flag (``--name=value``, ``--name value``, ``-x value``, ``-x=value``, ``-xvalue``) into ``flags``."""
    known = {**GLOBAL_FLAGS, **VERB_FLAGS.get(verb or "", {})}
    shorts = {"-n": "--namespace", "-o": "--output", "-p": "--patch", **SHORT_BY_VERB.get(verb or "", {})}
    if token.startswith("--"):
        name, eq, value = token.partition("=")
    else:
        name, value = token[:2], token[2:].removeprefix("=")
        eq = "=" if token[2:] else ""
        if name not in shorts:
            raise unknown_flag(token, verb)
        name = shorts[name]
    kind = known.get(name)
    if kind is None or (verb is None and name not in GLOBAL_FLAGS):
        raise unknown_flag(token, verb)
    if kind == "bool":
        if eq and value not in ("true", "false"):
            raise Exit(
                1,
                f'error: invalid argument "{value}" for "{name}" flag: strconv.ParseBool: parsing '
                f'"{value}": invalid syntax\n',
            )
        flags[name] = not eq or value == "true"
        return
    if not eq:
        if not tokens:
            raise Exit(1, f"error: flag needs an argument: {token}\nSee 'kubectl {verb} --help' for usage.\n")
        value = tokens.pop(0)
    if kind == "multi":
        flags.setdefault(name, []).append(value)
    else:
        flags[name] = value


def parse(args: list[str]) -> Call:
    tokens = list(args)
    verb: str | None = None
    positionals: list[str] = []
    flags: dict = {}
    while tokens:
        token = tokens.pop(0)
        if token == "--":
            positionals += tokens
            break
        if token.startswith("-") and token != "-":
            take_flag(token, verb, tokens, flags)
        elif verb is None:
            if token not in VERB_FLAGS:
                raise Exit(
                    1,
                    f'error: unknown command "{token}" for "kubectl"\n'
                    f"(fake cloud: `kubectl {token}` is not a command of the GKE contract)\n",
                )
            verb = token
        else:
            positionals.append(token)
    if verb is None:
        raise Exit(1, "error: fake cloud: kubectl needs a command of the GKE contract\n")
    return Call(verb, positionals, flags)


def dispatch(store: Store, args: list[str]) -> int:
    call = parse(args)
    handler = {
        "apply": cmd_apply,
        "get": cmd_get,
        "patch": cmd_patch,
        "delete": cmd_delete,
        "logs": cmd_logs,
        "create": cmd_create,
    }[call.verb]
    return handler(store, call) or 0


# ---- contexts and objects ---------------------------------------------------------------------------------------


def context_of(state: dict, call: Call) -> str:
    context = call.flags.get("--context") or state["current_context"]
    if not context:
        raise Exit(
            1, "The connection to the server localhost:8080 was refused - did you specify the right host or port?\n"
        )
    if context not in state["contexts"]:
        raise Exit(1, f'error: context "{context}" does not exist\n')
    call.context_namespace = state.get("context_namespaces", {}).get(context) or "default"
    if shutil.which(common.AUTH_PLUGIN) is None:  # a GKE context's credentials come from the plugin
        raise Exit(
            1,
            f"getting credentials: exec: executable {common.AUTH_PLUGIN} not found\n\n"
            "It looks like you are trying to use a client-go credential plugin that is not installed.\n\n"
            f"Install {common.AUTH_PLUGIN} for use with kubectl by following "
            "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin\n"
            f"Unable to connect to the server: getting credentials: exec: executable {common.AUTH_PLUGIN} not found\n",
        )
    return context


def cluster_of(state: dict, context: str) -> dict:
    return state["clusters"][state["contexts"][context]]


def ray_available(state: dict, context: str) -> bool:
    return bool(cluster_of(state, context).get("addonsConfig", {}).get("rayOperatorConfig", {}).get("enabled"))


def kind_of(state: dict, context: str, resource: str) -> str:
    kind = TYPE_ALIASES.get(resource.lower())
    if kind is None or (kind == "RayJob" and not ray_available(state, context)):
        raise Exit(1, f'error: the server doesn\'t have a resource type "{resource}"\n')
    return kind


def target(call: Call, state: dict, context: str) -> tuple[str, list[str]]:
    """(kind, names) from ``TYPE NAME...`` or ``TYPE/NAME``."""
    if not call.positionals:
        raise Exit(
            1,
            'error: you must specify the type of resource to get. Use "kubectl api-resources" for a complete list '
            "of supported resources.\n",
        )
    first = call.positionals[0]
    if "/" in first:
        resource, _, name = first.partition("/")
        return kind_of(state, context, resource), [name, *call.positionals[1:]]
    return kind_of(state, context, first), call.positionals[1:]


def objects_of(state: dict, context: str) -> dict:
    return state["objects"].setdefault(context, {})


def key_of(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def not_found(kind: str, name: str) -> Exit:
    return Exit(1, f'Error from server (NotFound): {KINDS[kind][1]} "{name}" not found\n')


# ---- apply ----------------------------------------------------------------------------------------------------


def read_documents(path: str) -> list[dict]:
    import yaml

    if path == "-":
        text = sys.stdin.read()
    else:
        if not Path(path).exists():
            raise Exit(1, f'error: the path "{path}" does not exist\n')
        text = Path(path).read_text()
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise Exit(1, f"error: error parsing {path}: error converting YAML to JSON: yaml: {line}{problem}\n") from None
    for document in documents:
        if not isinstance(document, dict):
            raise Exit(1, f"error: error parsing {path}: json: cannot unmarshal into Go value of type map\n")
    return documents


def cmd_apply(store: Store, call: Call) -> int:
    files = call.flags.get("--filename")
    if not files or call.positionals:
        raise Exit(
            1,
            "error: must specify one of -f and -k\n" if not files else f"error: Unexpected args: {call.positionals}\n",
        )
    failed = False
    for path in files:
        for document in read_documents(path):
            try:
                with store.transaction() as state:
                    context = context_of(state, call)
                    sys.stdout.write(apply_one(store, state, context, call, path, document) + "\n")
            except Exit as problem:
                if problem.code != 1 or problem.stderr.startswith(("error: context", "The connection")):
                    raise
                sys.stderr.write(problem.stderr)
                failed = True
    return 1 if failed else 0


def apply_one(store: Store, state: dict, context: str, call: Call, path: str, document: dict) -> str:
    missing = [f"{field} not set" for field in ("apiVersion", "kind") if not document.get(field)]
    if missing:
        raise Exit(
            1,
            f'error: error validating "{path}": error validating data: [{", ".join(missing)}]; if you '
            "choose to ignore these errors, turn validation off with --validate=false\n",
        )
    kind, version = document["kind"], document["apiVersion"]
    metadata = document.get("metadata") or {}
    name = metadata.get("name", "")
    if kind not in KINDS or KINDS[kind][0] != version or (kind == "RayJob" and not ray_available(state, context)):
        raise Exit(
            1,
            f'error: resource mapping not found for name: "{name}" namespace: "{metadata.get("namespace", "")}" '
            f'from "{path}": no matches for kind "{kind}" in version "{version}"\n'
            "ensure CRDs are installed first\n",
        )
    if not name:
        raise Exit(
            1,
            f'error: error when retrieving current configuration of:\nResource: "{KINDS[kind][1]}", '
            f'GroupVersionKind: "{version}, Kind={kind}"\nName: "", Namespace: "default"\nfrom server for: '
            f'"{path}": resource name may not be empty\n',
        )
    given = call.flags.get("--namespace")
    if metadata.get("namespace") and given and given != metadata["namespace"]:
        raise Exit(
            1,
            f'error: the namespace from the provided object "{metadata["namespace"]}" does not match the namespace '
            f"\"{given}\". You must pass '--namespace={metadata['namespace']}' to perform this operation.\n",
        )
    namespace = metadata.get("namespace") or call.namespace
    if namespace not in NAMESPACES:
        raise Exit(
            1, f'Error from server (NotFound): error when creating "{path}": namespaces "{namespace}" not found\n'
        )
    for field in ("labels", "annotations"):
        for value in (metadata.get(field) or {}).values() if isinstance(metadata.get(field), dict) else ():
            if not isinstance(value, str):
                go_kind = GO_KINDS.get(type_name(value), "object")
                raise Exit(
                    1,
                    f'error: unable to decode "{path}": json: cannot unmarshal {go_kind} into Go struct field '
                    f"ObjectMeta.metadata.{field} of type string\n",
                )
    problems = validate_object(kind, document)
    if problems:
        raise invalid(kind, name, problems, f'error when creating "{path}": ')
    objects = objects_of(state, context)
    key = key_of(kind, namespace, name)
    manifest = redact(kind, document)
    singular = KINDS[kind][2]
    record = objects.get(key)
    if record is None:
        objects[key] = new_record(store, state, kind, namespace, manifest)
        reconcile(store, state, context, key)
        return f"{singular}/{name} created"
    if record["applied"] == manifest:
        return f"{singular}/{name} unchanged"
    update_record(store, state, record, manifest)
    reconcile(store, state, context, key)
    return f"{singular}/{name} configured"


def invalid(kind: str, name: str, problems: list[str], where: str = "") -> Exit:
    group = ".ray.io" if kind == "RayJob" else ""
    body = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    prefix = f"Error from server (Invalid): {where}" if where else ""
    return Exit(1, f'{prefix}{kind}{group} "{name}" is invalid: {body}\n')


def redact(kind: str, document: dict) -> dict:
    """The manifest as stored: a Secret's values are replaced by their digests."""
    manifest = json.loads(json.dumps(document))
    if kind == "Secret":
        for field in ("data", "stringData"):
            if isinstance(manifest.get(field), dict):
                manifest[field] = {
                    k: {"sha256": hashlib.sha256(str(v).encode()).hexdigest()} for k, v in manifest[field].items()
                }
    return manifest


def new_record(store: Store, state: dict, kind: str, namespace: str, manifest: dict) -> dict:
    number = store.next_number(state)
    obj = json.loads(json.dumps(manifest))
    metadata = obj.setdefault("metadata", {})
    metadata["namespace"] = namespace
    metadata["uid"] = str(uuid.uuid4())
    metadata["creationTimestamp"] = common.now_iso(kube=True)
    metadata["resourceVersion"] = str(number)
    metadata.setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = (
        json.dumps(manifest, sort_keys=True, separators=(",", ":")) + "\n"
    )
    record = {"kind": kind, "object": obj, "applied": manifest, "created": time.time()}
    if kind == "RayJob":
        metadata["generation"] = 1
        spec = obj.setdefault("spec", {})
        spec.setdefault("submissionMode", "K8sJobMode")
        spec.setdefault("backoffLimit", 0)
        spec.setdefault("ttlSecondsAfterFinished", 0)
        record["job"] = {"phase": "", "jobStatus": "", "failed": 0, "succeeded": 0, "run": None}
    return record


def update_record(store: Store, state: dict, record: dict, manifest: dict) -> None:
    obj = record["object"]
    server = {k: obj["metadata"].get(k) for k in ("uid", "creationTimestamp", "namespace", "generation")}
    old_spec = obj.get("spec")
    fresh = json.loads(json.dumps(manifest))
    if record["kind"] == "RayJob":
        spec = fresh.setdefault("spec", {})
        for field, default in (("submissionMode", "K8sJobMode"), ("backoffLimit", 0), ("ttlSecondsAfterFinished", 0)):
            spec.setdefault(field, old_spec.get(field, default) if isinstance(old_spec, dict) else default)
    fresh["metadata"].update({k: v for k, v in server.items() if v is not None})
    if record["kind"] == "RayJob" and fresh.get("spec") != old_spec:
        fresh["metadata"]["generation"] = (server["generation"] or 1) + 1
        record["spec_changed"] = time.time()
    fresh["metadata"]["resourceVersion"] = str(store.next_number(state))
    fresh["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = (
        json.dumps(manifest, sort_keys=True, separators=(",", ":")) + "\n"
    )
    record["object"] = fresh
    record["applied"] = manifest


# ---- validation (what the API server refuses) -------------------------------------------------------------------


def type_name(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}[type(value)]


def expect(problems: list[str], where: str, value, wanted: str) -> bool:
    if value is None:
        return False
    if type_name(value) != wanted and not (wanted == "number" and type_name(value) == "integer"):
        problems.append(
            f'{where}: Invalid value: "{type_name(value)}": {where} in body must be of type {wanted}: '
            f'"{type_name(value)}"'
        )
        return False
    return True


def check_string_map(problems: list[str], where: str, value) -> None:
    if expect(problems, where, value, "object"):
        for key, item in value.items():
            expect(problems, f"{where}.{key}", item, "string")


def check_metadata(problems: list[str], kind: str, metadata) -> None:
    if not expect(problems, "metadata", metadata, "object"):
        return
    name = metadata.get("name")
    if isinstance(name, str) and not DNS1123_SUBDOMAIN.match(name) or isinstance(name, str) and len(name) > 253:
        problems.append(
            f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
            "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    check_string_map(problems, "metadata.annotations", metadata.get("annotations"))
    labels = metadata.get("labels")
    check_string_map(problems, "metadata.labels", labels)
    for key, value in (labels or {}).items() if isinstance(labels, dict) else ():
        label_name = key.rsplit("/", 1)[-1]
        if not LABEL_NAME.match(label_name) or len(label_name) > 63:
            problems.append(
                f'metadata.labels: Invalid value: "{key}": name part must consist of alphanumeric '
                "characters, '-', '_' or '.', and must start and end with an alphanumeric character"
            )
        if isinstance(value, str) and (not LABEL_VALUE.match(value) or len(value) > 63):
            problems.append(
                f'metadata.labels: Invalid value: "{value}": a valid label must be an empty string or '
                "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            )


RAYJOB_SPEC_FIELDS = {
    "activeDeadlineSeconds": "integer",
    "backoffLimit": "integer",
    "rayClusterSpec": "object",
    "submitterPodTemplate": "object",
    "metadata": "object",
    "clusterSelector": "object",
    "submitterConfig": "object",
    "managedBy": "string",
    "deletionStrategy": "object",
    "entrypoint": "string",
    "runtimeEnvYAML": "string",
    "jobId": "string",
    "submissionMode": "string",
    "entrypointResources": "string",
    "entrypointNumCpus": "number",
    "entrypointNumGpus": "number",
    "ttlSecondsAfterFinished": "integer",
    "shutdownAfterJobFinishes": "boolean",
    "suspend": "boolean",
}
CLUSTER_SPEC_FIELDS = {
    "headGroupSpec": "object",
    "workerGroupSpecs": "array",
    "rayVersion": "string",
    "enableInTreeAutoscaling": "boolean",
    "autoscalerOptions": "object",
    "headServiceAnnotations": "object",
    "suspend": "boolean",
    "managedBy": "string",
    "gcsFaultToleranceOptions": "object",
    "authOptions": "object",
    "upgradeStrategy": "object",
}
GROUP_FIELDS = {
    "template": "object",
    "rayStartParams": "object",
    "serviceType": "string",
    "headService": "object",
    "enableIngress": "boolean",
    "resources": "object",
    "labels": "object",
    "groupName": "string",
    "replicas": "integer",
    "minReplicas": "integer",
    "maxReplicas": "integer",
    "idleTimeoutSeconds": "integer",
    "scaleStrategy": "object",
    "numOfHosts": "integer",
}


def check_fields(problems: list[str], unknown: list[str], where: str, value: dict, fields: dict) -> None:
    for key, item in value.items():
        if key not in fields:
            unknown.append(f"{where}.{key}")
        else:
            expect(problems, f"{where}.{key}", item, fields[key])


def check_pod_template(problems: list[str], where: str, template) -> None:
    if not expect(problems, where, template, "object"):
        return
    metadata = template.get("metadata") or {}
    check_string_map(problems, f"{where}.metadata.labels", metadata.get("labels"))
    check_string_map(problems, f"{where}.metadata.annotations", metadata.get("annotations"))
    spec = template.get("spec")
    if not expect(problems, f"{where}.spec", spec, "object"):
        problems.append(f"{where}.spec: Required value")
        return
    containers = spec.get("containers")
    if not expect(problems, f"{where}.spec.containers", containers, "array"):
        return
    for index, container in enumerate(containers):
        place = f"{where}.spec.containers[{index}]"
        if not expect(problems, place, container, "object"):
            continue
        for field in ("name", "image"):
            if not isinstance(container.get(field), str) or not container.get(field):
                problems.append(f"{place}.{field}: Required value")
        for number, entry in enumerate(container.get("env") or []):
            if isinstance(entry, dict):
                expect(problems, f"{place}.env[{number}].name", entry.get("name"), "string")
                expect(problems, f"{place}.env[{number}].value", entry.get("value"), "string")


def check_group(problems: list[str], unknown: list[str], where: str, group) -> None:
    if not expect(problems, where, group, "object"):
        return
    check_fields(problems, unknown, where, group, GROUP_FIELDS)
    check_string_map(problems, f"{where}.rayStartParams", group.get("rayStartParams"))
    check_pod_template(problems, f"{where}.template", group.get("template"))


def validate_rayjob_schema(problems: list[str], unknown: list[str], spec) -> None:
    if not expect(problems, "spec", spec, "object"):
        return
    check_fields(problems, unknown, "spec", spec, RAYJOB_SPEC_FIELDS)
    mode = spec.get("submissionMode")
    if mode is not None and mode not in ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"):
        problems.append(
            f'spec.submissionMode: Unsupported value: "{mode}": supported values: "K8sJobMode", '
            '"HTTPMode", "InteractiveMode", "SidecarMode"'
        )
    cluster = spec.get("rayClusterSpec")
    if isinstance(cluster, dict):
        check_fields(problems, unknown, "spec.rayClusterSpec", cluster, CLUSTER_SPEC_FIELDS)
        check_group(problems, unknown, "spec.rayClusterSpec.headGroupSpec", cluster.get("headGroupSpec"))
        for index, group in enumerate(cluster.get("workerGroupSpecs") or []):
            check_group(problems, unknown, f"spec.rayClusterSpec.workerGroupSpecs[{index}]", group)


def validate_object(kind: str, document: dict) -> list[str]:
    problems: list[str] = []
    unknown: list[str] = []
    check_metadata(problems, kind, document.get("metadata"))
    if kind == "RayJob":
        validate_rayjob_schema(problems, unknown, document.get("spec"))
    elif kind in ("Secret", "ConfigMap"):
        for field in ("data", "stringData"):
            if isinstance(document.get(field), dict):
                for key in document[field]:
                    if not SECRET_KEY.match(str(key)):
                        problems.append(
                            f'{field}[{key}]: Invalid value: "{key}": a valid config key must consist of '
                            "alphanumeric characters, '-', '_' or '.'"
                        )
    if unknown and not problems:
        name = (document.get("metadata") or {}).get("name", "")
        raise Exit(
            1,
            f'Error from server (BadRequest): {kind} in version "v1" cannot be handled as a {kind}: strict '
            f'decoding error: unknown field "{unknown[0]}" (object {name!r})\n',
        )
    return problems


def kuberay_validation(obj: dict) -> str:
    """What KubeRay's controller refuses (the RayJob then reads ValidationFailed, with this message)."""
    name = obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    if len(name) > 47:
        return "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"
    if not DNS1035_LABEL.match(name):
        return f"The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: [{name!r}]"
    if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
        return (
            "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be "
            "suspended"
        )
    if not spec.get("rayClusterSpec") and not spec.get("clusterSelector"):
        return "The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set"
    head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template", {}).get("spec", {})
    if spec.get("rayClusterSpec") and not head.get("containers"):
        return "The RayJob spec is invalid: headGroupSpec should have at least one container"
    if (spec.get("backoffLimit") or 0) < 0:
        return "The RayJob spec is invalid: backoffLimit must be a positive integer"
    if spec.get("activeDeadlineSeconds") is not None and spec["activeDeadlineSeconds"] <= 0:
        return "The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer"
    try:
        runtime_env(obj)
    except ValueError as error:
        return f"failed to unmarshal RuntimeEnvYAML: {error}"
    return ""


# ---- the fake KubeRay operator ----------------------------------------------------------------------------------


def templates_of(obj: dict) -> list[tuple[str, dict]]:
    """(name, pod template) of the head and of each worker group that asks for pods."""
    cluster = (obj.get("spec") or {}).get("rayClusterSpec") or {}
    found = [("head", (cluster.get("headGroupSpec") or {}).get("template") or {})]
    for group in cluster.get("workerGroupSpecs") or []:
        if (group.get("replicas") or 0) > 0 or (group.get("minReplicas") or 0) > 0:
            found.append((f"worker group {group.get('groupName', '')}", group.get("template") or {}))
    return found


def gcsfuse_volumes(pod: dict) -> dict[str, dict]:
    return {
        v["name"]: v["csi"]
        for v in pod.get("volumes") or []
        if isinstance(v, dict) and (v.get("csi") or {}).get("driver") == GCSFUSE_DRIVER
    }


def pod_problems(store: Store, state: dict, context: str, namespace: str, obj: dict) -> list[str]:
    """Why the pods of a RayJob would not start on this cluster (empty: they would)."""
    problems = []
    for where, template in templates_of(obj):
        pod = template.get("spec") or {}
        problems += [f"{where}: {p}" for p in volume_problems(store, state, context, namespace, template, pod)]
        problems += [f"{where}: {p}" for p in image_problems(state, pod)]
        problems += [f"{where}: {p}" for p in scheduling_problems(state, context, template, pod)]
    return problems


def volume_problems(store: Store, state: dict, context: str, namespace: str, template: dict, pod: dict) -> list[str]:
    objects = objects_of(state, context)
    account = pod.get("serviceAccountName") or "default"
    problems = []
    if account != "default" and key_of("ServiceAccount", namespace, account) not in objects:
        problems.append(f'error looking up service account {namespace}/{account}: serviceaccount "{account}" not found')
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
    for container in pod.get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") not in volumes:
                problems.append(f'spec.containers.volumeMounts.name: Not found: "{mount.get("name")}"')
    for volume in volumes.values():
        secret = (volume.get("secret") or {}).get("secretName")
        if secret and key_of("Secret", namespace, secret) not in objects:
            problems.append(f'MountVolume.SetUp failed for volume "{volume["name"]}" : secret "{secret}" not found')
        config_map = (volume.get("configMap") or {}).get("name")
        if config_map and key_of("ConfigMap", namespace, config_map) not in objects:
            problems.append(
                f'MountVolume.SetUp failed for volume "{volume["name"]}" : configmap "{config_map}" not found'
            )
    for name, csi in gcsfuse_volumes(pod).items():
        problems += gcsfuse_problems(store, state, context, namespace, template, account, name, csi)
    return problems


def gcsfuse_problems(
    store: Store, state: dict, context: str, namespace: str, template: dict, account: str, name: str, csi: dict
) -> list[str]:
    cluster = cluster_of(state, context)
    failed = f'MountVolume.SetUp failed for volume "{name}" : '
    if not cluster.get("addonsConfig", {}).get("gcsFuseCsiDriverConfig", {}).get("enabled"):
        return [
            failed + f"kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name {GCSFUSE_DRIVER} "
            "not found in the list of registered CSI drivers"
        ]
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if annotations.get("gke-gcsfuse/volumes") != "true":
        return [
            failed + "rpc error: code = FailedPrecondition desc = failed to find the sidecar container in Pod "
            'spec (the pod template needs the annotation gke-gcsfuse/volumes: "true")'
        ]
    bucket = (csi.get("volumeAttributes") or {}).get("bucketName", "")
    pool = (cluster.get("workloadIdentityConfig") or {}).get("workloadPool")
    sa = objects_of(state, context).get(key_of("ServiceAccount", namespace, account))
    gsa = (((sa or {}).get("object") or {}).get("metadata", {}).get("annotations") or {}).get(
        "iam.gke.io/gcp-service-account"
    )
    member = f"serviceAccount:{pool}[{namespace}/{account}]"
    bindings = state["iam"].get(gsa or "", {}).get("bindings", [])
    bound = any(b["role"] == "roles/iam.workloadIdentityUser" and member in b["members"] for b in bindings)
    if not pool or not gsa or not bound:
        why = (
            "the cluster has no workload pool"
            if not pool
            else f"service account {namespace}/{account} has no iam.gke.io/gcp-service-account annotation"
            if not gsa
            else f"{member} is not bound to {gsa} with roles/iam.workloadIdentityUser"
        )
        return [
            failed + f'rpc error: code = PermissionDenied desc = failed to get GCS bucket "{bucket}": '
            f"googleapi: Error 403: Caller does not have storage.objects.list access ({why})"
        ]
    if not bucket or not store.bucket_dir(bucket).is_dir():
        return [
            failed + f'rpc error: code = NotFound desc = failed to get GCS bucket "{bucket}": googleapi: '
            "Error 404: The specified bucket does not exist., notFound"
        ]
    return []


def image_problems(state: dict, pod: dict) -> list[str]:
    problems = []
    for container in pod.get("containers") or []:
        image = container.get("image", "")
        tagged = image if ":" in image.rsplit("/", 1)[-1] or "@" in image else image + ":latest"
        if IMAGE_RE.match(image) and tagged not in state["images"]:
            problems.append(
                f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and '
                f'unpack image "{image}": not found (ErrImagePull)'
            )
    return problems


def quantity(value, memory: bool) -> float:
    """A Kubernetes quantity: CPUs (``"500m"`` -> 0.5) or bytes (``"4Gi"``)."""
    text = str(value).strip()
    suffixes = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
    for suffix in sorted(suffixes, key=len, reverse=True):
        if text.endswith(suffix) and (memory or suffix == "m"):
            return float(text[: -len(suffix)]) * suffixes[suffix]
    return float(text)


def pod_requests(pod: dict, template: dict) -> tuple[float, float, int]:
    """(CPUs, bytes, GPUs) a pod asks for: its containers' requests (limits where there are none), plus the GCS
    FUSE sidecar GKE adds (250m CPU, 256Mi by default)."""
    cpus = memory = 0.0
    gpus = 0
    for container in pod.get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        cpus += quantity(wanted.get("cpu", 0), memory=False)
        memory += quantity(wanted.get("memory", 0), memory=True)
        gpus += int(quantity((resources.get("limits") or {}).get("nvidia.com/gpu", 0), memory=False))
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if gcsfuse_volumes(pod) and annotations.get("gke-gcsfuse/volumes") == "true":
        cpus += 0.25
        memory += 256 * 2**20
    return cpus, memory, gpus


def scheduling_problems(state: dict, context: str, template: dict, pod: dict) -> list[str]:
    """Whether the pod fits a node of some pool: GPU pods on a pool with the accelerator (and only those: GKE
    taints GPU nodes), within the node's allocatable CPU and memory (GKE's reservations; the other system pods,
    which also take some, are not counted)."""
    pools = cluster_of(state, context).get("nodePools", [])
    nodes = sum(p.get("initialNodeCount", 0) for p in pools) or len(pools)
    cpus, memory, gpus = pod_requests(pod, template)
    wanted_type = (pod.get("nodeSelector") or {}).get("cloud.google.com/gke-accelerator")
    candidates = []
    for pool in pools:
        accelerators = pool.get("config", {}).get("accelerators") or []
        if gpus or wanted_type:
            if not any(
                int(a["acceleratorCount"]) >= gpus and wanted_type in (None, a["acceleratorType"]) for a in accelerators
            ):
                continue
        elif accelerators:
            continue
        candidates.append(pool)
    if not candidates:
        what = (
            "Insufficient nvidia.com/gpu"
            if gpus or wanted_type
            else "node(s) had untolerated taint {nvidia.com/gpu: present}"
        )
        return [f"0/{nodes} nodes are available: {nodes} {what}. (FailedScheduling)"]
    short = set()
    for pool in candidates:
        size = machine_allocatable(pool.get("config", {}).get("machineType", ""))
        if size is None or (cpus <= size[0] and memory <= size[1]):
            return []
        short |= {name for name, need, have in (("cpu", cpus, size[0]), ("memory", memory, size[1])) if need > have}
    detail = ", ".join(f"{nodes} Insufficient {name}" for name in sorted(short))
    return [f"0/{nodes} nodes are available: {detail}. (FailedScheduling)"]


SHARED_CORE = {
    "e2-micro": (1, 1.0),
    "e2-small": (1, 2.0),
    "e2-medium": (1, 4.0),
    "f1-micro": (1, 0.6),
    "g1-small": (1, 1.7),
}
GPU_MACHINES = {"a2-highgpu": (12, 85), "a2-ultragpu": (12, 170), "a2-megagpu": (6, 85), "a3-highgpu": (26, 234)}


def machine_size(machine: str) -> tuple[float, float] | None:
    """(vCPUs, GiB) of a Compute Engine machine type; None when the fake does not know it."""
    if machine in SHARED_CORE:
        return SHARED_CORE[machine]
    custom = re.fullmatch(r"(?:[a-z0-9]+-)?custom-(\d+)-(\d+)(?:-ext)?", machine)
    if custom:
        return float(custom.group(1)), int(custom.group(2)) / 1024
    gpu = re.fullmatch(r"([a-z0-9]+-[a-z]+gpu)-(\d+)g", machine)
    if gpu and gpu.group(1) in GPU_MACHINES:
        per_cpu, per_memory = GPU_MACHINES[gpu.group(1)]
        return float(per_cpu * int(gpu.group(2))), float(per_memory * int(gpu.group(2)))
    sized = re.fullmatch(r"([a-z0-9]+)-(standard|highmem|highcpu)-(\d+)", machine)
    if not sized:
        return None
    family, kind, count = sized.group(1), sized.group(2), int(sized.group(3))
    per_cpu = {"standard": 3.75 if family in ("n1", "c4") else 4.0, "highmem": 6.5 if family == "n1" else 8.0}
    return float(count), count * per_cpu.get(kind, 0.9 if family == "n1" else 1.0)


def machine_allocatable(machine: str) -> tuple[float, float] | None:
    """(CPUs, bytes) GKE leaves to pods on a node of ``machine``: what it reserves for the system and the
    eviction threshold taken away."""
    size = machine_size(machine)
    if size is None:
        return None
    cpus, gib = size
    reserved_cpu = 0.06 * min(cpus, 1) + 0.01 * min(max(cpus - 1, 0), 1) + 0.005 * min(max(cpus - 2, 0), 2)
    reserved_cpu += 0.0025 * max(cpus - 4, 0)
    tiers = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02))
    left, reserved_gib = gib, 0.0
    for width, share in tiers:
        part = min(left, width)
        reserved_gib += part * share
        left -= part
    return cpus - reserved_cpu, (gib - reserved_gib) * 2**30 - 100 * 2**20


def mounts_of(store: Store, obj: dict) -> list[tuple[str, Path]]:
    """(mount path, local folder) of each GCS FUSE volume mounted in the head container, longest first."""
    head = templates_of(obj)[0][1].get("spec") or {}
    volumes = gcsfuse_volumes(head)
    found = []
    for container in (head.get("containers") or [])[:1]:
        for mount in container.get("volumeMounts") or []:
            csi = volumes.get(mount.get("name"))
            if not csi:
                continue
            attributes = csi.get("volumeAttributes") or {}
            local = store.bucket_dir(attributes.get("bucketName", ""))
            only_dir = re.search(r"(?:^|,)only-dir=([^,]+)", str(attributes.get("mountOptions", "")))
            if only_dir:
                local = local / only_dir.group(1).strip("/")
            if mount.get("subPath"):
                local = local / mount["subPath"]
            found.append((mount["mountPath"].rstrip("/") or "/", local))
    return sorted(found, key=lambda item: -len(item[0]))


def rewrite(text: str, mounts: list[tuple[str, Path]]) -> str:
    for mount_path, local in mounts:
        pattern = r"(?<![\w.-])" + re.escape(mount_path) + r"(?=/|$|[^\w.-])"
        text = re.sub(pattern, lambda _m, local=local: str(local), text)
    return text


def command_of(store: Store, obj: dict) -> tuple[list[str], dict]:
    """The local command line and the environment entries of a RayJob's entrypoint."""
    mounts = mounts_of(store, obj)
    argv = [
        sys.executable if token in ("python", "python3") else rewrite(token, mounts)
        for token in shlex.split((obj.get("spec") or {}).get("entrypoint") or "")
    ]
    head = templates_of(obj)[0][1].get("spec") or {}
    env = {}
    for container in (head.get("containers") or [])[:1]:
        for entry in container.get("env") or []:
            if entry.get("name") and entry.get("name") != "XDG_DATA_HOME" and isinstance(entry.get("value"), str):
                env[entry["name"]] = rewrite(entry["value"], mounts)
    for name, value in runtime_env(obj).get("env_vars", {}).items():  # Ray sets these for the entrypoint
        if name != "XDG_DATA_HOME":
            env[str(name)] = rewrite(str(value), mounts)
    return argv, env


def runtime_env(obj: dict) -> dict:
    """``spec.runtimeEnvYAML`` as a dict ({} when absent; ValueError when it is no YAML mapping)."""
    import yaml

    text = (obj.get("spec") or {}).get("runtimeEnvYAML")
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(str(error)) from None
    if not isinstance(value, dict) or not isinstance(value.get("env_vars", {}), dict):
        raise ValueError("runtimeEnvYAML is not a mapping (with env_vars a mapping)")
    return value


def job_files(store: Store, context: str, record: dict) -> Path:
    metadata = record["object"]["metadata"]
    folder = store.job_dir(context, metadata["namespace"], metadata["name"])
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_run(store: Store, state: dict, context: str, record: dict) -> None:
    job = record["job"]
    obj = record["object"]
    folder = job_files(store, context, record)
    for stale in ("log", "exit_code", "started"):
        (folder / stale).unlink(missing_ok=True)
    workdir = folder / "workdir"
    workdir.mkdir(exist_ok=True)
    run_id = store.next_number(state)
    argv, env = command_of(store, obj)
    metadata = obj["metadata"]
    marker = f"{store.root}|{context}|{metadata['namespace']}|{metadata['name']}|{run_id}"
    with open(folder / "wrapper.err", "ab") as errors:
        process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "__run",
                str(store.root),
                context,
                metadata["namespace"],
                metadata["name"],
                str(run_id),
            ],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            cwd=workdir,
            env={**os.environ, common.ENV_JOB: marker},
        )
    starttime = common.proc_starttime(process.pid)
    job["run"] = {
        "id": run_id,
        "pid": process.pid,
        "starttime": starttime,
        "marker": marker,
        "argv": argv,
        "env": env,
        "cwd": str(workdir),
    }
    state["processes"].append({"pid": process.pid, "starttime": starttime, "marker": marker, "context": context})
    process.returncode = 0  # it is detached: not this process's to wait for


def stop_run(job: dict) -> None:
    run = job.get("run")
    if run:
        common.kill_group(run["pid"], run["starttime"], run["marker"])
    job["run"] = None


def new_ids(job: dict, name: str) -> None:
    suffix = uuid.uuid4().hex[:5]
    job["jobId"] = f"{name}-{uuid.uuid4().hex[:5]}"
    job["rayClusterName"] = f"{name}-{suffix}"


def reconcile(store: Store, state: dict, context: str, key: str) -> None:
    """One pass of the operator over a RayJob (the fake runs it whenever kubectl touches the object)."""
    record = objects_of(state, context).get(key)
    if record is None or record["kind"] != "RayJob":
        return
    job, obj = record["job"], record["object"]
    spec = obj.get("spec") or {}
    if job["phase"] == "ValidationFailed":
        return
    problem = kuberay_validation(obj)
    if problem:
        job.update(phase="ValidationFailed", reason="ValidationFailed", message=problem)
        return
    if time.time() - record["created"] < state["settings"].get("controller_delay", 0):
        return
    if time.time() - record.get("spec_changed", 0) < state["settings"].get("reconcile_delay", 0):
        return  # the operator has not acted on the last change of the spec yet: the status is as it was
    job["observedGeneration"] = obj["metadata"].get("generation", 1)
    obj["metadata"].setdefault("finalizers", ["ray.io/rayjob-finalizer"])
    if job["phase"] == "Suspended" and not spec.get("suspend"):
        job.update(phase="", jobStatus="")
    if job["phase"] == "":
        new_ids(job, obj["metadata"]["name"])
        job.update(phase="Initializing", startTime=common.now_iso(kube=True), endTime="", reason="", message="")
        job["startEpoch"] = time.time()
    if job["phase"] in ("Initializing", "Running"):
        advance(store, state, context, record)


def advance(store: Store, state: dict, context: str, record: dict) -> None:
    job, obj = record["job"], record["object"]
    spec = obj.get("spec") or {}
    if spec.get("suspend"):
        stop_run(job)
        job.update(phase="Suspended", jobStatus="", jobId="", rayClusterName="", message="", reason="", problems=[])
        job.pop("rayJobStartTime", None)
        return
    deadline = spec.get("activeDeadlineSeconds")
    if deadline and time.time() - job.get("startEpoch", time.time()) > deadline:
        stop_run(job)
        job.update(
            phase="Failed",
            reason="DeadlineExceeded",
            endTime=common.now_iso(kube=True),
            message=f"The RayJob has passed the activeDeadlineSeconds. ActiveDeadlineSeconds: {deadline}",
        )
        return
    run = job.get("run")
    if run is None:
        metadata = obj["metadata"]
        problems = pod_problems(store, state, context, metadata["namespace"], obj)
        job["problems"] = problems
        (job_files(store, context, record) / "events").write_text("".join(p + "\n" for p in problems))
        if not problems:
            start_run(store, state, context, record)
        return
    if not common.alive(run["pid"], run["starttime"]) and job["phase"] in ("Initializing", "Running"):
        job.update(
            phase="Failed",
            jobStatus="FAILED",
            reason="SubmissionFailed",
            endTime=common.now_iso(kube=True),
            message="Job submission has failed: the submitter pod was lost",
        )
        job["failed"] = job.get("failed", 0) + 1


def status_of(record: dict) -> dict | None:
    job = record["job"]
    if job["phase"] == "":
        return None
    name = job.get("rayClusterName", "")
    namespace = record["object"]["metadata"]["namespace"]
    running = job["phase"] == "Running"
    conditions = [
        {"type": "HeadPodReady", "status": "False", "reason": "ContainersNotReady", "message": problem}
        for problem in job.get("problems") or []
    ]
    status = {
        "jobDeploymentStatus": job["phase"],
        "jobStatus": job.get("jobStatus", ""),
        "jobId": job.get("jobId", ""),
        "rayClusterName": name,
        "dashboardURL": f"{name}-head-svc.{namespace}.svc.cluster.local:8265" if running else "",
        "startTime": job.get("startTime", ""),
        "endTime": job.get("endTime", ""),
        "reason": job.get("reason", ""),
        "message": job.get("message", ""),
        "observedGeneration": job.get("observedGeneration", record["object"]["metadata"].get("generation", 1)),
        "rayClusterStatus": {"state": "ready" if running else "", "conditions": conditions},
        "rayJobInfo": {"startTime": job.get("rayJobStartTime", ""), "endTime": job.get("rayJobEndTime", "")},
    }
    status = common.prune(status)
    if job["phase"] != "ValidationFailed":
        status["failed"] = job.get("failed", 0)
        status["succeeded"] = job.get("succeeded", 0)
    return status


def rendered(record: dict) -> dict:
    obj = json.loads(json.dumps(record["object"]))
    if record["kind"] == "RayJob":
        status = status_of(record)
        if status is not None:
            obj["status"] = status
    elif record["kind"] == "Secret":
        obj["type"] = obj.get("type", "Opaque")
        keys = list(obj.pop("data", {}) or {}) + list(obj.pop("stringData", {}) or {})
        obj["data"] = {k: base64.b64encode(PLACEHOLDER).decode() for k in keys}
    elif record["kind"] == "ServiceAccount":
        obj.setdefault("secrets", None)
        obj.pop("secrets")
    return obj


# ---- nodes ------------------------------------------------------------------------------------------------------

NODE_TYPES = ("no", "node", "nodes")
NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
UNKNOWN_MACHINE = (2.0, 8.0)  # (vCPUs, GiB) of a machine type ``machine_size`` does not know


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def node_names(cluster: dict, pool: dict) -> list[str]:
    """The names of a pool's nodes, as GKE names them: ``gke-<cluster>-<pool>-<8 hex>-<4 chars>`` (the 8 hex
    name the pool's instance group, the 4 characters each instance; cluster and pool names are cut to 20
    characters, as GKE shortens them). Derived from the cluster's id: stable while it exists, new when it is made
    again."""
    group = _digest(cluster.get("id", cluster["name"]), pool["name"])[:8]
    prefix = f"gke-{cluster['name'][:20].rstrip('-')}-{pool['name'][:20].rstrip('-')}-{group}-"
    names: list[str] = []
    salt = 0
    while len(names) < int(pool.get("initialNodeCount") or 0):
        number = int(_digest(cluster.get("id", cluster["name"]), pool["name"], str(len(names)), str(salt)), 16)
        suffix = ""
        for _ in range(4):
            number, digit = divmod(number, len(NAME_ALPHABET))
            suffix += NAME_ALPHABET[digit]
        if prefix + suffix in names:
            salt += 1
            continue
        names.append(prefix + suffix)
    return names


def node_zone(cluster: dict, index: int) -> str:
    """A zonal cluster's nodes are in its zone; a regional one's spread over the region's zones a, b and c."""
    location = cluster["location"]
    return location if re.fullmatch(r"[a-z]+-[a-z]+[0-9]+-[a-z]", location) else f"{location}-{'abc'[index % 3]}"


def cluster_nodes(project: str, cluster: dict) -> list[dict]:
    """The Node objects of a cluster (every node of every pool), as ``kubectl get nodes -o json`` lists them:
    sorted by name, with GKE's labels (pool, machine type, zone, Spot, GPU type), taints (GPU nodes), capacity
    and allocatable (GKE's reservations taken away: ``machine_allocatable``)."""
    nodes = []
    created = str(cluster.get("createTime", common.now_iso())).replace("+00:00", "Z")
    for pool_number, pool in enumerate(cluster.get("nodePools") or []):
        config = pool.get("config") or {}
        machine = str(config.get("machineType", "e2-medium"))
        cpus, gib = machine_size(machine) or UNKNOWN_MACHINE
        allocatable = machine_allocatable(machine) or (cpus * 0.94, gib * 0.8 * 2**30)
        disk_kib = int(config.get("diskSizeGb") or 100) * 2**20
        accelerators = config.get("accelerators") or []
        for index, name in enumerate(node_names(cluster, pool)):
            zone = node_zone(cluster, index)
            region = zone.rsplit("-", 1)[0]
            labels = {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": machine,
                "beta.kubernetes.io/os": "linux",
                "cloud.google.com/gke-boot-disk": str(config.get("diskType", "pd-balanced")),
                "cloud.google.com/gke-container-runtime": "containerd",
                "cloud.google.com/gke-nodepool": pool["name"],
                "cloud.google.com/gke-os-distribution": "cos",
                "cloud.google.com/gke-provisioning": "spot" if config.get("spot") else "standard",
                "cloud.google.com/machine-family": machine.split("-", 1)[0],
                "failure-domain.beta.kubernetes.io/region": region,
                "failure-domain.beta.kubernetes.io/zone": zone,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": machine,
                "topology.gke.io/zone": zone,
                "topology.kubernetes.io/region": region,
                "topology.kubernetes.io/zone": zone,
            }
            if config.get("spot"):
                labels["cloud.google.com/gke-spot"] = "true"
            capacity = {
                "cpu": f"{cpus:g}",
                "ephemeral-storage": f"{disk_kib}Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": f"{int(gib * 2**20)}Ki",
                "pods": "110",
            }
            usable = {
                "cpu": f"{int(allocatable[0] * 1000)}m",
                "ephemeral-storage": str(int(disk_kib * 1024 * 0.45)),
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": f"{int(allocatable[1] // 1024)}Ki",
                "pods": "110",
            }
            taints = []
            for accelerator in accelerators:
                labels["cloud.google.com/gke-accelerator"] = accelerator["acceleratorType"]
                driver = (accelerator.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion")
                if driver:
                    labels["cloud.google.com/gke-gpu-driver-version"] = str(driver).lower()
                capacity["nvidia.com/gpu"] = usable["nvidia.com/gpu"] = str(accelerator["acceleratorCount"])
                taints = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
            number = int(_digest(name)[:6], 16)
            internal = f"10.128.{pool_number}.{index + 2}"
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "annotations": {
                        "container.googleapis.com/instance_id": str(number),
                        "node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    },
                    "creationTimestamp": created,
                    "labels": dict(sorted(labels.items())),
                    "name": name,
                    "resourceVersion": str(1000 + number % 100000),
                    "uid": str(uuid.UUID(_digest(cluster.get("id", ""), name)[:32])),
                },
                "spec": {
                    "podCIDR": f"10.{4 + pool_number}.{index}.0/24",
                    "podCIDRs": [f"10.{4 + pool_number}.{index}.0/24"],
                    "providerID": f"gce://{project}/{zone}/{name}",
                    **({"taints": taints} if taints else {}),
                },
                "status": {
                    "addresses": [
                        {"address": internal, "type": "InternalIP"},
                        {"address": f"34.{number % 250}.{number // 250 % 250}.{index + 1}", "type": "ExternalIP"},
                        {"address": name, "type": "Hostname"},
                    ],
                    "allocatable": usable,
                    "capacity": capacity,
                    "conditions": [
                        {
                            "lastHeartbeatTime": common.now_iso(kube=True),
                            "lastTransitionTime": created,
                            "message": "kubelet is posting ready status",
                            "reason": "KubeletReady",
                            "status": "True",
                            "type": "Ready",
                        }
                    ],
                    "nodeInfo": {
                        "architecture": "amd64",
                        "containerRuntimeVersion": "containerd://1.7.27",
                        "kernelVersion": "6.6.97+",
                        "kubeProxyVersion": "",
                        "kubeletVersion": "v" + str(pool.get("version", "1.33.5-gke.1201000")),
                        "operatingSystem": "linux",
                        "osImage": "Container-Optimized OS from Google",
                    },
                },
            }
            nodes.append(node)
    return sorted(nodes, key=lambda node: node["metadata"]["name"])


def is_node_type(call: Call) -> bool:
    first = call.positionals[0] if call.positionals else ""
    return first.partition("/")[0].lower() in NODE_TYPES


def cmd_get_nodes(store: Store, call: Call) -> int:
    """``kubectl get nodes [NAME...]`` (or ``node/NAME``): the nodes of the context's cluster; nodes belong to
    no namespace."""
    first, *more = call.positionals
    names = ([first.partition("/")[2]] if "/" in first else []) + more
    with store.transaction() as state:
        context = context_of(state, call)
        key = state["contexts"][context]
        nodes = cluster_nodes(key.split("/")[0], cluster_of(state, context))
    by_name = {node["metadata"]["name"]: node for node in nodes}
    found = [by_name[name] for name in names if name in by_name] if names else nodes
    missing = [name for name in names if name not in by_name]
    output = call.flags.get("--output")
    if output == "json" or output == "yaml":
        value = (
            found[0]
            if names and len(found) == 1
            else {"apiVersion": "v1", "items": found, "kind": "List", "metadata": {"resourceVersion": ""}}
        )
        if found or not names:
            if output == "json":
                sys.stdout.write(json.dumps(value, indent=4) + "\n")
            else:
                import yaml

                sys.stdout.write(yaml.safe_dump(value, sort_keys=True))
    elif output == "name":
        sys.stdout.write("".join(f"node/{node['metadata']['name']}\n" for node in found))
    elif found:
        rows = [["NAME", "STATUS", "ROLES", "AGE", "VERSION"]]
        rows += [
            [n["metadata"]["name"], "Ready", "<none>", "1m", n["status"]["nodeInfo"]["kubeletVersion"]] for n in found
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        sys.stdout.write("".join("   ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() + "\n" for r in rows))
    elif not names:
        sys.stderr.write("No resources found\n")
    if missing and not call.flags.get("--ignore-not-found"):
        raise Exit(1, f'Error from server (NotFound): nodes "{missing[0]}" not found\n')
    return 0


# ---- get, patch, delete -----------------------------------------------------------------------------------------


def cmd_get(store: Store, call: Call) -> int:
    output = call.flags.get("--output")
    if output not in (None, "json", "yaml", "name", "wide"):
        raise Exit(1, f"error: fake cloud: -o {output} is not in the GKE contract (use -o json)\n")
    if is_node_type(call):
        return cmd_get_nodes(store, call)
    with store.transaction() as state:
        context = context_of(state, call)
        kind, names = target(call, state, context)
        objects = objects_of(state, context)
        if not names:
            keys = [k for k in sorted(objects) if k.startswith(f"{kind}/{call.namespace}/")]
        else:
            keys = [key_of(kind, call.namespace, name) for name in names]
        for key in keys:
            reconcile(store, state, context, key)
        found = [rendered(objects[k]) for k in keys if k in objects]
        missing = [k.rsplit("/", 1)[1] for k in keys if k not in objects]
    show(call, kind, found, listed=not names)
    if missing and not call.flags.get("--ignore-not-found"):
        raise not_found(kind, missing[0])
    return 0


def show(call: Call, kind: str, found: list[dict], listed: bool) -> None:
    output = call.flags.get("--output")
    value = (
        {"apiVersion": "v1", "items": found, "kind": "List", "metadata": {"resourceVersion": ""}}
        if listed or len(found) != 1
        else found[0]
    )
    if not found and not listed:
        return
    if output == "json":
        sys.stdout.write(json.dumps(value, indent=4) + "\n")
    elif output == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(value, sort_keys=True))
    elif output == "name":
        sys.stdout.write("".join(f"{KINDS[kind][2]}/{o['metadata']['name']}\n" for o in found))
    elif not found:
        sys.stderr.write(f"No resources found in {call.namespace} namespace.\n")
    else:
        sys.stdout.write(human_table(kind, found))


def human_table(kind: str, found: list[dict]) -> str:
    if kind == "RayJob":
        rows = [["NAME", "JOB STATUS", "DEPLOYMENT STATUS", "RAY CLUSTER NAME", "START TIME", "END TIME", "AGE"]]
        for o in found:
            s = o.get("status", {})
            rows.append(
                [
                    o["metadata"]["name"],
                    s.get("jobStatus", ""),
                    s.get("jobDeploymentStatus", ""),
                    s.get("rayClusterName", ""),
                    s.get("startTime", ""),
                    s.get("endTime", ""),
                    "1m",
                ]
            )
    else:
        rows = [["NAME", "AGE"]] + [[o["metadata"]["name"], "1m"] for o in found]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("   ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() + "\n" for r in rows)


def merge_patch(target_value, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target_value) if isinstance(target_value, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def parse_patch(text: str):
    import yaml

    try:
        patch = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise Exit(1, f'error: unable to parse "{text}": yaml: {getattr(error, "problem", error)}\n') from None
    if not isinstance(patch, dict):
        raise Exit(1, f'error: unable to parse "{text}": json: cannot unmarshal into Go value of type map\n')
    return patch


def cmd_patch(store: Store, call: Call) -> int:
    text = call.flags.get("--patch")
    if text is None:
        raise Exit(1, "error: must specify -p to patch\n")
    kind_type = call.flags.get("--type", "strategic")
    with store.transaction() as state:
        context = context_of(state, call)
        kind, names = target(call, state, context)
        if len(names) != 1:
            raise Exit(
                1,
                "error: patch requires exactly one resource name\n"
                if names
                else "error: resource(s) were provided, but no name was specified\n",
            )
        if kind_type not in ("merge", "strategic", "json"):
            raise Exit(1, f'error: --type must be one of [json merge strategic], not "{kind_type}"\n')
        if kind_type == "json":
            raise Exit(1, "error: fake cloud: --type=json patches are not in the GKE contract\n")
        if kind_type == "strategic" and kind == "RayJob":
            raise Exit(
                1,
                "Error from server (UnsupportedMediaType): the body of the request was in an unknown "
                "format - accepted media types include: application/json-patch+json, "
                "application/merge-patch+json, application/apply-patch+yaml\n",
            )
        patch = parse_patch(text)
        key = key_of(kind, call.namespace, names[0])
        record = objects_of(state, context).get(key)
        if record is None:
            raise not_found(kind, names[0])
        reconcile(store, state, context, key)
        patched = merge_patch(record["object"], {k: v for k, v in patch.items() if k != "status"})
        if (patched.get("metadata") or {}).get("name") != names[0]:
            raise Exit(
                1,
                f'The {kind} "{names[0]}" is invalid: metadata.name: Invalid value: the name of the object '
                "does not match the name on the URL\n",
            )
        problems = validate_object(kind, patched)
        if problems:
            body = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
            raise Exit(1, f'The {kind} "{names[0]}" is invalid: {body}\n')
        singular = KINDS[kind][2]
        if patched == record["object"]:
            sys.stdout.write(f"{singular}/{names[0]} patched (no change)\n")
            return 0
        if patched.get("spec") != record["object"].get("spec") and kind == "RayJob":
            patched["metadata"]["generation"] = patched["metadata"].get("generation", 1) + 1
            record["spec_changed"] = time.time()
        patched["metadata"]["resourceVersion"] = str(store.next_number(state))
        record["object"] = patched
        reconcile(store, state, context, key)
    sys.stdout.write(f"{singular}/{names[0]} patched\n")
    return 0


def cmd_delete(store: Store, call: Call) -> int:
    with store.transaction() as state:
        context = context_of(state, call)
        kind, names = target(call, state, context)
        if not names:
            raise Exit(1, "error: resource(s) were provided, but no name was specified\n")
        objects = objects_of(state, context)
        missing = []
        for name in names:
            record = objects.pop(key_of(kind, call.namespace, name), None)
            if record is None:
                missing.append(name)
                continue
            if kind == "RayJob":
                stop_run(record["job"])
            sys.stdout.write(f'{KINDS[kind][2]} "{name}" deleted\n')
    if missing and not call.flags.get("--ignore-not-found"):
        raise not_found(kind, missing[0])
    return 0


# ---- create secret --------------------------------------------------------------------------------------------


def secret_entries(call: Call) -> dict:
    entries = {}
    for item in call.flags.get("--from-file", []):
        key, eq, path = item.partition("=")
        if not eq:
            key, path = Path(item).name, item
        if not SECRET_KEY.match(key):
            raise Exit(
                1,
                f'error: "{key}" is not a valid key name for a Secret: a valid config key must consist of '
                "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
                "regex used for validation is '[-._a-zA-Z0-9]+')\n",
            )
        source = Path(path)
        if not source.is_file():
            raise Exit(1, f"error: error reading {path}: no such file or directory\n")
        if key in entries:
            raise Exit(
                1, f'error: cannot add key "{key}", another key by that name already exists in Data for Secret\n'
            )
        entries[key] = {
            "path": str(source.resolve()),
            "sha256": common.sha256_of(source),
            "size": source.stat().st_size,
        }
    for item in call.flags.get("--from-literal", []):
        key, eq, value = item.partition("=")
        if not eq or not SECRET_KEY.match(key):
            raise Exit(1, f"error: invalid literal source {item}, expected key=value\n")
        entries[key] = {"sha256": hashlib.sha256(value.encode()).hexdigest(), "size": len(value)}
    return entries


def cmd_create(store: Store, call: Call) -> int:
    if call.positionals[:2] != ["secret", "generic"] or len(call.positionals) != 3:
        raise Exit(
            1,
            "error: fake cloud: only `kubectl create secret generic NAME --from-file=KEY=PATH` is in the "
            "GKE contract\n",
        )
    name = call.positionals[2]
    entries = secret_entries(call)
    with store.transaction() as state:
        context = context_of(state, call)
        objects = objects_of(state, context)
        key = key_of("Secret", call.namespace, name)
        if key in objects:
            raise Exit(1, f'error: failed to create secret secrets "{name}" already exists\n')
        if not DNS1123_SUBDOMAIN.match(name):
            raise Exit(
                1,
                f'error: failed to create secret Secret "{name}" is invalid: metadata.name: Invalid value: '
                f'"{name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
                "characters, '-' or '.'\n",
            )
        number = store.next_number(state)
        objects[key] = {
            "kind": "Secret",
            "created": time.time(),
            "applied": None,
            "object": {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": name,
                    "namespace": call.namespace,
                    "uid": str(uuid.uuid4()),
                    "creationTimestamp": common.now_iso(kube=True),
                    "resourceVersion": str(number),
                },
                "data": entries,
            },
        }
    sys.stdout.write(f"secret/{name} created\n")
    return 0


# ---- logs -----------------------------------------------------------------------------------------------------


def submitter(store: Store, call: Call) -> tuple[str, str, dict]:
    """(context, RayJob name, its record) of ``logs job/NAME``: the submitter Job of a RayJob whose run started."""
    if len(call.positionals) != 1:
        raise Exit(1, "error: expected 'logs [-f] [-p] (POD | TYPE/NAME) [-c CONTAINER]'.\n")
    resource, _, name = call.positionals[0].partition("/")
    if resource not in ("job", "jobs", "job.batch", "jobs.batch") or not name:
        raise Exit(
            1, f"error: fake cloud: only `kubectl logs job/NAME` is in the GKE contract, not {call.positionals[0]}\n"
        )
    with store.transaction() as state:
        context = context_of(state, call)
        key = key_of("RayJob", call.namespace, name)
        reconcile(store, state, context, key)
        record = objects_of(state, context).get(key)
    run = (record or {}).get("job", {}).get("run") if record else None
    if record is None or run is None:
        raise Exit(1, f'Error from server (NotFound): jobs.batch "{name}" not found\n')
    started = job_files(store, context, record) / "started"
    if not started.exists() or started.read_text().strip() != str(run["id"]):
        raise Exit(
            1,
            f'Error from server (BadRequest): container "ray-job-submitter" in pod "{name}-{run["id"]}" '
            "is waiting to start: ContainerCreating\n",
        )
    return context, name, record


def ray_line(level: str, text: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + ",000"
    return f"{stamp}\t{level} cli.py:0 -- {text}\n"


def cmd_logs(store: Store, call: Call) -> int:
    context, name, record = submitter(store, call)
    job = record["job"]
    run = job["run"]
    folder = job_files(store, context, record)
    header = (
        ray_line(
            "INFO",
            f"Job submission server address: http://{job.get('rayClusterName', name)}-head-svc."
            f"{call.namespace}.svc.cluster.local:8265",
        )
        + ray_line("SUCC", "-" * 40)
        + ray_line("SUCC", f"Job '{job.get('jobId', name)}' submitted successfully")
        + ray_line("SUCC", "-" * 40)
    )
    tail = call.flags.get("--tail")
    if not call.flags.get("--follow"):
        text = header + read_text(folder / "log") + footer(folder, job)
        if tail is not None and int(tail) >= 0:
            text = "".join(text.splitlines(keepends=True)[-int(tail) :]) if int(tail) else ""
        sys.stdout.write(text)
        return 0
    sys.stdout.write(header)
    position = 0
    while True:
        running = common.alive(run["pid"], run["starttime"])
        data = read_bytes(folder / "log")
        if len(data) < position:  # a retry started a fresh log
            position = 0
        sys.stdout.buffer.write(data[position:])
        sys.stdout.flush()
        position = len(data)
        if not running:
            break
        time.sleep(0.05)
    sys.stdout.write(footer(folder, job))
    return 0


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def read_text(path: Path) -> str:
    return read_bytes(path).decode(errors="replace")


def footer(folder: Path, job: dict) -> str:
    code = read_text(folder / "exit_code").strip()
    if not code:
        return ""
    job_id = job.get("jobId", "")
    if code == "0":
        return ray_line("SUCC", "-" * 40) + ray_line("SUCC", f"Job '{job_id}' succeeded") + ray_line("SUCC", "-" * 40)
    return ray_line("ERR", "-" * 40) + ray_line("ERR", f"Job '{job_id}' failed") + ray_line("ERR", "-" * 40)


# ---- the run wrapper (a detached process per run) ---------------------------------------------------------------


def current(store: Store, state: dict, context: str, namespace: str, name: str, run_id: int) -> dict | None:
    record = state["objects"].get(context, {}).get(key_of("RayJob", namespace, name))
    run = (record or {}).get("job", {}).get("run") if record else None
    return record if run and run["id"] == run_id else None


def run_job(root: Path, context: str, namespace: str, name: str, run_id: int) -> int:
    """Run a RayJob's entrypoint until it succeeds or its retries are used up; the status follows."""
    store = Store(root)
    folder = store.job_dir(context, namespace, name)
    while True:
        with store.transaction() as state:
            record = current(store, state, context, namespace, name, run_id)
            if record is None:
                return 0
            run = record["job"]["run"]
            delay = state["settings"].get("startup_delay", 0)
        time.sleep(delay)
        code = run_once(store, folder, run, context, namespace, name, run_id)
        with store.transaction() as state:
            record = current(store, state, context, namespace, name, run_id)
            if record is None:
                return 0
            if finish_attempt(record, folder, code):
                (folder / "exit_code").write_text(f"{code}\n")
                return code


def run_once(store: Store, folder: Path, run: dict, context: str, namespace: str, name: str, run_id: int) -> int:
    with open(folder / "log", "wb") as log:
        try:
            child = subprocess.Popen(
                run["argv"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=run["cwd"],
                env={**os.environ, **run["env"]},
            )
        except (OSError, IndexError) as error:
            log.write(f"fake cloud: could not start the entrypoint {run['argv']}: {error}\n".encode())
            return 127
        (folder / "started").write_text(f"{run_id}\n")
        with store.transaction() as state:
            record = current(store, state, context, namespace, name, run_id)
            if record is not None:
                record["job"].update(phase="Running", jobStatus="RUNNING", rayJobStartTime=common.now_iso(kube=True))
        code = child.wait()
    return code if code >= 0 else 128 - code


def finish_attempt(record: dict, folder: Path, code: int) -> bool:
    """Update the status after one attempt; True when the RayJob is done (no retry left or needed)."""
    job = record["job"]
    now = common.now_iso(kube=True)
    if code == 0:
        job["succeeded"] = job.get("succeeded", 0) + 1
        job.update(phase="Complete", jobStatus="SUCCEEDED", endTime=now, rayJobEndTime=now, reason="", message="")
        return True
    job["failed"] = job.get("failed", 0) + 1
    limit = (record["object"].get("spec") or {}).get("backoffLimit") or 0
    if job["failed"] < limit + 1:
        new_ids(job, record["object"]["metadata"]["name"])
        job.update(phase="Initializing", jobStatus="")
        return False
    logs = read_text(folder / "log")[-20000:]
    job.update(
        phase="Failed",
        jobStatus="FAILED",
        reason="AppFailed",
        endTime=now,
        rayJobEndTime=now,
        message=f"Job entrypoint command failed with exit code {code}, last available logs (truncated to 20,000 "
        f"chars):\n{logs}",
    )
    return True


if __name__ == "__main__":
    sys.exit(main())
