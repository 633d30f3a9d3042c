"""`megatron-compile doctor SPEC [RUN_ROOT]`: why a run failed, from its own files, and what to change.

Reads what the generated launch command left in the run root (each worker's launch.log, train.log,
exit_status and runtime.txt; the checkpoint directory), classifies the failure with
compiler/megatron/failures.py, and prints each finding with its evidence line and the fix in the
spec's terms. A run with no finding gets verify.sh's verdict. Exit 0 only for a healthy run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, TextIO

from ..megatron.failures import Evidence, DoctorFacts, Finding, Fix, RunFiles, WorkerFiles, diagnose
from ..megatron.runfiles import (
    RUN_CHECKPOINT_DIR, EXIT_RECORD, LATEST_CHECKPOINT, LAUNCH_LOG, RUNTIME_RECORD, TRAIN_LOG, worker_log_dir,
)
from .doctor_read import RECORD_BYTES, latest_attempt, read_bounded, shadow_root
from ..one_pass import compile_spec
from ..diagnostics import Diagnostic, format_text, make_error, to_json_obj

EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class SpecFacts:
    """What the doctor needs from the spec: the facts, the spec's run root, its verify.sh."""

    facts: DoctorFacts
    run_root: str
    verify_sh: str | None


def spec_facts(path: str, display: str) -> SpecFacts | list[Diagnostic]:
    """The spec's facts through today's compiler (the one place that knows the compiler's types);
    its errors, located, when it does not compile."""
    result = compile_spec(path, display)
    if not result.ok or result.spec is None or result.plan is None:
        return [d for d in result.diagnostics if d.is_error] or [make_error("file-unreadable", "the spec does not "
                                                                           "compile", file=display)]
    spec, plan = result.spec, result.plan
    t = spec.training
    est = plan.pretrain.estimate if plan.pretrain is not None else None
    facts = DoctorFacts(
        workers=plan.parallel.workers, gpus_per_worker=plan.parallel.gpus_per_worker, tensor=plan.parallel.tensor,
        pipeline=plan.parallel.pipeline, context=plan.parallel.context, megatron_commit=plan.megatron.commit,
        megatron_root=plan.megatron.root, image=plan.image.reference,
        is_pretrain=result.facts is not None and result.facts.is_pretrain,
        train_iters=plan.pretrain.train_iters if plan.pretrain is not None else None,
        micro_batch=t.batch.micro if t.batch is not None else None,
        global_batch=t.batch.global_ if t.batch is not None else None,
        vocab_size=t.model.vocab_size if t.model is not None else None, precision=t.precision,
        lr=t.optimizer.lr if t.optimizer is not None else None,
        estimate_peak_mb=est.peak_mb if est is not None else None,
        estimate_static_mb=est.weights_and_optimizer_mb if est is not None else None,
        gpu_memory_gb=est.gpu_memory_gb if est is not None else None,
        loads_weights=t.resume or any(a.split("=", 1)[0] == "--pretrained-checkpoint" for a in t.args),
        resume=plan.launch.resume, default_master_port=plan.launch.default_master_port,
        split=t.data.split if t.data is not None else None,
        model=tuple((k, v) for k, v in (t.model.model_dump() if t.model is not None else {}).items()
                    if isinstance(v, int) and not isinstance(v, bool)),
        data_paths=tuple(p.prefix for p in result.facts.prepared or ()) if result.facts is not None and
        result.facts.prepared else (tuple(t.data.paths) if t.data is not None else ()),
    )
    files = result.files or {}
    return SpecFacts(facts, plan.run_root, files.get("verify.sh"))


def read_run(root: str, facts: DoctorFacts, bounded: dict[str, str] | None = None) -> RunFiles:
    """The run root's texts, laid out as the launch command writes them (nodes/node-K/ for several workers):
    each read bounded (doctor_read.py), the appended logs cut to their latest attempt, and the files that
    could not be read listed with the reason. BOUNDED collects the texts that are a large file's head and
    tail (relative path -> text)."""
    unreadable: list[Evidence] = []

    def read(base: str, name: str) -> str | None:
        record = name in (EXIT_RECORD, RUNTIME_RECORD)
        got = read_bounded(os.path.join(base, name), *((RECORD_BYTES, RECORD_BYTES) if record else ()))
        rel = os.path.relpath(os.path.join(base, name), root)
        if got.problem is not None:
            unreadable.append(Evidence(rel, 0, got.problem))
            if bounded is not None:
                bounded[rel] = ""  # verify.sh must not block on a FIFO or loop on a link either
        if got.bounded and bounded is not None and got.text is not None:
            bounded[rel] = got.text
        return got.text

    workers, launches = [], []
    for k in range(facts.workers):
        directory = worker_log_dir(k, facts.workers).rstrip("/")
        base = os.path.join(root, directory) if directory else root
        launch = read(base, LAUNCH_LOG)
        launches.append(sum(1 for x in (launch or "").splitlines() if x.startswith("launch.sh: started ")))
        workers.append(WorkerFiles(
            index=k, directory=directory, train_log=latest_attempt(read(base, TRAIN_LOG), "train"),
            launch_log=latest_attempt(launch, "launch"), exit_status=read(base, EXIT_RECORD),
            runtime=read(base, RUNTIME_RECORD),
        ))
    ckpt = os.path.join(root, RUN_CHECKPOINT_DIR)
    listing = []
    # the checkpoint's names only (never its contents); a bounded walk that does not follow links
    for dirpath, dirs, names in os.walk(ckpt, followlinks=False):
        for name in names:
            listing.append(os.path.relpath(os.path.join(dirpath, name), ckpt))
        if len(listing) > 200_000:
            break
    return RunFiles(root=root, workers=tuple(workers), checkpoint_files=tuple(sorted(listing)),
                    latest_checkpointed_iteration=read(ckpt, LATEST_CHECKPOINT), unreadable=tuple(unreadable),
                    launches=tuple(launches))


def run_verify(verify_sh: str | None, root: str) -> dict[str, Any] | None:
    """verify.sh --json on the run root: its verdict and checks (None without bash or a verify.sh)."""
    if verify_sh is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix="-verify.sh", delete=False) as f:
        f.write(verify_sh)
    try:
        # verify.sh may quote the run root's bytes: read its output as UTF-8 whatever they are
        proc = subprocess.run(["bash", f.name, "--json", root], capture_output=True, text=True, encoding="utf-8",
                              errors="replace", timeout=120)
        result = json.loads(proc.stdout)
        return result if isinstance(result, dict) else None
    except (OSError, subprocess.TimeoutExpired, ValueError):  # ValueError: JSONDecodeError and the like
        return None
    finally:
        os.unlink(f.name)


def verify_findings(verdict: dict[str, Any] | None) -> list[Finding]:
    """A run no failure explains, but that verify.sh fails: each failed check is evidence. A run verify.sh
    could not judge is not reported healthy either."""
    if verdict is None:
        return [Finding(
            "not-checked", "no failure was found in the logs, but verify.sh could not be run on the run root, so "
            "the run is not known to be healthy", (Evidence("verify.sh", 0, "(could not be run, or gave no verdict)"),),
            (Fix("(verify.sh)", "run the generated verify.sh on the run root by hand; bash is needed"),))]
    if verdict.get("passed", False):
        return []
    failed = [c for c in verdict.get("checks", []) if c.get("status") != "pass"]
    return [Finding(
        "verify-failed", f"no failure was found in the logs, but {len(failed)} of verify.sh's checks fail",
        tuple(Evidence("verify.sh", 0, f"FAIL {c['check']}: expected {c['expected']}, found {c['found']}")
              for c in failed),
        (Fix("(the failed checks)", "each names what was expected and what the run root holds"),),
    )]


def _text(out: TextIO, root: str, spec: str, findings: list[Finding], verdict: dict[str, Any] | None) -> None:
    out.write(f"doctor: {root} (spec {spec})\n")
    if not findings:
        checks = verdict.get("checks", []) if verdict else []
        out.write(f"healthy: verify.sh passed {len(checks)} of {len(checks)} checks\n")
        return
    # a stop that saved is no failure of the run, but it has not finished: say so first
    verdict_word = "STOPPED, SAVED" if findings[0].cause == "stopped-saved" else "FAILED"
    out.write(f"{verdict_word}: {len(findings)} finding{'s' if len(findings) != 1 else ''}; the first is the cause, "
              "the others follow from it or add to it\n")
    for i, f in enumerate(findings, 1):
        who = " ".join(x for x in (f"worker {f.worker}" if f.worker is not None else "",
                                   f"rank {f.rank}" if f.rank is not None else "") if x)
        out.write(f"\n{i}. [{f.cause}]{' (' + who + ')' if who else ''} {f.summary}\n")
        for e in f.evidence:
            where = f"{e.file}:{e.line}" if e.line else e.file
            out.write(f"   evidence {where}: {e.text}\n")
        for x in f.fixes:
            out.write(f"   fix {x.field}: {x.value}{' (' + x.why + ')' if x.why else ''}\n")
    if verdict is not None:
        failed = [c for c in verdict.get("checks", []) if c.get("status") != "pass"]
        out.write(f"\nverify.sh: {len(verdict.get('checks', [])) - len(failed)} of {len(verdict.get('checks', []))} "
                  "checks passed\n")


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    parser = argparse.ArgumentParser(prog="megatron-compile doctor",
                                     description="Say why a run failed, from its own files, and what to change in the spec.")
    parser.add_argument("spec", metavar="SPEC")
    parser.add_argument("run_root", nargs="?", metavar="RUN_ROOT", help="default: the spec's storage.run_root")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else EXIT_HEALTHY

    def fail(diags: list[Diagnostic], code: int) -> int:
        """The problems before any run is read: located diagnostics on stderr, or with --format json one object on
        stdout (as `size` and `calibrate` give theirs)."""
        if args.format == "json":
            json.dump({"ok": False, "spec": args.spec, "diagnostics": [to_json_obj(d) for d in diags]}, out, indent=2)
            out.write("\n")
        else:
            err.write(format_text(diags) + "\n")
        return code

    got = spec_facts(args.spec, args.spec)
    if isinstance(got, list):
        return fail(got, EXIT_USAGE)
    root = args.run_root or got.run_root
    if not os.path.isdir(root):
        message = f"no run root at {root}: the job never wrote there (storage.mount_path, storage.run_root)"
        return fail([make_error("file-unreadable", message, file=args.spec)], EXIT_UNHEALTHY)
    bounded: dict[str, str] = {}
    findings = diagnose(read_run(root, got.facts, bounded), got.facts)
    if bounded:  # verify.sh reads what the doctor read of the large logs (their head and tail), not the rest
        try:
            with tempfile.TemporaryDirectory(prefix="doctor-") as tmp:
                verdict = run_verify(got.verify_sh, shadow_root(root, bounded, os.path.join(tmp, "run")))
        except OSError:  # no view of the run root to give verify.sh: not checked (verify_findings says so)
            verdict = None
    else:
        verdict = run_verify(got.verify_sh, root)
    if not findings:
        findings = verify_findings(verdict)
    if args.format == "json":
        json.dump({"run_root": root, "spec": args.spec, "healthy": not findings,
                   "findings": [f.as_dict() for f in findings], "verify": verdict}, out, indent=2)
        out.write("\n")
    else:
        _text(out, root, args.spec, findings, verdict)
    return EXIT_HEALTHY if not findings else EXIT_UNHEALTHY
