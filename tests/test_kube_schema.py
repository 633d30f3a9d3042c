"""tests/kube_schema.py: Kubeflow Trainer v2.3.0 manifests checked as the API server would create them."""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import kube_schema
from kube_schema import FIXTURES, Problem, Schemas, trainer_schemas

SCHEMAS = trainer_schemas()
TORCH_RUNTIME = yaml.safe_load((FIXTURES / "torch_distributed.yaml").read_text())

# What the fixtures were copied from (kubeflow/trainer v2.3.0; tests/fixtures/kubernetes/README.md).
UPSTREAM_SHA256 = {
    "trainer.kubeflow.org_trainjobs.yaml": "a742cafc5b5582640c7e0b7467c024fc237256fbca5ba0a9f0531dfb66d64416",
    "trainer.kubeflow.org_clustertrainingruntimes.yaml": "ec84dc3388fcdbe8c61d3c247a773d14458dd9438e995bea8e50d2a18080eef9",
    "torch_distributed.yaml": "c4520df54615d481831d402e644dbeaf77a7a521eae87b2e80fd5f789aac5df2",
}

GOOD_TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "tiny-ddp", "namespace": "team-a", "labels": {"app.kubernetes.io/part-of": "megatron"}},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {
            "numNodes": 2,
            "numProcPerNode": 2,
            "image": "registry.example/megatron:1",
            "command": ["bash", "-c", "echo hello"],
            "env": [{"name": "NCCL_DEBUG", "value": "WARN"}],
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2, "memory": "64Gi"}},
        },
        "runtimePatches": [{
            "manager": "example.com/adapter",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {"spec": {"template": {"spec": {
                    "containers": [{"name": "node", "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}],
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                }}}},
            }]}}},
        }],
    },
}


def _messages(problems: list[Problem]) -> str:
    return "\n".join(map(str, problems))


def _with(doc: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copied = copy.deepcopy(doc)
    change(copied)
    return copied


def _trainer(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["trainer"]


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    job = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    return job["template"]["spec"]["template"]["spec"]


def test_the_fixtures_are_the_upstream_files_unchanged():
    for name, digest in UPSTREAM_SHA256.items():
        assert hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() == digest, name


def test_the_torch_runtime_and_a_good_trainjob_pass():
    assert SCHEMAS.validate(TORCH_RUNTIME) == []
    assert SCHEMAS.validate(GOOD_TRAINJOB) == []


def test_an_unknown_kind_or_version_is_refused():
    problems = SCHEMAS.validate({**GOOD_TRAINJOB, "apiVersion": "trainer.kubeflow.org/v1"})
    assert len(problems) == 1 and "no loaded CRD serves apiVersion 'trainer.kubeflow.org/v1'" in problems[0].message


@pytest.mark.parametrize("change, path", [
    (lambda d: d["spec"].update(podSpecOverrides=[]), "spec.podSpecOverrides"),
    (lambda d: _trainer(d).update(numProcsPerNode=2), "spec.trainer.numProcsPerNode"),
    (lambda d: _trainer(d)["env"][0].update(valu="x"), "spec.trainer.env[0].valu"),
    (lambda d: _pod(d)["volumes"][0]["emptyDir"].update(medum="Memory"),
     "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
     ".volumes[0].emptyDir.medum"),
    # The patch's container is a restricted one: image is not a field it may set.
    (lambda d: _pod(d)["containers"][0].update(image="other:1"),
     "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
     ".containers[0].image"),
    (lambda d: d.update(extra=1), "extra"),
    (lambda d: d["metadata"].update(labelz={}), "metadata.labelz"),
])
def test_an_unknown_field_is_refused_at_its_path(change, path):
    problems = SCHEMAS.validate(_with(GOOD_TRAINJOB, change))
    assert [p.path for p in problems] == [path], _messages(problems)
    assert "unknown field" in problems[0].message


@pytest.mark.parametrize("change, path, words", [
    (lambda d: _trainer(d).update(numNodes="two"), "spec.trainer.numNodes", "must be integer, got string 'two'"),
    (lambda d: _trainer(d).update(command="bash -c x"), "spec.trainer.command", "must be array, got string"),
    (lambda d: _trainer(d).update(numNodes=2**31), "spec.trainer.numNodes", "is not a valid int32"),
    (lambda d: _trainer(d)["resourcesPerNode"]["limits"].update({"nvidia.com/gpu": True}),
     'spec.trainer.resourcesPerNode.limits["nvidia.com/gpu"]', "must be an integer or a string, got boolean"),
    (lambda d: _trainer(d)["resourcesPerNode"]["limits"].update(memory="64 GiB"),
     "spec.trainer.resourcesPerNode.limits.memory", "does not match"),
    (lambda d: _trainer(d).update(image=None), "spec.trainer.image", "null is not allowed"),
    (lambda d: d["spec"]["runtimeRef"].pop("name"), "spec.runtimeRef.name", "required field is missing"),
    (lambda d: d["spec"]["runtimePatches"][0].update(time="yesterday"), "spec.runtimePatches[0].time",
     "is not a valid date-time"),
    (lambda d: _trainer(d)["env"].append({"name": "NCCL_DEBUG", "value": "INFO"}), "spec.trainer.env[1]",
     "duplicate entry name='NCCL_DEBUG' (also at [0])"),
    (lambda d: d["metadata"]["labels"].update(team="a b"), "metadata.labels.team", "label value 'a b'"),
    (lambda d: d["metadata"].update(namespace="Team_A"), "metadata.namespace", "must be a DNS-1123 label"),
])
def test_a_wrong_value_is_refused_with_a_readable_path(change, path, words):
    problems = SCHEMAS.validate(_with(GOOD_TRAINJOB, change))
    assert [p.path for p in problems] == [path], _messages(problems)
    assert words in problems[0].message, _messages(problems)


# Each CEL rule of the CRDs that applies on create, broken once: (base document, change, path, rule).
CEL_CASES = [
    # A DNS-1123 subdomain (ObjectMeta) that is no RFC 1035 label: only the CEL rule refuses it.
    (GOOD_TRAINJOB, lambda d: d["metadata"].update(name="1st.run"), "",
     "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"),
    (GOOD_TRAINJOB, lambda d: d["metadata"].update(name="a" * 64), "", "size(self.metadata.name) <= 63"),
    (GOOD_TRAINJOB, lambda d: d["spec"].update(initializer={"dataset": {"storageUri": "s3-bucket/data"}}),
     "spec.initializer.dataset.storageUri", "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')"),
    (GOOD_TRAINJOB, lambda d: d["spec"].update(initializer={"model": {"storageUri": "hf:model"}}),
     "spec.initializer.model.storageUri", "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')"),
    (GOOD_TRAINJOB, lambda d: d["spec"].update(managedBy="me"), "spec.managedBy",
     "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']"),
    (GOOD_TRAINJOB, lambda d: d.update(status={"trainerStatus": {"progressPercentage": 5}}),
     "status.trainerStatus", "has(self.lastUpdatedTime)"),
    (TORCH_RUNTIME, lambda d: d["spec"]["mlPolicy"].update(mpi={}), "spec.mlPolicy",
     "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1"),
    (TORCH_RUNTIME, lambda d: d["spec"].update(mlPolicy={"numNodes": 1, "flux": {"numProcPerNode": 0}}),
     "spec.mlPolicy.flux.numProcPerNode", "self >= 1"),
    (TORCH_RUNTIME, lambda d: d["spec"]["mlPolicy"]["torch"].update(
        envInjection={"targets": [{"jobName": "node", "containerNames": ["node"]}]}),
     "spec.mlPolicy.torch.envInjection.targets[0].containerNames", "!self.exists(c, c == 'node')"),
    (TORCH_RUNTIME, lambda d: d["spec"]["template"]["spec"].update(
        startupPolicy={"startupPolicyOrder": "InOrder"},
        replicatedJobs=[{**d["spec"]["template"]["spec"]["replicatedJobs"][0], "name": "init"},
                        {**d["spec"]["template"]["spec"]["replicatedJobs"][0],
                         "dependsOn": [{"name": "init", "status": "Complete"}]}]),
     "spec.template.spec",
     "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
     "self.replicatedJobs.exists(x, has(x.dependsOn)))"),
    (TORCH_RUNTIME, lambda d: d["spec"]["template"]["spec"].update(
        volumeClaimPolicies=[{"templates": [{"metadata": {"name": "ckpt", "namespace": "team-a"}}]}]),
     "spec.template.spec.volumeClaimPolicies[0]",
     "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)"),
]


@pytest.mark.parametrize("base, change, path, rule", CEL_CASES)
def test_each_cel_rule_refuses_its_violation(base, change, path, rule):
    assert SCHEMAS.validate(base) == []
    problems = SCHEMAS.validate(_with(base, change))
    assert [(p.path, rule in p.message) for p in problems] == [(path, True)], _messages(problems)


@functools.cache
def _crd_rules() -> tuple[str, ...]:
    """Every x-kubernetes-validations rule text of the two CRDs."""
    rules: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(FIXTURES.glob("trainer.kubeflow.org_*.yaml")):
        walk(yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))  # noqa: S506
    return tuple(rules)


def test_every_create_time_cel_rule_of_the_crds_has_a_python_function_and_a_case():
    on_create = {r for r in _crd_rules() if not kube_schema.is_transition_rule(r)}
    assert on_create == set(kube_schema.RULES), "RULES must be exactly the CRDs' create-time rules"
    assert on_create == {case[3] for case in CEL_CASES}, "each rule needs a violation case above"
    for rule, fn in kube_schema.RULES.items():
        assert rule in (fn.__doc__ or ""), f"{fn.__name__} must quote its rule"


def test_transition_rules_are_skipped_on_create():
    transition = [r for r in _crd_rules() if kube_schema.is_transition_rule(r)]
    assert transition and all("oldSelf" in r for r in transition)


@pytest.mark.parametrize("change, path, words", [
    (lambda d: _trainer(d)["env"].append({"name": "PET_MASTER_PORT", "value": "1"}), "spec.trainer.env[1].name",
     "PET_MASTER_PORT is reserved"),
    (lambda d: d["spec"]["runtimePatches"][0].update(manager="adapter"), "spec.runtimePatches[0].manager",
     "must be a domain-prefixed path"),
    (lambda d: _pod(d)["containers"][0].update(name="trainer"),
     "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
     ".containers[0].name", "container 'trainer' is not in the runtime's 'node' job"),
    (lambda d: _pod(d)["containers"][0].update(env=[{"name": "A", "value": "1"}]),
     "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
     ".containers[0].name", "must not set env"),
    (lambda d: d["spec"]["runtimeRef"].update(name="mpi-distributed"), "spec.runtimeRef.name",
     "no loaded ClusterTrainingRuntime 'mpi-distributed'"),
])
def test_the_webhook_checks_that_need_the_runtime(change, path, words):
    problems = SCHEMAS.validate(_with(GOOD_TRAINJOB, change))
    assert [p.path for p in problems] == [path], _messages(problems)
    assert words in problems[0].message


# A small CRD for the structural-schema extensions that the Trainer CRDs do not use.
TOY_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "toys.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"kind": "Toy", "plural": "toys"},
        "scope": "Cluster",
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": {
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "properties": {"n": {"type": "integer"}}},
                    "port": {"x-kubernetes-int-or-string": True},
                    "note": {"type": "string", "nullable": True},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "child": {"type": "object", "x-kubernetes-embedded-resource": True,
                              "x-kubernetes-preserve-unknown-fields": True},
                    "odd": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('x')"}]},
                }},
            },
        }}}],
    },
}
TOY = {"apiVersion": "example.com/v1", "kind": "Toy", "metadata": {"name": "t"}, "spec": {}}


@pytest.mark.parametrize("spec, expected", [
    ({"free": {"n": 1, "anything": {"deep": [1]}}}, []),
    ({"free": {"n": "one"}}, [("spec.free.n", "must be integer")]),
    ({"port": 8080}, []),
    ({"port": "http"}, []),
    ({"port": 1.5}, [("spec.port", "must be an integer or a string, got number")]),
    ({"note": None}, []),
    ({"tags": ["a", "b", "a"]}, [("spec.tags[2]", "duplicate value 'a'")]),
    ({"child": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}}, []),
    ({"child": {"metadata": {"name": "c"}}}, [("spec.child.apiVersion", "required"), ("spec.child.kind", "required")]),
    ({"odd": "y"}, [("spec.odd", "CEL rule not evaluated by tests/kube_schema.py")]),
])
def test_structural_schema_extensions(spec, expected):
    schemas = Schemas([TOY_CRD])
    problems = schemas.validate({**TOY, "spec": spec})
    assert [(p.path, words in p.message) for p, (_, words) in zip(problems, expected)] == \
        [(path, True) for path, _ in expected], _messages(problems)
    assert len(problems) == len(expected), _messages(problems)


def test_a_cluster_scoped_kind_takes_no_namespace():
    problems = Schemas([TOY_CRD]).validate({**TOY, "metadata": {"name": "t", "namespace": "team-a"}})
    assert [str(p) for p in problems] == ["metadata.namespace: not allowed on a cluster-scoped kind"]


def test_yaml_with_a_duplicate_key_is_refused():
    text = (FIXTURES.parent / "engines" / "tp2-dp2" / "trainjob.yaml").read_text()
    doubled = text.replace("  trainer:\n", "  suspend: true\n  suspend: false\n  trainer:\n", 1)
    problems = SCHEMAS.validate_text(doubled)
    assert len(problems) == 1 and "duplicate key 'suspend'" in problems[0].message


def test_problems_of_later_documents_name_their_document():
    text = yaml.safe_dump_all([GOOD_TRAINJOB, _with(GOOD_TRAINJOB, lambda d: _trainer(d).update(numNodes="x"))])
    assert [p.path for p in SCHEMAS.validate_text(text)] == ["[1].spec.trainer.numNodes"]


def test_paths_name_keys_that_are_not_plain_names_in_brackets():
    assert kube_schema.join_path(["metadata", "labels", "a.b/c", 0, "x"]) == 'metadata.labels["a.b/c"][0].x'


def test_the_validator_reads_the_fixtures_not_shared():
    assert Path(kube_schema.FIXTURES).is_relative_to(Path(__file__).resolve().parent)
