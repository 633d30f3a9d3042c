"""Kubernetes with Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1 TrainJob on a
ClusterTrainingRuntime): names the API server accepts, and the TrainJob a step becomes (the engine
adapter).

The torch runtime sets PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT in the trainer's
`node` container (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/torch/torch.go); v2.3.0 has
no podSpecOverrides, so the shared volume and /dev/shm go in a runtime patch of the `node`
replicated job (docs/engines.md; tests/kube_schema.py validates against the CRD).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..tuples import NamedTuple
from .engine import (Document, DocumentFile, EngineFacts, EnvParam, Finding, NodeEnv, StepRequest, nodes_and_gpus,
                     step_document)
from ..schema.records import JobSpec
from .images import ImagePins

TRAINJOB_FILE = "trainjob.yaml"
API_VERSION = "trainer.kubeflow.org/v1alpha1"
PATCH_MANAGER = "megatron-compile/kubernetes"
# The torch plugin sets PET_* (torch.go); Kubeflow's torch runtimes are torch-distributed and torchtune-*
TORCH_RUNTIME_PREFIX = "torch"  # the Trainer webhook wants a domain-like manager name
# RFC 1123 names as Kubernetes validates them (apimachinery validation.IsDNS1123Label/Subdomain); text
# matched with re.fullmatch, compiled at the first use: a spec of another engine never uses them
DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"

NODE_ENV = NodeEnv(
    note=("The Kubernetes launch command: trainjob.yaml carries it as the trainer's command on every node.",),
    comment=(
        "Kubeflow Trainer's torch plugin (v2.3.0, pkg/runtime/framework/plugins/torch/torch.go) sets these",
        "in the `node` container: PET_NNODES (trainer.numNodes), PET_NODE_RANK (the pod's Job completion",
        "index), PET_MASTER_ADDR (node 0's pod DNS name) and PET_MASTER_PORT (29500). They are read into",
        "names of our own and checked against the spec; the flags below override torchrun's own PET_ reads.",
    ),
    shown_names=(("NODES_FROM", "PET_NNODES"), ("RANK_FROM", "PET_NODE_RANK")),
    nnodes=EnvParam("PET_NNODES", "Kubeflow Trainer PET_NNODES is required", True),
    node_rank=EnvParam("PET_NODE_RANK", "Kubeflow Trainer PET_NODE_RANK is required", True),
    master_addr=EnvParam("PET_MASTER_ADDR", "Kubeflow Trainer PET_MASTER_ADDR is required", True),
    master_port=EnvParam("PET_MASTER_PORT", "Kubeflow Trainer PET_MASTER_PORT is required", True),
    nodes_named="$NODES_FROM", rank_named="$RANK_FROM", unit="node", unset=(),
    task_count=None, task_count_shown=None, task_hint="",
)


class KubeJob(NamedTuple):
    """What trainjob.yaml (or a step's trainjob-KIND.yaml) says, as the plan derives it."""

    file: str
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
    termination_grace_seconds: int | None  # the pod's terminationGracePeriodSeconds: a stop's time to save
    image_pull_secrets: tuple[str, ...] = ()

    def describe(self) -> str:
        """Nodes and GPUs, for plan.md's Steps section."""
        return nodes_and_gpus(self.nodes, self.gpus_per_node)


class Kubernetes:
    """The Kubernetes (Kubeflow Trainer) engine adapter (engine.Engine)."""

    name: str = "kubernetes"
    title: str = "Kubernetes"
    section: str | None = "kubernetes"
    node_env: NodeEnv = NODE_ENV
    read_only_data: tuple[str, ...] = ()
    reserved_mounts: tuple[str, ...] = ()
    watches_step_time: bool = False
    limit_field: str | None = "active_deadline_seconds"
    sets_grace: bool = True
    stop_note: str = ("Kubernetes sends SIGTERM to each pod's launch.sh (a deletion, an eviction, a drain, "
                      "activeDeadlineSeconds) and kills it terminationGracePeriodSeconds later, which the "
                      "TrainJob's runtime patch sets; a stopped launch.sh exits 143, a failure, so the Job never "
                      "counts the stop as done. Restarting is the ClusterTrainingRuntime's: a JobSet "
                      "failurePolicy.maxRestarts above 0 restarts every node, which resume together (Trainer "
                      "v2.3.0's TrainJob cannot patch it)")

    def time_limit_seconds(self, section: Any) -> int | None:
        return None if section is None else section.active_deadline_seconds

    def document(self, kind: str) -> DocumentFile:
        return step_document(TRAINJOB_FILE, kind, None)

    def job(self, request: StepRequest, spec: JobSpec, pins: ImagePins) -> KubeJob:
        k = spec.kubernetes
        assert k is not None  # the platform-section rule refuses a spec without it
        return KubeJob(
            file=self.document(request.kind).file, name=request.name, namespace=k.namespace, runtime=k.runtime,
            nodes=request.nodes, gpus_per_node=request.gpus_per_node, image=pins.kubernetes_image,
            claim=k.volume.claim, mount_path=request.mount_path, queue=k.queue,
            active_deadline_seconds=k.active_deadline_seconds, termination_grace_seconds=request.stop_grace_s,
            image_pull_secrets=tuple(k.image_pull_secrets),
        )

    def render(self, job: KubeJob, header: tuple[str, ...], generated_by: dict[str, str],
               script: str) -> Document:
        comments, body = trainjob_document(job, list(header), script)
        return Document("yaml", tuple(comments), body)

    def check(self, section: Any, facts: EngineFacts) -> Iterator[Finding]:
        name = facts.name
        if name is not None and not is_label(name):
            yield Finding("kubernetes-name", f"name ({name}) is not an RFC 1123 label, which the TrainJob's "
                          "name and its pods' names must be", ("name",), "end it with a letter or digit")
        checks = (("namespace", section.namespace, is_label, "an RFC 1123 label"),
                  ("runtime", section.runtime, is_subdomain, "an RFC 1123 subdomain"),
                  ("queue", section.queue, is_label_value, "a label value"))
        for field, value, ok, what in checks:
            if value is not None and not ok(value):
                yield Finding("kubernetes-name", f"kubernetes.{field} ({value}) is not {what}",
                              ("kubernetes", field), "lowercase letters, digits and '-', alphanumeric at both ends")
        if not section.runtime.startswith(TORCH_RUNTIME_PREFIX):
            yield Finding("kubernetes-runtime", f"kubernetes.runtime ({section.runtime}) is not a torch runtime: launch.sh "
                          "reads PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT, which only Kubeflow "
                          "Trainer's torch plugin sets (a ClusterTrainingRuntime with mlPolicy.torch)",
                          ("kubernetes", "runtime"), "use torch-distributed, or a torch ClusterTrainingRuntime of your "
                          "own named torch-…")
        for index, secret in enumerate(section.image_pull_secrets):
            if not is_subdomain(secret):
                yield Finding("kubernetes-name", f"kubernetes.image_pull_secrets[{index}] ({secret}) is not an RFC 1123 "
                              "subdomain, which a Secret's name is", ("kubernetes", "image_pull_secrets", index),
                              "lowercase letters, digits, '-' and '.'")
        if not section.image_pull_secrets:
            yield Finding("kubernetes-pull-secret", "kubernetes.image_pull_secrets is empty: the pods pull the image "
                          "from the tenant's registry without credentials, which a private registry refuses "
                          "(ImagePullBackOff)", ("kubernetes",),
                          "add image_pull_secrets: [NAME], a kubernetes.io/dockerconfigjson Secret in the namespace, "
                          "unless the nodes pull with credentials of their own", severity="warning")
        if not is_subdomain(section.volume.claim):
            yield Finding("kubernetes-name", f"kubernetes.volume.claim ({section.volume.claim}) is not an RFC 1123 "
                          "subdomain, which a PersistentVolumeClaim's name is", ("kubernetes", "volume", "claim"),
                          "lowercase letters, digits, '-' and '.'")


ENGINE = Kubernetes()


def is_label(name: str) -> bool:
    """An RFC 1123 label: at most 63 lowercase alphanumerics or '-', alphanumeric at both ends."""
    return len(name) <= 63 and re.fullmatch(DNS1123_LABEL, name) is not None


def is_subdomain(name: str) -> bool:
    """An RFC 1123 subdomain: labels joined by '.', at most 253 characters."""
    return len(name) <= 253 and re.fullmatch(DNS1123_SUBDOMAIN, name) is not None


def is_label_value(value: str) -> bool:
    """A label value: at most 63 characters, alphanumeric at both ends, '-', '_' and '.' inside."""
    return len(value) <= 63 and re.fullmatch(LABEL_VALUE, value) is not None


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
    trainer: dict[str, Any] = {"numNodes": job.nodes, "numProcPerNode": max(job.gpus_per_node, 1), "image": job.image}
    if job.gpus_per_node:  # a step on CPUs (prepare, download, export) asks for no GPU
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": job.gpus_per_node}}
    trainer["command"] = ["bash", "-c", launch_text]
    spec["trainer"] = trainer
    container = {"name": "node", "volumeMounts": [{"name": "shared", "mountPath": job.mount_path},
                                                 {"name": "dshm", "mountPath": "/dev/shm"}]}
    pod: dict[str, Any] = {"containers": [container], "volumes": [
        {"name": "shared", "persistentVolumeClaim": {"claimName": job.claim}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]}
    if job.termination_grace_seconds is not None:
        pod["terminationGracePeriodSeconds"] = job.termination_grace_seconds
    if job.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": name} for name in job.image_pull_secrets]
    spec["runtimePatches"] = [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}]
    comments = header + [
        f"The Kubeflow Trainer TrainJob: `kubectl apply -f {job.file}`"
        + (f" (namespace {job.namespace})" if job.namespace else "") + f"; the PersistentVolumeClaim {job.claim}",
        f"is the shared storage at {job.mount_path}; verify.sh checks the run root from any pod that mounts it.",
    ]
    return comments, {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": metadata, "spec": spec}
