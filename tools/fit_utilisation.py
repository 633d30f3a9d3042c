"""Fit the step-time model's calibration on measured runs, check it on others, write the record.

    python tools/fit_utilisation.py [--root CHECKOUT] [--write]

Each measured configuration is tests/fixtures/measurements/<name>/train.log (Megatron's own log of a
run of the compiled launch.sh) with its spec tests/e2e/mem-<name>.yaml; tools/measurements.py reads
the logs, and its median of "elapsed time per iteration" over the steady iterations is the figure.

The model is linear in its four unknowns once a run's layout is fixed (compiler/megatron/timing.py):

    measured - (optimizer + communication)
        = (1 + bubble) × (C / utilisation + bytes_per_score × A + elementwise_bytes × E + logits)
          + overhead_ms × 1 ms

with C, A, E the compute, score and elementwise work of the run at unit constants. The fit takes
every other configuration in name order, minimises the squared relative error over them (weighted
least squares in the four, each kept >= 0), and the other
half checks the result. --write puts the fit into timing.py's CALIBRATION (between the BEGIN FIT and
END FIT markers) and regenerates docs/performance-model.md.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.megatron.gpus import GPUS, LINK_EFFICIENCY, worker_network  # noqa: E402
from compiler.megatron.timing import (  # noqa: E402
    HBM_EFFICIENCY, LOGITS_BYTES_PER_ELEMENT, Calibration, StepTime, spec_step_time,
)

TOLERANCE = 0.15  # the acceptance: within 15 % of the measured median
MODULE = REPO / "compiler" / "megatron" / "timing.py"
DOC = REPO / "docs" / "performance-model.md"
# The terms whose constants the fit finds, in the order of its unknowns (1/utilisation, bytes per
# score, elementwise bytes, overhead ms), and the per-microbatch work the bubble scales.
FITTED = ("compute", "attention-memory", "elementwise", "overhead")
BUSY = ("compute", "attention-memory", "elementwise", "logits-memory")
UNIT = Calibration(1.0, 1.0, 1.0, "unit", False, 1.0)


class Measured(NamedTuple):
    name: str
    spec: str  # path of the spec, relative to the repo when inside it
    median_ms: float
    iterations: int  # steady iterations the median is over
    step_unit: StepTime  # the model at unit constants: its terms are the basis of the fit
    gpu: str


def _measurements(root: Path):  # type: ignore[no-untyped-def]
    """tools/measurements.py of the checkout that holds the logs (this one once branch measure is merged)."""
    import importlib.util

    path = root / "tools" / "measurements.py"
    spec = importlib.util.spec_from_file_location("measurements", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise SystemExit(f"{path} not found: the measurement parser comes with the logs")
    module = importlib.util.module_from_spec(spec)
    sys.modules["measurements"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def load(root: Path) -> list[Measured]:
    """Every configuration of ROOT/tests/fixtures/measurements with a spec ROOT/tests/e2e/mem-<name>.yaml
    and a steady median (tools/measurements.py's: iterations after its WARMUP_ITERATIONS)."""
    from compiler.one_pass import compile_spec

    parser = _measurements(root)
    out: list[Measured] = []
    for m in parser.collect(root / "tests" / "fixtures" / "measurements"):
        spec = root / "tests" / "e2e" / f"mem-{m.config}.yaml"
        if not spec.is_file() or m.median_ms_per_iteration is None:
            print(f"skip {m.config}: {'no spec' if not spec.is_file() else 'no steady iterations'}", file=sys.stderr)
            continue
        result = compile_spec(str(spec), spec.name, render_files=False)
        if result.spec is None:
            print(f"skip {m.config}: the spec does not validate", file=sys.stderr)
            continue
        step = spec_step_time(result.spec, GPUS["h200"], calibration=UNIT)
        if step is None:
            print(f"skip {m.config}: no estimate", file=sys.stderr)
            continue
        steady = max(0, m.iterations_logged - parser.WARMUP_ITERATIONS)
        out.append(Measured(m.config, f"tests/e2e/mem-{m.config}.yaml", m.median_ms_per_iteration, steady, step,
                            "h200"))
    return out


# A run from another day already on main: the same small GPT, but 4 microbatches per iteration and
# log interval 5, so its lines at iterations 1 and 5 average the warm-up in; the median is over the
# lines from iteration 10 on. An independent check of the microbatch handling; never fitted on.
EXTRA_RUN = ("h200-pretrain-tp1-run", "tests/fixtures/h200-pretrain-tp1-run/train.log", "specs/pretrain-mock.yaml", 10)


def extra_check() -> Measured | None:
    """EXTRA_RUN as a Measured, or None where this checkout lacks it."""
    from compiler.one_pass import compile_spec

    name, log, spec, first = EXTRA_RUN
    if not (REPO / log).is_file() or not (REPO / spec).is_file():
        return None
    text = (REPO / log).read_text(encoding="utf-8", errors="replace")
    times = [float(ms) for it, ms in re.findall(r" iteration +(\d+)/ *\d+ \|.*?per iteration \(ms\): ([\d.]+)", text)
             if int(it) >= first]
    result = compile_spec(str(REPO / spec), spec, render_files=False)
    step = spec_step_time(result.spec, GPUS["h200"], calibration=UNIT) if result.spec is not None else None
    if not times or step is None:
        return None
    import statistics

    return Measured(name, spec, round(statistics.median(times), 2), len(times), step, "h200")


def _basis(m: Measured) -> tuple[list[float], float]:
    """([C, A, E, O], fixed): each fitted term's seconds at a unit constant (the bubble's share of it
    included), and the seconds no fitted constant touches; the model is Σ x·column + fixed."""
    t = {term.name: term for term in m.step_unit.terms}
    busy = sum(t[name].seconds for name in BUSY)
    bubble = t["bubble"].seconds / busy if busy else 0.0
    columns = [t[name].seconds * (1 + bubble if name in BUSY else 1) for name in FITTED]
    fixed = sum(term.seconds for term in m.step_unit.terms
                if term.exposed and term.name not in FITTED + ("bubble",)) + t["logits-memory"].seconds * bubble
    return columns, fixed


def _solve(rows: list[list[float]], ys: list[float], weights: list[float], use: tuple[int, ...]) -> list[float] | None:
    """Weighted least squares over the columns in `use` (normal equations, Gaussian elimination)."""
    n = len(use)
    a = [[sum(w * r[i] * r[j] for r, w in zip(rows, weights)) for j in use] for i in use]
    b = [sum(w * r[i] * y for r, y, w in zip(rows, ys, weights)) for i in use]
    for col in range(n):
        pivot = max(range(col, n), key=lambda k: abs(a[k][col]))
        if abs(a[pivot][col]) < 1e-300:
            return None
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for k in range(n):
            if k != col:
                f = a[k][col] / a[col][col]
                a[k] = [x - f * y for x, y in zip(a[k], a[col])]
                b[k] -= f * b[col]
    x = [0.0] * len(rows[0])
    for i, col in enumerate(use):
        x[col] = b[i] / a[i][i]
    return x


def fit(rows: list[list[float]], ys: list[float], totals: list[float]) -> list[float]:
    """[1/utilisation, bytes per score, elementwise bytes, overhead ms] >= 0 minimising
    Σ((model - measured)/measured)²: the best non-negative solution over the subsets of columns (the
    compute column always in)."""
    weights = [1 / t ** 2 for t in totals]
    best: tuple[float, list[float]] | None = None
    others = tuple(range(1, len(rows[0])))
    for extra in itertools.chain.from_iterable(itertools.combinations(others, k) for k in range(len(others) + 1)):
        use = (0, *extra)
        x = _solve(rows, ys, weights, use)
        if x is None or any(v < 0 for v in x):
            continue
        loss = sum(w * (sum(c * v for c, v in zip(r, x)) - y) ** 2 for r, y, w in zip(rows, ys, weights))
        if best is None or loss < best[0]:
            best = (loss, x)
    if best is None:
        raise ValueError("no non-negative fit")
    return best[1]


def model_ms(m: Measured, cal: Calibration) -> float:
    """The model's time per iteration for a measured configuration under a calibration."""
    columns, fixed = _basis(m)
    x = (1 / cal.utilisation, cal.attention_bytes_per_score, cal.elementwise_bytes, cal.iteration_overhead_ms)
    return (sum(c * v for c, v in zip(columns, x)) + fixed) * 1e3


def split_halves(runs: list[Measured]) -> tuple[list[Measured], list[Measured]]:
    """Every other configuration in name order fits; the rest check."""
    ordered = sorted(runs, key=lambda m: m.name)
    return ordered[0::2], ordered[1::2]


def calibrate(runs: list[Measured]) -> tuple[Calibration, list[Measured], list[Measured]]:
    """The fit on one half, and both halves."""
    fit_set, check_set = split_halves(runs)
    basis = [_basis(m) for m in fit_set]
    x = fit([b[0] for b in basis], [m.median_ms / 1e3 - b[1] for m, b in zip(fit_set, basis)],
            [m.median_ms / 1e3 for m in fit_set])
    names = ", ".join(m.name for m in fit_set)
    # rounded as timing.py records them, so the doc, the module and the checks use the same numbers
    cal = Calibration(round(1 / x[0], 4), round(x[1], 2), round(x[2], 2), f"fitted on {len(fit_set)} H200 runs ({names}) by "
                      "tools/fit_utilisation.py; checked on the other " f"{len(check_set)}", True, round(x[3], 2))
    return cal, fit_set, check_set


def module_text(cal: Calibration, text: str) -> str:
    """timing.py with the CALIBRATION entry between the BEGIN FIT / END FIT markers replaced."""
    block = (
        "# BEGIN FIT (tools/fit_utilisation.py --write; docs/performance-model.md has the runs)\n"
        "CALIBRATION: dict[str, Calibration] = {\n"
        f"    \"h200\": Calibration(\n        utilisation={cal.utilisation:.4f}, attention_bytes_per_score="
        f"{cal.attention_bytes_per_score:.2f}, elementwise_bytes={cal.elementwise_bytes:.2f},\n"
        f"        source={cal.source!r},\n        fitted=True, iteration_overhead_ms={cal.iteration_overhead_ms:.2f}),\n}}\n"
        "# END FIT\n"
    )
    pattern = re.compile(r"# BEGIN FIT.*?# END FIT\n", re.S)
    if not pattern.search(text):
        raise ValueError("timing.py has no BEGIN FIT / END FIT markers")
    return pattern.sub(lambda _: block, text)


def _table(rows: list[tuple[Measured, str, float]]) -> list[str]:
    out = ["| configuration | spec | set | steady iterations | measured median ms | model ms | error |",
           "|---|---|---|---:|---:|---:|---:|"]
    for m, which, predicted in rows:
        err = (predicted - m.median_ms) / m.median_ms
        out.append(f"| {m.name} | `{m.spec}` | {which} | {m.iterations} | {m.median_ms:.1f} | {predicted:.1f} | "
                   f"{err:+.1%} |")
    return out


def document(cal: Calibration, fit_set: list[Measured], check_set: list[Measured], extra: Measured | None) -> str:
    """docs/performance-model.md, whole."""
    rows = [(m, "fit", model_ms(m, cal)) for m in fit_set] + [(m, "check", model_ms(m, cal)) for m in check_set]
    if extra is not None:
        rows.append((extra, "extra check", model_ms(extra, cal)))
    rows.sort(key=lambda r: r[0].name)
    worst_check = max(abs(model_ms(m, cal) - m.median_ms) / m.median_ms for m in check_set)
    worst_fit = max(abs(model_ms(m, cal) - m.median_ms) / m.median_ms for m in fit_set)
    gpus = ["| GPU | memory GB | dense bf16 TFLOP/s | HBM TB/s | GPU-GPU GB/s per direction | source |",
            "|---|---:|---:|---:|---:|---|"]
    for g in GPUS.values():
        gpus.append(f"| {g.name} | {g.memory_gb:g} | {g.bf16_dense_tflops:g} | {g.hbm_tb_s:g} | {g.nvlink_gb_s:g} "
                    f"({g.intra_link}) | {g.source} |")
    rdma, tcp = worker_network(True, 8), worker_network(False, 8)
    lines = [
        "# Performance model: time per iteration before a GPU is spent",
        "",
        "<!-- GENERATED by tools/fit_utilisation.py --write; edit the script, not this file -->",
        "",
        "`compiler/megatron/timing.py` predicts the time per iteration of a pretrain_gpt.py spec on a GPU type;",
        "`megatron-compile size` ranks layouts by it. This page states every constant with its source, the",
        "calibration on measured runs, and where the model has not been checked.",
        "",
        "## FLOPs: Megatron's own formula",
        "",
        "`num_floating_point_operations` ports megatron/training/training.py:411-917 at the pinned commit",
        "571370c8 (the count behind Megatron's logged `throughput per GPU (TFLOP/s/GPU)`, training.py:2608-2614):",
        "the standard Transformer branch with dense and MoE MLPs (moe_layer_freq int or list, top-k, shared",
        "experts, latent MoE), GQA/MHA, the attention output gate, multi-token prediction and the logits. Left",
        "out, and refused with NotImplementedError: multi-latent attention, the gated-delta-net linear attention",
        "and hybrid Mamba models. `tools/flops_conformance.py` runs Megatron's own function on the 21 argument",
        "sets of `tests/fixtures/flops_cases.json` (dense, GQA, MQA, MoE with patterns, shared and latent",
        "experts, MTP, gated attention, long sequences, odd sizes); its output, recorded in",
        "`tests/fixtures/flops_megatron.json`, equals the port's to a relative 1e-12 on every case",
        "(tests/test_timing.py; with MEGATRON_LM set the test reruns Megatron's function live).",
        "",
        "Megatron's formula counts model FLOPs: no recompute, and the causal half of the attention",
        "matmuls. The model adds what actually runs: one more forward for full recompute (uniform: every",
        "layer; block: recompute_num_layers per chunk), core attention's forward for selective recompute",
        "(transformer_config.py:1583-1584), and the masked half that the local (unfused) attention multiplies anyway.",
        "",
        "## Terms",
        "",
        "On the GPU of the last pipeline stage (it holds the output layer; Megatron splits layers evenly):",
        "",
        "| term | formula | backed by runs |",
        "|---|---|---|",
        "| compute | FLOPs / (dense bf16 peak × utilisation) | yes (fitted) |",
        "| attention-memory | unfused attention: score elements (b × heads/tp × s/cp × s × layers) × bytes per score / HBM | yes (fitted) |",
        "| elementwise | tokens × hidden × layers (÷ tp with sequence parallel) × bytes per unit / HBM | yes (fitted) |",
        "| overhead | a fixed time per iteration (host-side: optimizer launches, grad-norm, timers, logging) | yes (fitted) |",
        f"| logits-memory | {LOGITS_BYTES_PER_ELEMENT} bytes per fp32 logit (a count) × tokens × vocab/tp / HBM | no |",
        "| bubble | the four above × (pp − 1)/(v·m), 1F1B with v virtual stages and m microbatches | no |",
        "| tp | 4 all-reduce equivalents (6 with full recompute) of b·s/cp·h·2 bytes per layer and microbatch, ring 2(n−1)/n, not overlapped | no |",
        "| cp | 3(cp−1) K/V chunk exchanges per layer and microbatch, minus the attention compute TE overlaps them with | no |",
        "| dp-grads | fp32 grads (arguments.py:1172-1184) all-reduced, or reduce-scattered with the distributed optimizer, over DP×CP; hidden with --overlap-grad-reduce | no |",
        "| dp-params | distributed optimizer: all-gather of bf16 params; hidden with --overlap-param-gather | no |",
        "| pp | 2·m·v sends of b·s/cp·h·2 bytes (÷ tp with sequence parallel) | no |",
        "| ep | 4 all-to-alls of routed tokens per MoE layer and microbatch | no |",
        "| optimizer | 30 bytes of Adam state per local parameter + 4 bytes of grad zeroing per parameter / HBM | no |",
        "",
        f"HBM runs at {HBM_EFFICIENCY:.0%} of the datasheet rate and every link at {LINK_EFFICIENCY:.0%} (assumptions:",
        "streaming kernels and nccl-tests' bus bandwidth typically reach that; not measured here). A group",
        "whose ranks (laid out tp-cp-ep-dp-pp) fit in one worker uses the GPU-to-GPU link, else the worker",
        f"network: with RDMA {rdma.gb_s_per_gpu:g} GB/s per GPU ({rdma.assumption}); without,",
        f"{tcp.gb_s_per_gpu:.2f} GB/s per GPU on an 8-GPU worker ({tcp.assumption}).",
        "",
        "## GPUs",
        "",
        "Dense figures (NVIDIA prints bf16 \"with sparsity\", twice the dense rate; Megatron's GEMMs are dense).",
        "",
        *gpus,
        "",
        "## Calibration",
        "",
        "Measured: `tests/fixtures/measurements/<configuration>/train.log` (their README says how they ran), read",
        "by `tools/measurements.py`, with the spec `tests/e2e/mem-<configuration>.yaml` each was compiled from.",
        "Each configuration is one compiled launch.sh on one H200",
        f"(transformer_impl local, no fused kernels: the image without Transformer Engine); the measured figure is",
        "the median of `elapsed time per iteration` over the iterations after the first 3 (tools/measurements.py).",
        "The fit (weighted least squares on relative error, constants kept non-negative) uses every other",
        "configuration in name order; the rest check it.",
        "",
        f"- utilisation: **{cal.utilisation:.4f}** of the 989.5 TFLOP/s dense bf16 peak",
        f"- bytes per attention score (unfused attention, fwd+bwd per layer): **{cal.attention_bytes_per_score:.2f}**"
        " (a count of the passes gives about 48: baddbmm, scale, mask, softmax, dropout and bmm, and their backward)",
        f"- elementwise bytes per token, hidden unit and layer: **{cal.elementwise_bytes:.2f}** (a count of the",
        "  unfused passes, forward and backward, gives roughly 300: torch LayerNorm, bias adds, GeLU on 4h,",
        "  dropouts with their masks, residual adds, the attention's transposing copies)",
        f"- overhead per iteration, whatever the model: **{cal.iteration_overhead_ms:.2f} ms**",
        "",
        f"Largest error: {worst_fit:.1%} on the fit half, {worst_check:.1%} on the check half "
        f"(acceptance: {TOLERANCE:.0%} on each configuration). The extra check is "
        f"`{EXTRA_RUN[1]}` (`{EXTRA_RUN[2]}`, 4 microbatches per iteration, log interval 5: the median of its",
        f"lines from iteration {EXTRA_RUN[3]} on), a run of another day that the fit never saw.",
        "",
        *_table(rows),
        "",
        "## `megatron-compile size`",
        "",
        "`python -m compiler.commands.size SPEC [--gpu h200] [--max-gpus N] [--gpus-per-worker 8] [--top K]",
        "[--rank time|gpu-hours] [--explain-rank] [--format json]` enumerates the layouts Megatron's divisibility",
        "rules accept for the spec's model and global batch (TP within a worker; PP, CP, DP, micro batch 1-8,",
        "no/selective/full recompute, distributed optimizer, sequence parallel wherever TP > 1, 2 or 4",
        "virtual stages where pipeline > 2), drops those whose memory estimate is above 90 % of the GPU, ranks",
        "the rest by this model, and compiles them in rank order with their `--set` overrides through the",
        "compiler's own compose/validate/rules path, keeping the first K with no diagnostic at all (one per",
        "parallel shape: its fastest micro batch, recompute and optimizer choice). tests/test_size.py applies",
        "every printed layout's overrides for specs/gpt-7b.yaml, tests/size_specs/gpt-1b.yaml and",
        "tests/size_specs/llama-70b.yaml and asserts a clean compile.",
        "",
        "## What has not been checked",
        "",
        "- Every communication term (tp, cp, dp, pp, ep) and the bubble: no multi-GPU run has been timed against",
        "  them; they are message sizes over datasheet bandwidths. `size --explain-rank` labels them `[not measured]`.",
        "- Transformer Engine and fused kernels: the fused attention keeps the scores on chip (attention-memory",
        "  is 0), and with fused kernels the model takes 40 % of the fitted elementwise bytes",
        "  (`FUSED_ELEMENTWISE_SHARE`, a count of the passes the fusions save). No fused run has been timed.",
        "- The utilisation is one figure for all GEMM shapes; micro batch 1 and small hidden sizes reach less in",
        "  practice (b1 runs 5 % slower than the model says here), so `size` may favour micro batch 1 more than",
        "  it should.",
        "- GPUs other than the H200 use the H200 fit scaled by their datasheet peak and bandwidths.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO,
                        help="the checkout holding tests/fixtures/measurements, tests/e2e/mem-*.yaml and "
                        "tools/measurements.py (default: this one)")
    parser.add_argument("--write", action="store_true", help="update timing.py's CALIBRATION and the doc")
    args = parser.parse_args(argv)
    runs = load(args.root)
    if len(runs) < 4:
        print(f"need at least 4 measured configurations, found {len(runs)}", file=sys.stderr)
        return 1
    cal, fit_set, check_set = calibrate(runs)
    print(f"utilisation {cal.utilisation:.4f}, bytes/score {cal.attention_bytes_per_score:.2f}, "
          f"elementwise bytes {cal.elementwise_bytes:.2f}, overhead {cal.iteration_overhead_ms:.2f} ms per iteration")
    extra = extra_check()
    bad = 0
    for which, group in (("fit", fit_set), ("check", check_set), ("extra", [extra] if extra else [])):
        for m in group:
            predicted = model_ms(m, cal)
            err = (predicted - m.median_ms) / m.median_ms
            bad += abs(err) > TOLERANCE
            print(f"{which:5} {m.name:<18} measured {m.median_ms:8.1f} ms  model {predicted:8.1f} ms  {err:+6.1%}")
    if args.write:
        MODULE.write_text(module_text(cal, MODULE.read_text()))
        DOC.write_text(document(cal, fit_set, check_set, extra))
        print(f"wrote {MODULE.relative_to(REPO)} and {DOC.relative_to(REPO)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
