"""Validate Kubernetes manifests against CRD structural schemas, as the API server would on create.

Without a cluster, this is the closest check to `kubectl apply` (whose field validation is Strict):

- each document's apiVersion/kind selects a served version's `openAPIV3Schema` of a loaded CRD;
- the schema is turned into a JSON Schema (Draft 4: OpenAPI 3.0's boolean exclusiveMinimum) with
  Kubernetes structural semantics, then checked with `jsonschema`:
  - an unknown field is REJECTED wherever the schema has `properties` (or is a plain object) and no
    `x-kubernetes-preserve-unknown-fields`: the API server's pruning would drop it silently;
  - `x-kubernetes-int-or-string` takes an integer or a string; `pattern` applies to strings only;
  - `x-kubernetes-embedded-resource` objects need apiVersion and kind and take ObjectMeta;
  - `nullable` allows null; any other null is refused (the API server would drop it);
  - formats int32, int64 (range), date-time (RFC 3339) and byte (base64); others are not checked,
    as the API server ignores formats it does not know;
- `x-kubernetes-list-type: set` items and `map` keys must be unique, map keys present;
- ObjectMeta at the root: known fields only, name a DNS-1123 subdomain, namespace a DNS-1123 label
  (and none on a cluster-scoped kind), label keys and values as apimachinery validates them;
- `x-kubernetes-validations` (CEL): every rule of these CRDs that applies on create is a Python
  function below (`RULES`), registered under its exact rule text. Transition rules (they use
  `oldSelf`) apply only on update and are skipped. A rule that is neither fails validation with its
  path, so a newer CRD's new rule cannot pass unnoticed;
- TrainJob admission: the Trainer webhook's checks that need the runtime (reserved PET_ env names,
  runtimePatches managers, jobs and containers), see `trainjob_admission_problems`.

Problems are (path, message) pairs such as `spec.trainer.numNodes: must be integer, got string 'two'`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kubernetes"


@dataclass(frozen=True, order=True)
class Problem:
    """One reason the API server would refuse (or silently change) a manifest."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


# --- paths ---------------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def join_path(parts: Iterable[str | int]) -> str:
    """`spec.trainer.env[0].name`; keys that are not plain names as `labels["a.b/c"]`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


# --- CEL rules as Python -------------------------------------------------------------------------

CelRule = Callable[[Any], bool]
RULES: dict[str, CelRule] = {}


def cel(rule: str) -> Callable[[CelRule], CelRule]:
    """Register a Python predicate for one CEL rule, keyed by the rule's exact text."""

    def register(fn: CelRule) -> CelRule:
        RULES[rule] = fn
        fn.cel_rule = rule  # type: ignore[attr-defined]
        return fn

    return register


def _matches(value: str, pattern: str) -> bool:
    # CEL's matches() is RE2 with search semantics (a match anywhere); these rules anchor themselves.
    return re.search(pattern, value) is not None


@cel("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')")
def trainjob_name_is_rfc1035_label(obj: Mapping[str, Any]) -> bool:
    """TrainJob (root): `self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')`."""
    return _matches(obj["metadata"]["name"], "^[a-z]([-a-z0-9]*[a-z0-9])?$")


@cel("size(self.metadata.name) <= 63")
def trainjob_name_at_most_63(obj: Mapping[str, Any]) -> bool:
    """TrainJob (root): `size(self.metadata.name) <= 63`."""
    return len(obj["metadata"]["name"]) <= 63


@cel("self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')")
def storage_uri_is_empty_or_a_uri(value: str) -> bool:
    """TrainJob spec.initializer.{dataset,model}.storageUri: `self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')`."""
    return value == "" or _matches(value, "^[A-Za-z][A-Za-z0-9+.-]*://.+$")


@cel("self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']")
def managed_by_is_known(value: str) -> bool:
    """TrainJob spec.managedBy: `self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']`."""
    return value in ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")


@cel("has(self.lastUpdatedTime)")
def trainer_status_has_last_updated_time(value: Mapping[str, Any]) -> bool:
    """TrainJob status.trainerStatus: `has(self.lastUpdatedTime)`."""
    return "lastUpdatedTime" in value


@cel("[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1")
def one_ml_policy_at_most(value: Mapping[str, Any]) -> bool:
    """ClusterTrainingRuntime spec.mlPolicy: `[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1`."""
    return sum(key in value for key in ("torch", "mpi", "jax", "xgboost", "flux")) <= 1


@cel("self >= 1")
def at_least_one(value: int) -> bool:
    """ClusterTrainingRuntime spec.mlPolicy.flux.numProcPerNode: `self >= 1`."""
    return value >= 1


@cel("!self.exists(c, c == 'node')")
def env_injection_not_node(value: list[str]) -> bool:
    """ClusterTrainingRuntime spec.mlPolicy.torch.envInjection.targets[].containerNames: `!self.exists(c, c == 'node')`."""
    return "node" not in value


@cel("!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
     "self.replicatedJobs.exists(x, has(x.dependsOn)))")
def in_order_startup_without_depends_on(value: Mapping[str, Any]) -> bool:
    """ClusterTrainingRuntime spec.template.spec: `!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && self.replicatedJobs.exists(x, has(x.dependsOn)))`."""
    in_order = "startupPolicy" in value and value["startupPolicy"].get("startupPolicyOrder") == "InOrder"
    return not (in_order and any("dependsOn" in job for job in value.get("replicatedJobs", [])))


@cel("self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)")
def claim_templates_have_no_namespace(value: Mapping[str, Any]) -> bool:
    """ClusterTrainingRuntime spec.template.spec.volumeClaimPolicies[]: `self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)`."""
    return all(not t.get("metadata", {}).get("namespace") for t in value["templates"])


def is_transition_rule(rule: str) -> bool:
    """Rules that compare with `oldSelf` run only on update; a create never evaluates them."""
    return re.search(r"\b(oldSelf|optionalOldSelf)\b", rule) is not None


# --- ObjectMeta ----------------------------------------------------------------------------------

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
META_FIELDS = {"name", "generateName", "namespace", "labels", "annotations", "finalizers", "ownerReferences"}


def _label_key_problems(key: str, path: str) -> list[Problem]:
    """apimachinery's IsQualifiedName: optional DNS-subdomain prefix and '/', a name of at most 63."""
    prefix, _, name = key.rpartition("/")
    problems = []
    if "/" in key and (not prefix or len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        problems.append(Problem(path, f"label key prefix {prefix!r} must be a DNS-1123 subdomain"))
    if len(name) > 63 or not QUALIFIED_NAME.match(name):
        problems.append(Problem(path, f"label key name {name!r} must be at most 63 characters of "
                                      "[A-Za-z0-9-_.], starting and ending alphanumeric"))
    return problems


def object_meta_problems(meta: Any, path: list[str | int], namespaced: bool) -> list[Problem]:
    """The API server's own ObjectMeta checks for a custom resource (the CRD says only `type: object`)."""
    where = join_path(path)
    if not isinstance(meta, dict):
        return [Problem(where, f"must be object, got {_json_type(meta)}")]
    problems = [Problem(join_path([*path, k]), "unknown field (not an ObjectMeta field a manifest sets)")
                for k in sorted(set(meta) - META_FIELDS)]
    name = meta.get("name")
    if name is None and not meta.get("generateName"):
        problems.append(Problem(join_path([*path, "name"]), "name or generateName is required"))
    if name is not None and (not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name)):
        problems.append(Problem(join_path([*path, "name"]),
                                f"{name!r} must be a DNS-1123 subdomain (lower-case alphanumerics, '-', '.')"))
    namespace = meta.get("namespace")
    if namespace is not None and not namespaced:
        problems.append(Problem(join_path([*path, "namespace"]), "not allowed on a cluster-scoped kind"))
    elif namespace is not None and (not isinstance(namespace, str) or len(namespace) > 63
                                    or not DNS1123_LABEL.match(namespace)):
        problems.append(Problem(join_path([*path, "namespace"]), f"{namespace!r} must be a DNS-1123 label"))
    for field in ("labels", "annotations"):
        values = meta.get(field, {})
        if not isinstance(values, dict):
            problems.append(Problem(join_path([*path, field]), "must be a map of strings"))
            continue
        for key, value in values.items():
            kpath = join_path([*path, field, str(key)])
            if not isinstance(value, str):
                problems.append(Problem(kpath, f"must be string, got {_json_type(value)} (quote it in YAML)"))
                continue
            problems += _label_key_problems(str(key), kpath)
            if field == "labels" and value and (len(value) > 63 or not QUALIFIED_NAME.match(value)):
                problems.append(Problem(kpath, f"label value {value!r} must be at most 63 characters of "
                                               "[A-Za-z0-9-_.], starting and ending alphanumeric"))
    return problems


# --- structural schema -> JSON Schema ------------------------------------------------------------

def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


EMBEDDED_EXTRA = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}


def to_json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema (Draft 4) that accepts what the API server keeps of a structural schema's values."""
    out: dict[str, Any] = {k: v for k, v in node.items()
                           if k not in ("properties", "items", "additionalProperties", "anyOf", "allOf",
                                        "oneOf", "not", "description", "nullable")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        if "anyOf" not in node:
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    for key in ("anyOf", "allOf", "oneOf"):
        if key in node:
            out[key] = [to_json_schema(sub) for sub in node[key]]
    if "not" in node:
        out["not"] = to_json_schema(node["not"])
    if "items" in node:
        out["items"] = to_json_schema(node["items"])
    properties = {k: to_json_schema(v) for k, v in node.get("properties", {}).items()}
    if node.get("x-kubernetes-embedded-resource"):
        for key, schema in EMBEDDED_EXTRA.items():
            properties.setdefault(key, schema)
        out["required"] = sorted(set(out.get("required", [])) | {"apiVersion", "kind"})
    if properties:
        out["properties"] = properties
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = to_json_schema(extra)
    elif extra is True or node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = True
    elif node.get("type") == "object" or properties:
        # Pruning: a field the schema does not name would be dropped, so a manifest must not carry it.
        out["additionalProperties"] = False
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


FORMATS = jsonschema.FormatChecker(formats=())
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


@FORMATS.checks("int32")
def _int32(value: Any) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**31) <= value < 2**31


@FORMATS.checks("int64")
def _int64(value: Any) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**63) <= value < 2**63


@FORMATS.checks("date-time")
def _date_time(value: Any) -> bool:
    return not isinstance(value, str) or RFC3339.match(value) is not None


@FORMATS.checks("byte")
def _byte(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _error_problems(error: jsonschema.ValidationError) -> list[Problem]:
    """Readable problems from one jsonschema error, at the instance path it names."""
    parts = list(error.absolute_path)
    where = join_path(parts)
    kind, value, schema = error.validator, error.instance, error.schema
    if kind == "additionalProperties" and isinstance(value, dict):
        known = set(schema.get("properties", {}))
        return [Problem(join_path([*parts, k]), "unknown field (the API server would drop it: "
                                                "not in the CRD schema)") for k in sorted(set(value) - known)]
    if kind == "required":
        return [Problem(join_path([*parts, k]), "required field is missing")
                for k in error.validator_value if k not in value]
    if kind == "type":
        if value is None:
            return [Problem(where, "null is not allowed here (not nullable: the API server would drop it)")]
        return [Problem(where, f"must be {' or '.join(_as_list(error.validator_value))}, "
                               f"got {_json_type(value)} {value!r}")]
    if kind == "anyOf" and schema.get("x-kubernetes-int-or-string"):
        return [Problem(where, f"must be an integer or a string, got {_json_type(value)} {value!r}")]
    if kind == "format":
        return [Problem(where, f"{value!r} is not a valid {error.validator_value}")]
    return [Problem(where, error.message)]


def _as_list(value: Any) -> list[str]:
    return list(value) if isinstance(value, list) else [value]


# --- the walk for CEL and list types ------------------------------------------------------------

def _list_problems(value: list[Any], node: Mapping[str, Any], path: list[str | int]) -> list[Problem]:
    """x-kubernetes-list-type: set items and map keys are unique; map items carry their keys."""
    list_type = node.get("x-kubernetes-list-type")
    problems = []
    if list_type == "set":
        seen: list[Any] = []
        for index, item in enumerate(value):
            if item in seen:
                problems.append(Problem(join_path([*path, index]), f"duplicate value {item!r} in a list-type set"))
            seen.append(item)
    elif list_type == "map":
        keys = node.get("x-kubernetes-list-map-keys", [])
        seen_keys: dict[tuple[Any, ...], int] = {}
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            item_schema = node.get("items", {}).get("properties", {})
            absent = [k for k in keys if k not in item and "default" not in item_schema.get(k, {})]
            for key in absent:
                problems.append(Problem(join_path([*path, index, key]), "list-map key is missing"))
            key_value = tuple(item.get(k) for k in keys)
            if not absent and key_value in seen_keys:
                shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, key_value))
                problems.append(Problem(join_path([*path, index]),
                                        f"duplicate entry {shown} (also at [{seen_keys[key_value]}])"))
            seen_keys.setdefault(key_value, index)
    return problems


def _rule_problems(value: Any, node: Mapping[str, Any], path: list[str | int]) -> list[Problem]:
    problems = []
    for entry in node.get("x-kubernetes-validations", []):
        rule = entry["rule"]
        if is_transition_rule(rule):
            continue
        fn = RULES.get(rule)
        where = join_path(path)
        if fn is None:
            problems.append(Problem(where, "CEL rule not evaluated by tests/kube_schema.py "
                                           f"(add it to RULES): {rule}"))
            continue
        try:
            ok = fn(value)
        except (KeyError, TypeError, AttributeError) as exc:
            problems.append(Problem(where, f"CEL rule {rule!r} cannot be evaluated here ({exc!r})"))
            continue
        if not ok:
            message = entry.get("message") or f"failed rule: {rule}"
            problems.append(Problem(where, f"{message} (CEL: {rule})"))
    return problems


def walk_problems(value: Any, node: Mapping[str, Any], path: list[str | int]) -> list[Problem]:
    """CEL rules and list-type checks of every schema node that the document reaches."""
    problems = _rule_problems(value, node, path)
    if isinstance(value, list):
        problems += _list_problems(value, node, path)
        if "items" in node:
            for index, item in enumerate(value):
                problems += walk_problems(item, node["items"], [*path, index])
    elif isinstance(value, dict):
        extra = node.get("additionalProperties")
        for key, item in value.items():
            sub = node.get("properties", {}).get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                problems += walk_problems(item, sub, [*path, key])
    return problems


# --- admission (webhook) rules that are not in the CRD -----------------------------------------

# kubeflow/trainer v2.3.0 pkg/constants/constants.go:300 TorchRunReservedEnvNames, checked by
# pkg/runtime/framework/plugins/torch/torch.go Validate: the plugin sets these itself.
TORCH_RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
# k8s.io/apimachinery/pkg/util/validation IsDomainPrefixedPath: "acme.io/foo".
HTTP_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def _domain_prefixed_path_problems(value: str, path: str) -> list[Problem]:
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        return [Problem(path, f"{value!r} must be a domain-prefixed path (such as \"acme.io/foo\")")]
    if len(host) > 253 or not DNS1123_SUBDOMAIN.match(host):
        return [Problem(path, f"{host!r} (before '/') must be a DNS-1123 subdomain")]
    if not HTTP_PATH.match(rest):
        return [Problem(path, f"{rest!r} (after '/') is not a valid path")]
    return []


def _runtime_containers(runtime: Mapping[str, Any]) -> dict[str, set[str]]:
    """Replicated job name -> its init and main container names, from a (Cluster)TrainingRuntime."""
    jobs = runtime.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", [])
    out = {}
    for job in jobs:
        pod = job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
        out[job["name"]] = {c["name"] for c in pod.get("initContainers", []) + pod.get("containers", [])}
    return out


def trainjob_admission_problems(doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """The Trainer webhook's checks (v2.3.0) that a CRD schema cannot express, for a TrainJob.

    - torch plugin (plugins/torch/torch.go Validate): spec.trainer.env sets no reserved PET_ name;
    - jobset plugin (plugins/jobset/jobset.go Validate): each runtimePatches[].manager is a
      domain-prefixed path; a patched replicated job and container exist in the runtime; the
      `node` container's patch sets no env (trainer.env is the place);
    - the referenced ClusterTrainingRuntime exists (here: among the loaded ones).
    """
    spec = doc.get("spec") or {}
    problems = []
    env = (spec.get("trainer") or {}).get("env") or []
    problems += [Problem(join_path(["spec", "trainer", "env", i, "name"]),
                         f"{item['name']} is reserved: the torch runtime sets it (torch plugin webhook)")
                 for i, item in enumerate(env) if isinstance(item, dict) and item.get("name") in TORCH_RESERVED_ENV]
    ref = spec.get("runtimeRef") or {}
    cluster_scoped = ref.get("kind", "ClusterTrainingRuntime") == "ClusterTrainingRuntime"
    runtime = runtimes.get(ref.get("name", "")) if cluster_scoped else None
    if runtime is None:
        problems.append(Problem("spec.runtimeRef.name", f"no loaded ClusterTrainingRuntime {ref.get('name')!r} "
                                                        f"(loaded: {', '.join(sorted(runtimes)) or 'none'})"))
        return problems
    containers = _runtime_containers(runtime)
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        base: list[str | int] = ["spec", "runtimePatches", i]
        problems += _domain_prefixed_path_problems(patch.get("manager", ""), join_path([*base, "manager"]))
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        jobs = (template.get("spec") or {}).get("replicatedJobs") or []
        for j, job in enumerate(jobs):
            jpath: list[str | int] = [*base, "trainingRuntimeSpec", "template", "spec", "replicatedJobs", j]
            if job["name"] not in containers:
                problems.append(Problem(join_path([*jpath, "name"]),
                                        f"replicated job {job['name']!r} is not in runtime {ref['name']!r} "
                                        f"(it has {', '.join(sorted(containers))})"))
                continue
            pod = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            for field in ("initContainers", "containers"):
                for c, container in enumerate(pod.get(field) or []):
                    cpath = join_path([*jpath, "template", "spec", "template", "spec", field, c, "name"])
                    if container["name"] not in containers[job["name"]]:
                        problems.append(Problem(cpath, f"container {container['name']!r} is not in the runtime's "
                                                       f"{job['name']!r} job"))
                    elif field == "containers" and container.get("env") and container["name"] == "node":
                        problems.append(Problem(cpath, "the node container's patch must not set env: "
                                                       "use spec.trainer.env"))
    return problems


# --- CRDs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Kind:
    """One served version of a CRD: its structural schema and the JSON Schema made from it."""

    api_version: str
    kind: str
    namespaced: bool
    schema: Mapping[str, Any]
    validator: jsonschema.Draft4Validator


def _kind_from(crd: Mapping[str, Any], version: Mapping[str, Any]) -> Kind:
    schema = version["schema"]["openAPIV3Schema"]
    converted = to_json_schema(schema)
    # Root metadata is ObjectMeta, which the API server checks itself (object_meta_problems).
    converted.setdefault("properties", {})["metadata"] = {"type": "object"}
    return Kind(api_version=f"{crd['spec']['group']}/{version['name']}", kind=crd["spec"]["names"]["kind"],
                namespaced=crd["spec"]["scope"] == "Namespaced", schema=schema,
                validator=jsonschema.Draft4Validator(converted, format_checker=FORMATS))


class Schemas:
    """The kinds of a set of CRDs, by (apiVersion, kind)."""

    def __init__(self, crds: Iterable[Mapping[str, Any]], runtimes: Iterable[Mapping[str, Any]] = ()):
        self.kinds: dict[tuple[str, str], Kind] = {}
        # ClusterTrainingRuntimes by name, which TrainJob admission checks look up.
        self.runtimes = {r["metadata"]["name"]: r for r in runtimes}
        for crd in crds:
            for version in crd["spec"]["versions"]:
                if version.get("served", False):
                    kind = _kind_from(crd, version)
                    self.kinds[(kind.api_version, kind.kind)] = kind

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> Schemas:
        """Load CRDs and ClusterTrainingRuntimes from YAML files (other documents are ignored)."""
        # The C loader when PyYAML has it: the CRDs are 1.5 MB of YAML.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        docs = [doc for path in paths
                for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506
                if isinstance(doc, dict)]
        return cls([d for d in docs if d.get("kind") == "CustomResourceDefinition"],
                   [d for d in docs if d.get("kind") == "ClusterTrainingRuntime"])

    def validate(self, doc: Any) -> list[Problem]:
        """Every problem the API server would find creating `doc`; an empty list when it is accepted."""
        if not isinstance(doc, dict):
            return [Problem("", f"a manifest must be a mapping, got {_json_type(doc)}")]
        key = (doc.get("apiVersion"), doc.get("kind"))
        kind = self.kinds.get(key)  # type: ignore[arg-type]
        if kind is None:
            known = ", ".join(f"{a} {k}" for a, k in sorted(self.kinds))
            return [Problem("", f"no loaded CRD serves apiVersion {key[0]!r} kind {key[1]!r} (loaded: {known})")]
        problems: list[Problem] = []
        for error in kind.validator.iter_errors(doc):
            problems += _error_problems(error)
        problems += object_meta_problems(doc.get("metadata"), ["metadata"], kind.namespaced)
        # CEL runs only on a document that passes the schema (as in the API server); its rules may
        # read fields whose shape the schema guarantees.
        if not problems:
            problems += walk_problems(doc, kind.schema, [])
            if kind.kind == "TrainJob":
                problems += trainjob_admission_problems(doc, self.runtimes)
        return sorted(set(problems))

    def validate_text(self, text: str) -> list[Problem]:
        """Validate every document of a YAML stream; paths of later documents start with `[N]`."""
        try:
            docs = [d for d in load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            return [Problem("", f"not YAML: {exc}")]
        if len(docs) == 1:
            return self.validate(docs[0])
        return [Problem(f"[{i}]" + (f".{p.path}" if p.path else ""), p.message)
                for i, doc in enumerate(docs) for p in self.validate(doc)]


def trainer_schemas(directory: Path = FIXTURES) -> Schemas:
    """Kubeflow Trainer v2.3.0's TrainJob and ClusterTrainingRuntime kinds and torch runtime (tests/fixtures)."""
    crds = sorted(directory.glob("trainer.kubeflow.org_*.yaml"))
    return Schemas.from_files([*crds, directory / "torch_distributed.yaml"])


# --- YAML like the API server reads it ----------------------------------------------------------

class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (sigs.k8s.io/yaml's strict decoding refuses them too)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_all(text: str) -> list[Any]:
    """All documents of a YAML stream, refusing duplicate keys."""
    return list(yaml.load_all(text, Loader=_StrictLoader))  # noqa: S506 (a SafeLoader subclass)

