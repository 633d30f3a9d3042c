"""Detectors of what stops a run before or while it starts: workers that never ran, Megatron-LM missing
or not importable, the dataset helper's build, GPU and worker counts, the launch command's refusals,
and the rendezvous.

Every pattern here was seen in a real run of a generated launch command (tests/fixtures/failed-runs);
each names the fixture that shows it.
"""

from __future__ import annotations

import re
from typing import Iterator

from .failures_logs import (
    Detector, Evidence, DoctorFacts, Finding, Fix, RunFiles, find, find_all, launch_lines, registry, to_int,
    train_lines,
)

DETECTORS: list[Detector] = []
detector = registry(DETECTORS)


@detector
def worker_missing(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """A worker whose launch command left nothing at all: it never started, or not with this run root."""
    if len(files.workers) < 2:
        return
    for w in files.workers:
        if all(x is None for x in (w.launch_log, w.train_log, w.exit_status, w.runtime)):
            others = [o for o in files.workers if o is not w and o.launch_log is not None]
            if not others:
                continue
            yield Finding(
                "worker-never-started",
                f"worker {w.index} left nothing under {w.directory}/: its launch command never ran with this "
                "run root (the platform did not start it, or it started with another storage.run_root)",
                (Evidence(w.path("launch.log"), 0, "(absent)"),),
                (Fix("resources.workers", f"{facts.workers}: the job must start this many workers, all of them "
                     "with the same launch command", "every worker writes its own nodes/node-K/launch.log"),),
                worker=w.index,
            )


@detector
def megatron_missing(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    # launch.sh: "Megatron-LM is not at $MEGATRON_ROOT" (fixtures cpu-megatron-missing, gpu-megatron-missing)
    for w in files.workers:
        line = find(launch_lines(w), r"launch\.sh: Megatron-LM is not at ")
        if line:
            yield Finding(
                "megatron-missing", f"Megatron-LM is not in the image at {facts.megatron_root}",
                (line.evidence(),),
                (Fix("megatron.root", "the directory where the image holds Megatron-LM (the Dockerfile copies it "
                     f"to megatron.root; now {facts.megatron_root})"),
                 Fix("image.tag", f"an image built from this spec (now {facts.image or 'the spec image'}), not "
                     "one without Megatron-LM")),
                worker=w.index,
            )


# `^(?>.*?A).*B` is `A.*B` in linear time (failures_causes.SHAPE says why)
PROBE_FAILED = r"^(?>.*?launch\.sh: the runtime probe ).* failed"


@detector
def megatron_not_importable(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    # The runtime probe: "ModuleNotFoundError: No module named 'megatron'" (cpu-megatron-not-importable)
    for w in files.workers:
        lines = launch_lines(w)
        line = find(lines, r"No module named '?megatron") or find(lines, PROBE_FAILED)
        if line:
            ev = [line.evidence()]
            die = find(lines, PROBE_FAILED)
            if die and die is not line:
                ev.append(die.evidence())
            yield Finding(
                "megatron-not-importable",
                "`import megatron.core` failed before training: Megatron-LM is not on the worker's Python path",
                tuple(ev),
                (Fix("image (Dockerfile ENV)", f"PYTHONPATH={facts.megatron_root}: an image built from this spec "
                     "sets it; a job environment that overrides PYTHONPATH must keep it"),
                 Fix("megatron.root", f"where the image holds Megatron-LM (now {facts.megatron_root})")),
                worker=w.index,
            )


HELPER_CAUSES = (
    # (pattern in make's output, cause, what is missing); seen in cpu-no-compiler, cpu-no-pybind11
    (r"make: (g\+\+|c\+\+|cc|gcc): (No such file or directory|[Cc]ommand not found)", "helper-build-no-compiler",
     "a C++ compiler (g++)"),
    (r"pybind11/pybind11\.h: No such file or directory|No module named pybind11", "helper-build-no-pybind11",
     "pybind11 (the Python package, for its headers)"),
    (r"Python\.h: No such file or directory", "helper-build-no-python-headers", "the Python headers (python3-dev)"),
    (r"make: (command )?not found|make: No such file", "helper-build-no-make", "make"),
)


@detector
def helper_build(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """Megatron's C++ dataset helper (megatron/core/datasets/Makefile) did not build."""
    for w in files.workers:
        lines = launch_lines(w)
        die = find(lines, r"launch\.sh: building Megatron's dataset helper failed")
        error = find(lines, r"^make: \*\*\* .*Error \d+")
        if not die and not error:
            continue
        for pattern, cause, missing in HELPER_CAUSES:
            line = find(lines, pattern)
            if line:
                break
        else:
            cause, missing, line = "helper-build-failed", "what make's output names", None
        ev = tuple(x.evidence() for x in (line, error, die) if x is not None)
        yield Finding(
            cause, f"Megatron's C++ dataset helper did not build: the image lacks {missing}", ev,
            (Fix("image.base", "an image with make, g++, the Python headers and pybind11 (the NGC PyTorch images "
                 f"have them); the job ran {facts.image or 'the spec image'}"),),
            worker=w.index,
        )


@detector
def gpu_count(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    # launch.sh's nvidia-smi check (cpu-gpu-count, gpu-too-many-gpus)
    for w in files.workers:
        lines = launch_lines(w)
        line = find(lines, r"launch\.sh: the spec asks for [0-9]+ GPUs per worker, but nvidia-smi lists [0-9]+")
        none = find(lines, r"launch\.sh: nvidia-smi failed")
        m = re.search(r"lists ([0-9]+)", line.text) if line else None
        seen = to_int(m.group(1)) if m else None
        if line and seen is not None:  # a count not read as a number: the line is not launch.sh's
            yield Finding(
                "gpu-count-mismatch",
                f"worker {w.index} has {seen} GPU(s), the spec asks for {facts.gpus_per_worker} per worker",
                (line.evidence(),),
                (Fix("resources.gpus_per_worker", f"{seen} (what the worker has), with parallelism that divides "
                     f"{seen * facts.workers} ranks" if seen else "a worker with GPUs"),
                 Fix("resources.worker_flavor", f"a flavor with {facts.gpus_per_worker} GPUs per worker")),
                worker=w.index,
            )
        elif none:
            yield Finding("no-gpu", f"nvidia-smi failed on worker {w.index}: it sees no GPU", (none.evidence(),),
                          (Fix("resources.worker_flavor", "a GPU flavor; the worker has no usable driver"),),
                          worker=w.index)


@detector
def launch_refusals(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """The launch command's other refusals: a run root already used, the platform's worker count, storage."""
    for w in files.workers:
        lines = launch_lines(w)
        reused = find(lines, r"^(?>.*?launch\.sh: ).*already exists: an earlier run used this run root")
        if reused:
            yield Finding(
                "run-root-reused",
                "a launch found an earlier run's train.log in this run root and refused to start: the results "
                "here are the earlier run's",
                (reused.evidence(),),
                (Fix("storage.run_root", "a directory of its own for this run (one directory per run)"),
                 Fix("training.resume", "true, only if this run is meant to continue the earlier one")),
                worker=w.index,
            )
        workers = find(lines, r"launch\.sh: the spec asks for \d+ workers, but the platform started")
        if workers:
            yield Finding("worker-count-mismatch", "the platform started another number of workers than the spec "
                          "asks for", (workers.evidence(),),
                          (Fix("resources.workers", "the job's worker count (job.json's is generated from it: "
                               "submit the regenerated job.json)"),), worker=w.index)
        storage = find(lines, r"launch\.sh: cannot create |Read-only file system|Permission denied")
        if storage:
            yield Finding("storage-not-writable", "the run root could not be written", (storage.evidence(),),
                          (Fix("storage.mount_path", "the shared storage the job mounts writable"),
                           Fix("storage.run_root", "a directory under it")), worker=w.index)
        commit = find(lines, r"MEGATRON_COMMIT is required")
        if commit:
            yield Finding("megatron-commit-unset", "the image does not set MEGATRON_COMMIT", (commit.evidence(),),
                          (Fix("image.tag", "an image built from this spec (its Dockerfile sets MEGATRON_COMMIT="
                               f"{facts.megatron_commit})"),), worker=w.index)


@detector
def launches_on_one_root(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """More than one launch on the run root of a spec that does not resume: the root is shared."""
    if facts.resume:
        return
    for w in files.workers:
        starts = find_all(launch_lines(w), r"^launch\.sh: started ")
        count = files.launches[w.index] if w.index < len(files.launches) else len(starts)
        if count > 1 and not find(launch_lines(w), r"already exists: an earlier run used this run root"):
            yield Finding("run-root-reused", f"{count} launches used this run root; a run root holds one run",
                          tuple(s.evidence() for s in starts),
                          (Fix("storage.run_root", "a directory of its own for each run"),), worker=w.index)


@detector
def rendezvous(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    # torchrun's static rendezvous: "DistStoreError: Timed out after 21 seconds waiting for clients. 1/2
    # clients joined." (cpu-rendezvous-timeout); a worker that cannot reach the master: DistNetworkError
    for w in files.workers:
        lines = train_lines(w)
        line = find(lines, r"Timed out after \d+ seconds waiting for clients|RendezvousTimeoutError|"
                           r"DistNetworkError|Connection refused|Name or service not known|"
                           r"Socket Timeout|^(?>.*?failed to connect to ).*:\d+")
        if not line:
            continue
        m = re.search(r"(\d+)/(\d+) clients joined", line.text)
        joined = f" ({m.group(1)} of {m.group(2)} workers joined)" if m else ""
        missing = [o.index for o in files.workers if o.launch_log is None and o.train_log is None]
        who = f"; worker(s) {', '.join(map(str, missing))} left nothing in the run root" if missing else ""
        yield Finding(
            "rendezvous-timeout",
            f"multi-worker initialisation did not complete on worker {w.index}{joined}{who}",
            (line.evidence(),),
            (Fix("resources.workers", f"{facts.workers}: the platform must start exactly this many workers "
                 "(NNODES = WORLD_SIZE)"),
             Fix("platform: RANK / MASTER_ADDR / MASTER_PORT", "each worker a distinct RANK below the worker count, "
                 "all the same MASTER_ADDR (worker 0) and MASTER_PORT "
                 f"(default {facts.default_master_port}), reachable from every worker"),
             Fix("resources.gpus_per_worker", f"{facts.gpus_per_worker}: the same on every worker"),
             Fix("resources.rdma", "the network between the workers (RDMA) when the workers can reach each "
                 "other only through it")),
            worker=w.index,
        )
