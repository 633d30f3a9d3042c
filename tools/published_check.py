#!/usr/bin/env python3
"""The step-time model (compiler/megatron/timing.py) against published multi-GPU runs.

    python tools/published_check.py [CSV]      default: tests/fixtures/published/disclosed.csv

Each row (model, layout, batch, GPU, precision, stack, measured step time) becomes the model's inputs;
its GPU comes from gpus.py's table (the H200's measured rates scaled by the datasheet peak and HBM
bandwidth). The software stacks differ from the H200 runs (Transformer Engine and NeMo;
Megatron-DeepSpeed with fp16 and Apex's fused kernels), so each stack gets ONE factor on the GPU time,
and FP8 one factor on the GEMMs: fitted here on the rows of that stack, and judged leave-one-out (a
row's error comes from the factors fitted without it). Everything else (communication, bubble,
host costs) is what the H200 fit and the datasheets give. Decided before looking at any error.

Rows refused: those whose model the FLOP count does not port (none here) or whose layout is not one
Megatron accepts.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.megatron.flops import FlopsArgs  # noqa: E402
from compiler.megatron.gpus import GPUS  # noqa: E402
from compiler.megatron.comm_time import tp_collective_calls  # noqa: E402
from compiler.megatron.layer_time import FUSED_ATTENTION_SHARE, Model, _recomputed_fraction  # noqa: E402
from compiler.megatron.pretrain import padded_vocab_size  # noqa: E402
from compiler.megatron.schedule import bubble_fraction  # noqa: E402
from compiler.megatron.timing import Parallel, step_time  # noqa: E402

CSV = REPO / "tests" / "fixtures" / "published" / "disclosed.csv"


def stack_of(row: dict[str, str]) -> str:
    """te (Transformer Engine: NeMo, Megatron Core) or deepspeed (Megatron-DeepSpeed, fp16)."""
    return "te" if row["te"] == "yes" else "deepspeed"


def inputs(row: dict[str, str]) -> tuple[FlopsArgs, Parallel, float]:
    """(FlopsArgs, Parallel, parameters on the most loaded rank) of a published row."""
    i = lambda k: int(row[k])  # noqa: E731
    tp, pp, ep = i("tp"), i("pp"), i("ep")
    h, L, ffn, heads, groups = i("hidden"), i("num_layers"), i("ffn"), i("heads"), i("kv_heads")
    gated = row["activation"] in ("swiglu", "geglu")
    experts = int(row["experts"]) if row["experts"] else None
    vocab = padded_vocab_size(i("vocab"), 128, tp)
    fa = FlopsArgs(num_layers=L, hidden_size=h, num_attention_heads=heads, kv_channels=h // heads, ffn_hidden_size=ffn,
                   seq_length=i("seq"), padded_vocab_size=vocab, group_query_attention=groups != heads,
                   num_query_groups=groups if groups != heads else None, swiglu=gated, num_experts=experts,
                   moe_router_topk=int(row["topk"]) if row["topk"] else 2,
                   moe_ffn_hidden_size=int(row["moe_ffn"]) if row["moe_ffn"] else None)
    vp = i("vp")
    overlap = row["overlap"].split(";")
    te = row["te"] == "yes"
    par = Parallel(
        tensor=tp, pipeline=pp, context=i("cp"), data=i("dp"), micro_batch=i("micro"), global_batch=i("global"),
        gpus_per_worker=i("gpus_per_node"), workers=max(1, i("gpus") // i("gpus_per_node")), expert=ep,
        virtual_pipeline=vp if vp > 1 else None, sequence_parallel=row["sequence_parallel"] == "yes" and tp > 1,
        distributed_optimizer=row["distributed_optimizer"] == "yes",
        recompute=None if row["recompute"] == "none" else row["recompute"], recompute_method="uniform",
        recompute_num_layers=1, overlap_grad_reduce="grad" in overlap, overlap_param_gather="param" in overlap,
        tp_comm_overlap="tp" in overlap, rdma=True, local_attention=not te, fused_kernels=True,
        # the published systems' fused attention: the 0.6 assumption, not the share the H200's TE build
        # ran at (layer_time.FUSED_ATTENTION_SHARE; docs/performance-model.md)
        fused_attention_share=FUSED_ATTENTION_SHARE, fused_attention_score_s=0.0,
        precision=row["precision"], stack=stack_of(row),
        model=Model(bias=not te, rope=row["position"] == "rope", learned_position=row["position"] == "learned_absolute",
                    layernorm=row["normalization"] == "LayerNorm", dtype="fp16" if row["precision"] == "fp16" else "bf16"))
    # parameters on the most loaded rank: the layers' share, the embedding and (untied) the output layer
    dense = L * (2 * h * h * (1 + groups / heads) + ffn * h * (3 if gated else 2))
    if experts:
        dense = L * (2 * h * h * (1 + groups / heads) + experts / ep * ffn * h * (3 if gated else 2))
    params = dense / pp / tp + vocab * h / tp * (2 if (pp == 1 and row["untied"] == "yes") else 1)
    return fa, par, params


class Check(NamedTuple):
    id: str
    stack: str
    precision: str
    measured: float
    base: float  # the step with factor 1
    gpu: float  # its GPU-bound part
    gemm_share: float  # of the GPU-bound part, the GEMMs' (what FP8's factor scales)
    row: dict[str, str]
    slots: float  # micro batches on the critical path, m + (pp - 1) / v: what a per-micro-batch host cost multiplies
    passes: float  # a stage's layer passes on those slots (a recomputed forward a third of one): a per-layer host cost's
    calls: float  # TP collective calls on those slots: what a host cost per collective call multiplies
    tp: float  # the TP collectives' exposed time: on the GPU's stream, beside the compute, not the host's


def _base(row: dict[str, str]) -> Check:
    fa, par, params = inputs(row)
    gpu = GPUS[row["gpu"]]
    par = par._replace(precision="bf16" if par.precision == "fp8" else par.precision)  # FP8 is scaled below
    # the H200's host figures (TE's layers' host time, the iteration's) are the lent machine's CPU and TE
    # build: the published systems' host costs are the per-stack figures fitted here instead. The H200's
    # host per micro batch stays on the host side of each micro batch's max(GPU, host), beside the launches
    # (as Megatron's schedule does that work per micro batch); the fitted per-micro-batch cost adds to it
    step = step_time(fa, par, gpu, params, stack=1.0, te_host_per_layer=0.0,
                     host_per_iteration=0.0)
    # GPU-bound part: the compute and bubble terms (what a stack factor scales)
    share = max(s.gemm_share for s in step.stages)
    # the schedule's critical path in micro batches: m and the bubble's (pp - 1) / v (schedule.py)
    slots = par.microbatches * (1 + bubble_fraction(par.pipeline, par.virtual_pipeline, par.microbatches))
    layers = fa.num_layers // par.pipeline
    passes = slots * layers * (4 / 3 if par.recompute == "full" else 1.0)
    # the host's torch.distributed calls for TP (none with --tp-comm-overlap: TE's userbuffers)
    calls = slots * layers * tp_collective_calls(par, _recomputed_fraction(par, layers))
    tp = sum(t.seconds for t in step.terms if t.name in ("tp", "tp-exposed") and t.exposed)
    return Check(row["id"], par.stack, row["precision"], float(row["measured_step_s"]), step.seconds,
                 step.term("compute").seconds + step.term("bubble").seconds, share, row, slots, passes, calls, tp)


# The host costs each stack's fit may use, and what each multiplies: per micro batch on the critical path,
# per layer pass, per TP collective call (the host's side of torch.distributed's call: the autograd
# function, ProcessGroupNCCL's stream and event work, NCCL's enqueue), per call and other rank of its group
# (a collective completes when every rank of the group has issued it, so in a host-bound step each call
# waits for the slowest of the group's hosts; with rare delays on each host, the expected wait grows with
# the other ranks that can be late: the operating-system noise of bulk-synchronous programs, Petrini et al.,
# SC'03, and Hoefler et al., SC'10), per iteration (the step's own host work; the H200's
# HOST_PER_ITERATION is the lent machine's, as its host per micro batch is); each >= 0.
HOSTS = ("host", "layer-host", "call-host", "peer-host", "iteration-host")
SIDE = len(HOSTS) - 1  # all but the iteration's are the micro batches' host side
# The first four are the host's side of the micro batches, the GPU's side is the compute and bubble (at the
# stack's factor) and the TP collectives, which run on the GPU's stream behind the compute they reduce. The
# host enqueues kernels ahead of the GPU, but not across a micro batch: both stacks sync the host with the
# GPU at every micro batch (Megatron-DeepSpeed's pretrain_gpt.py get_batch -> tensor_parallel.broadcast_data,
# whose _build_key_size_numel_dictionary copies the sizes back with .cpu(); Megatron Core's loss function
# checks the loss for NaN on the host, core_r0.8.0 pretrain_gpt.py:136-138, the pinned commit's
# rerun_state_machine.validate_result), and inside one the forward's host work cannot run ahead of the
# backward's GPU work it has not issued yet. So the two sides overlap only in part: max(GPU, host) + OVERLAP x min(GPU, host),
# OVERLAP fitted per stack in [0, 1] (0: the shorter side hides whole; 1: they add, the form before).
# The iteration's host work stays outside: the optimizer step waits for the GPU (the gradient norm's and
# the loss scaler's syncs).
OVERLAPS = (0.0, 0.25, 0.5, 0.75, 1.0)  # the coarse grid; then refined by 0.1 and 0.05 around the best


def _counts(c: Check) -> tuple[float, ...]:
    return c.slots, c.passes, c.calls, c.calls * (int(c.row["tp"]) - 1), 1.0


def predict(c: Check, factor: float, fp8: float, hosts: tuple[float, ...] = (0.0,) * 5,
            overlap: float = 1.0) -> float:
    base, g = c.base, c.gpu
    scaled = g * factor * (1 - c.gemm_share + c.gemm_share * fp8) if c.precision == "fp8" else g * factor
    gpu = scaled + c.tp
    n = _counts(c)
    host = sum(h * k for h, k in zip(hosts[:SIDE], n[:SIDE]))
    return base - g - c.tp + max(gpu, host) + overlap * min(gpu, host) + hosts[SIDE] * n[SIDE]


def _sse(cs: list[Check], factor: float, fp8: float, hosts: tuple[float, ...] = (0.0,) * 5,
         overlap: float = 1.0) -> float:
    return sum((predict(c, factor, fp8, hosts, overlap) / c.measured - 1) ** 2 for c in cs)


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination of a small dense system; None when singular."""
    n = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        if abs(m[p][i]) < 1e-300:
            return None
        m[i], m[p] = m[p], m[i]
        for r in range(n):
            if r != i:
                k = m[r][i] / m[i][i]
                m[r] = [x - k * y for x, y in zip(m[r], m[i])]
    return [m[i][n] / m[i][i] for i in range(n)]


def _least_squares(cols: list[list[float]], target: list[float]) -> list[float] | None:
    a = [[sum(x * y for x, y in zip(ci, cj)) for cj in cols] for ci in cols]
    b = [sum(x * t for x, t in zip(ci, target)) for ci in cols]
    return _solve(a, b)


Fit = tuple[float, float, tuple[float, ...], float]  # (sse, GPU factor, host costs in HOSTS' order, overlap)


def _fit_sides(cs: list[Check], overlap: float, sides: list[bool]) -> Fit | None:
    """The factor and host costs minimising the summed squared relative error with each row's longer side
    given (sides: the GPU's): linear least squares, host costs kept >= 0 (every subset of them tried where
    the full solution has one negative, the best fit with none)."""
    cols: list[list[float]] = [[] for _ in range(len(HOSTS) + 1)]
    target = []
    for c, gpu_longer in zip(cs, sides):
        wg, wh = (1.0, overlap) if gpu_longer else (overlap, 1.0)
        n = _counts(c)
        cols[0].append(wg * c.gpu / c.measured)
        for k in range(SIDE):
            cols[k + 1].append(wh * n[k] / c.measured)
        cols[SIDE + 1].append(n[SIDE] / c.measured)
        target.append(1 - (c.base - c.gpu - c.tp + wg * c.tp) / c.measured)
    full = _least_squares(cols, target)
    subsets = [(True,) * len(HOSTS)] if full is not None and min(full) >= 0 else \
        list(itertools.product((True, False), repeat=len(HOSTS)))
    best: Fit | None = None
    for keep in subsets:
        used = [0] + [k + 1 for k in range(len(HOSTS)) if keep[k]]
        sol = _least_squares([cols[k] for k in used], target)
        if sol is None or any(v < 0 for v in sol):
            continue
        v = dict(zip(used, sol))
        hosts = tuple(v.get(k + 1, 0.0) for k in range(len(HOSTS)))
        cand = (_sse(cs, v[0], 1.0, hosts, overlap), v[0], hosts, overlap)
        if best is None or cand[0] < best[0]:
            best = cand
    return best


def _fit_overlap(cs: list[Check], overlap: float, start: Fit) -> Fit:
    """At one overlap: which side is longer depends on the fit; assign, solve, repeat until the sse stops
    falling (a few rounds), from `start`'s assignment."""
    best = start if overlap == start[3] else None
    factor, hosts = start[1], start[2]
    for _ in range(6):
        sides = [c.gpu * factor + c.tp >= sum(h * k for h, k in zip(hosts[:SIDE], _counts(c)[:SIDE])) for c in cs]
        fit = _fit_sides(cs, overlap, sides)
        if fit is None or (best is not None and fit[0] >= best[0] - 1e-15):
            break
        best, factor, hosts = fit, fit[1], fit[2]
    assert best is not None or start[3] != overlap
    return best if best is not None else (_sse(cs, factor, 1.0, hosts, overlap), factor, hosts, overlap)


def fit_factor(cs: list[Check]) -> Fit:
    """(sse, GPU factor, host costs in HOSTS' order, overlap) minimising the summed squared relative error:
    at overlap 1 (the sides add) one linear least squares; at the others the side assignment iterated, over
    OVERLAPS then refined around the best."""
    additive = _fit_sides(cs, 1.0, [True] * len(cs))
    assert additive is not None
    fits = {1.0: additive}
    for o in OVERLAPS[:-1]:
        fits[o] = _fit_overlap(cs, o, additive)
    for step in (0.1, 0.05):
        best = min(fits.values(), key=lambda f: f[0])
        for o in (round(best[3] - step, 2), round(best[3] + step, 2)):
            if 0.0 <= o <= 1.0 and o not in fits:
                fits[o] = _fit_overlap(cs, o, best)
    return min(fits.values(), key=lambda f: (f[0], -f[3]))


def fit_all(cs: list[Check], full: dict[str, Any] | None = None, stacks: set[str] | None = None) -> dict[str, Any]:
    """Per stack: its GPU factor, host costs and overlap (its bf16/fp16 rows); then FP8's GEMM factor on the
    FP8 rows. With `full` and `stacks`, only those stacks are refitted (a left-out row changes its own
    stack's fit and FP8's, nothing else)."""
    out: dict[str, Any] = dict(full or {})
    for stack in sorted(stacks if stacks is not None else {c.stack for c in cs}):
        rows = [c for c in cs if c.stack == stack and c.precision != "fp8"]
        _, out[stack], out[stack + "-hosts"], out[stack + "-overlap"] = fit_factor(rows)
    fp8 = [c for c in cs if c.precision == "fp8"]
    if fp8:
        te, hosts, overlap = out["te"], out["te-hosts"], out["te-overlap"]
        out["fp8-gemm"] = min((_sse(fp8, te, r / 100, hosts, overlap), r / 100) for r in range(20, 151))[1]
    return out


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for k, i in enumerate(order):
            r[i] = k
        return r
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1))


# what a row's configuration is (everything but its name, source, measurement and grouping): rows of one
# configuration measured twice (the dgxc releases) would inform each other's leave-one-out
_NOT_CONFIG = {"id", "source", "measured_step_s", "derived", "sweep", "weak_group", "notes"}


def _kin(c: Check, d: Check) -> bool:
    """D is C's own configuration, C's weak-scaling series or C's sweep (the other layouts of its model and
    batch, which a published run the check has never seen would not come with): left out with C in the
    stricter check."""
    same = all(c.row[k] == d.row[k] for k in c.row if k not in _NOT_CONFIG)
    return same or any(bool(c.row[k]) and d.row[k] == c.row[k] for k in ("weak_group", "sweep"))


def _predict_without(c: Check, full: dict[str, Any], rest: list[Check]) -> float:
    """C's step time from a fit on REST only (a left-out row changes its own stack's fit and FP8's)."""
    f = fit_all(rest, full, {c.stack} if c.precision != "fp8" else set())
    return predict(c, f[c.stack], f.get("fp8-gemm", 1.0), f[c.stack + "-hosts"], f[c.stack + "-overlap"])


def check(path: Path = CSV) -> dict[str, Any]:
    rows = list(csv.DictReader(path.open()))
    cs, refused = [], []
    for row in rows:
        try:
            cs.append(_base(row))
        except (NotImplementedError, ZeroDivisionError, ValueError) as exc:
            refused.append((row["id"], repr(exc)))
    full = fit_all(cs)
    out = []
    for i, c in enumerate(cs):
        pred = _predict_without(c, full, cs[:i] + cs[i + 1:])
        out.append({"id": c.id, "stack": c.stack, "precision": c.precision, "measured_s": c.measured, "loo_s": pred,
                    "error": pred / c.measured - 1, "sweep": c.row["sweep"], "weak_group": c.row["weak_group"],
                    "gpus": int(c.row["gpus"])})
    errs = sorted(abs(o["error"]) for o in out)
    # stricter: each row predicted without its configuration's other measurements, its weak-scaling series and its sweep
    strict = sorted(abs(_predict_without(c, full, [d for d in cs if d is not c and not _kin(c, d)]) / c.measured - 1)
                    for c in cs)
    sweeps: dict[str, list[dict[str, Any]]] = {}
    for o in out:
        if o["sweep"]:
            sweeps.setdefault(o["sweep"], []).append(o)
    rho = {s: spearman([o["loo_s"] for o in v], [o["measured_s"] for o in v]) for s, v in sweeps.items() if len(v) >= 4}
    weak: dict[str, list[dict[str, Any]]] = {}
    for o in out:
        if o["weak_group"]:
            weak.setdefault(o["weak_group"], []).append(o)
    scaling = {}
    for g, v in weak.items():
        v = sorted(v, key=lambda o: o["gpus"])
        base = v[0]
        # weak-scaling efficiency: the smallest run's step over each larger run's, measured and modelled
        scaling[g] = max(abs(base["measured_s"] / o["measured_s"] - base["loo_s"] / o["loo_s"]) for o in v[1:]) if len(v) > 1 else 0.0
    return {"rows": out, "refused": refused, "factors": full, "median": statistics.median(errs), "max": errs[-1],
            "strict_median": statistics.median(strict), "strict_max": strict[-1],
            "spearman": rho, "weak_scaling_pp": scaling, "total": len(rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", type=Path, default=CSV, help="published runs (default: %(default)s)")
    r = check(parser.parse_args(argv).csv)
    for o in r["rows"]:
        print(f"{o['id']:<48} {o['measured_s']:8.3f} {o['loo_s']:8.3f} {o['error'] * 100:+7.1f}%")
    print("factors (all rows):", {k: (tuple(round(x * 1e3, 3) for x in v) if isinstance(v, tuple) else round(v, 3))
                                  for k, v in r["factors"].items()}, "(host costs in ms:", ", ".join(HOSTS) + ")")
    print(f"median |err| {r['median'] * 100:.1f}%  max {r['max'] * 100:.1f}%  refused {len(r['refused'])}/{r['total']}")
    print("spearman:", {k: round(v, 2) for k, v in r["spearman"].items()})
    print("weak scaling (pp):", {k: round(v * 100, 1) for k, v in r["weak_scaling_pp"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
