"""Kubernetes with Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1 TrainJob on a
ClusterTrainingRuntime): names the API server accepts, and the TrainJob a training step becomes.

The torch runtime sets PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT in the trainer's
`node` container (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/torch/torch.go); v2.3.0 has
no podSpecOverrides, so the shared volume and /dev/shm go in a runtime patch of the `node`
replicated job (docs/engines.md; tests/kube_schema.py validates against the CRD).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

PLATFORM = "kubernetes"
TRAINJOB_FILE = "trainjob.yaml"
API_VERSION = "trainer.kubeflow.org/v1alpha1"
PATCH_MANAGER = "megatron-compile/kubernetes"  # the Trainer webhook wants a domain-like manager name
# RFC 1123 names as Kubernetes validates them (apimachinery validation.IsDNS1123Label/Subdomain)
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


class KubeJob(NamedTuple):
    """What trainjob.yaml says, as the plan derives it."""

    name: str
    namespace: str | None
    runtime: str
    nodes: int
    gpus_per_node: int
    image: str
    claim: str
    mount_path: str
    queue: str | None
    active_deadline_seconds: int | None


def is_label(name: str) -> bool:
    """An RFC 1123 label: at most 63 lowercase alphanumerics or '-', alphanumeric at both ends."""
    return len(name) <= 63 and DNS1123_LABEL.fullmatch(name) is not None


def is_subdomain(name: str) -> bool:
    """An RFC 1123 subdomain: labels joined by '.', at most 253 characters."""
    return len(name) <= 253 and DNS1123_SUBDOMAIN.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """A label value: at most 63 characters, alphanumeric at both ends, '-', '_' and '.' inside."""
    return len(value) <= 63 and LABEL_VALUE.fullmatch(value) is not None


def trainjob_document(job: KubeJob, header: list[str], launch_text: str) -> tuple[list[str], dict[str, Any]]:
    """(comment lines, the TrainJob) for a job and its rendered launch command."""
    metadata: dict[str, Any] = {"name": job.name}
    if job.namespace is not None:
        metadata["namespace"] = job.namespace
    labels = {"app.kubernetes.io/managed-by": "megatron-compile"}
    if job.queue is not None:
        labels["kueue.x-k8s.io/queue-name"] = job.queue
    metadata["labels"] = labels
    spec: dict[str, Any] = {
        "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": job.runtime},
    }
    if job.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = job.active_deadline_seconds
    spec["trainer"] = {
        "numNodes": job.nodes,
        "numProcPerNode": job.gpus_per_node,
        "image": job.image,
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": job.gpus_per_node}},
        "command": ["bash", "-c", launch_text],
    }
    container = {"name": "node", "volumeMounts": [{"name": "shared", "mountPath": job.mount_path},
                                                 {"name": "dshm", "mountPath": "/dev/shm"}]}
    pod = {"containers": [container], "volumes": [
        {"name": "shared", "persistentVolumeClaim": {"claimName": job.claim}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]}
    spec["runtimePatches"] = [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}]
    comments = header + [
        f"The Kubeflow Trainer TrainJob: `kubectl apply -f {TRAINJOB_FILE}`"
        + (f" (namespace {job.namespace})" if job.namespace else "") + f"; the PersistentVolumeClaim {job.claim}",
        f"is the shared storage at {job.mount_path}; verify.sh checks the run root from any pod that mounts it.",
    ]
    return comments, {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": metadata, "spec": spec}
