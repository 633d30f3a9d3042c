"""tests/fixtures/h200-hosts (issue 26's device calls 6-8): the README's pre-registered table is what the logs
and the predictions made before the calls give, and the host evidence the docs cite holds."""

from __future__ import annotations

import contextlib
import io
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
HOSTS = Path(__file__).parent / "fixtures" / "h200-hosts"
sys.path.insert(0, str(REPO / "tools"))
_ITER = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([\d.]+)")


def steady(log: Path) -> list[float]:
    """The iterations after 3, as tools/validate_timing.py takes them: one time per iteration number (where a
    log holds two runs, call11's contended pair, the later line)."""
    its = {int(k): float(ms) for k, ms in _ITER.findall(log.read_text(errors="replace"))}
    return [ms for k, ms in sorted(its.items()) if k > 3]


def predicted(path: Path) -> dict[str, float]:
    return {a: float(b) for a, b, _ in (line.split() for line in path.read_text().splitlines())}


@pytest.mark.parametrize("call", ["call6", "call7/te", "call11", "call12", "call13", "call15", "call16", "call17",
                                  "call19", "call22", "call23", "call25"])
def test_readme_table_is_the_logs_against_the_predictions_made_before(call: str) -> None:
    readme = (HOSTS / "README.md").read_text()
    pred = predicted(HOSTS / call / "predicted-before.txt")
    assert pred
    for name, p in pred.items():
        its = steady(HOSTS / call / name / "train.log")
        m = statistics.median(its)
        row = f"| {call}/{name} | {p:.0f} | {m:.1f} ({min(its):.1f}-{max(its):.1f}) | {(p / m - 1) * 100:+.1f}% |"
        assert row in readme, row


@pytest.mark.parametrize("call,count", [("call26", 13), ("call27", 9), ("call29", 20), ("call30", 7),
                                        ("call31", 4), ("call32", 4)])
def test_fake_process_group_ranks_table_is_the_logs_against_the_predictions_made_before(call: str, count: int) -> None:
    """Device calls 26 and 27: each rank of multi-GPU layouts run alone with --fake-process-group
    (tools/fakepg.py run, SEQUENTIAL=1); the README's rows are its logs against predicted-before.txt, and a rank
    whose data went NaN or zero is noted as not counted (tools/validate_timing.py void_data)."""
    import validate_timing

    readme = (HOSTS / "README.md").read_text()
    pred = predicted(HOSTS / call / "predicted-before.txt")
    assert len(pred) == count and {n.split("/")[1] for n in pred} <= {"first", "last"}
    for name, p in pred.items():
        layout, stage = name.split("/")
        (log,) = (HOSTS / call / "fakepg" / layout).glob(f"{stage}-rank*.log")
        text = log.read_text()
        assert "--fake-process-group" in text.splitlines()[0]
        its = steady(log)
        if call == "call29" and not its:  # past the call's budget: said so, not dropped
            assert f"| {call}/{name} | {p:.0f} | not started: past the call's budget |" in readme
            assert "after training is done" not in text
            continue
        # calls 29, 30 and 31 filled what the fake receive returns with data (tools/fakepg.py FAKEPG_FILL=1)
        assert (call in ("call29", "call30", "call31")) == ("# fakepg: FAKEPG_FILL=1" in text)
        assert len(its) == (27 if call == "call32" else 9)  # call 32 ran 30 iterations, the others 12
        m = statistics.median(its)
        void = validate_timing.void_data(text)
        what = "" if not void else "zero data: not counted" if "went zero" in void else "NaN data: not counted"
        row = f"| {call}/{name} | {p:.0f} | {m:.1f} ({min(its):.1f}-{max(its):.1f}) | {(p / m - 1) * 100:+.1f}% | {what} |"
        assert row.replace("|  |", "| |") in readme, row
        # the first stage reads its data and always ran on it: only a later stage's received activations go bad
        assert not void or stage == "last"


def test_call23_calibrated_table_is_the_procedure_written_down_before() -> None:
    # predicted-calibrated.txt: each spec's plan.md with the factor `calibrate` gave from the calibration job's log
    readme = (HOSTS / "README.md").read_text()
    before = predicted(HOSTS / "call23" / "predicted-before.txt")
    calibrated = predicted(HOSTS / "call23" / "predicted-calibrated.txt")
    assert calibrated.keys() == before.keys()
    errors = {}
    for name, p in calibrated.items():
        its = steady(HOSTS / "call23" / name / "train.log")
        m = statistics.median(its)
        row = f"| call23/{name} | {p:.0f} | {m:.1f} ({min(its):.1f}-{max(its):.1f}) | {(p / m - 1) * 100:+.1f}% |"
        assert row in readme, row
        errors[name] = (abs(before[name] / m - 1), abs(p / m - 1))
    # the README's verdict: four of six within 15 % without the factor, one with it
    assert sum(b <= 0.15 for b, _ in errors.values()) == 4 and sum(c <= 0.15 for _, c in errors.values()) == 1
    assert "x1.36" in readme and statistics.median(steady(HOSTS / "call23" / "calibrate-host" / "train.log")) == 198.0


def _call25_step(name: str) -> float:
    """A call-25 spec's measured step (s): the median after iteration 3, the two runs of an hx spec averaged."""
    runs = (name, f"{name}-r2") if name.startswith("hx-") else (name,)
    return statistics.mean(statistics.median(steady(HOSTS / "call25" / r / "train.log")) for r in runs) / 1e3


def test_call25_calibration_from_three_runs_passes_the_check_written_down_before() -> None:
    readme = (HOSTS / "README.md").read_text()
    before = predicted(HOSTS / "call25" / "predicted-before.txt")
    calibrated = predicted(HOSTS / "call25" / "predicted-calibrated.txt")
    assert calibrated.keys() == before.keys()
    for name, p in calibrated.items():
        its = steady(HOSTS / "call25" / name / "train.log")
        m = statistics.median(its)
        assert f"| call25/{name} | {p:.0f} | {m:.1f} ({min(its):.1f}-{max(its):.1f}) | {(p / m - 1) * 100:+.1f}% |" in readme
    # the criterion fixed before the call: over the host-bound specs, median |error| and the count within 15 %
    named = ["hx-h512", "hx-h1024", "hx-h1536", "att-s512-h1024-b8", "cal2-gpt-h768-l12-ga4", "cal2-llama-h1024-l6-ga2",
             "cal2-qwen3-h512-l8-ga8"]
    err = {k: [abs(d[n] / (_call25_step(n) * 1e3) - 1) for n in named] for k, d in (("b", before), ("c", calibrated))}
    assert round(statistics.median(err["b"]) * 100, 1) == 23.5 and round(statistics.median(err["c"]) * 100, 1) == 17.2
    assert sum(e <= 0.15 for e in err["b"]) == 2 and sum(e <= 0.15 for e in err["c"]) == 3
    # the factor was calibrate's median of the three runs made first, by the model at f21c84f (x1.08); the model
    # refitted since prices the job otherwise, so today's factor differs; each run still gets one
    assert "x1.06, x1.08, x1.15, median **x1.08**" in readme
    from compiler.cli import main
    out = io.StringIO()
    logs = [str(HOSTS / "call25" / f"calibrate-host-{i}" / "train.log") for i in (1, 2, 3)]
    assert main(["calibrate", str(REPO / "specs" / "calibrate-host.yaml"), *logs, "--format", "json"], out,
                io.StringIO()) == 0
    assert all(0.9 < r["factor"] < 1.4 for r in json.loads(out.getvalue())["runs"])  # up to 1.31 since call 43's split


def test_call25_crossover_favours_the_split_at_the_loss() -> None:
    # the hx series (GPT L4 s1024, 4 micro batches, h512 to h3072), host scaled by its h512 and h1024 runs: the
    # model's micro batch (host_time.microbatch_seconds: forward and backward each the longer side) against the host
    # running ahead into the next micro batch (max(GPU, host, host's backward share + GPU's forward))
    from compiler.megatron import host_time
    from compiler.one_pass import compile_spec

    def split(g: float, h: float) -> float:
        return host_time.microbatch_seconds(g, h, True)

    def ahead(g: float, h: float) -> float:
        return max(g, h, (1 - host_time.MICROBATCH_FORWARD_SHARE) * h + g * host_time.GPU_FORWARD_SHARE)

    from compiler.load.override import Override

    # priced with the optimizer the runs had: the device image has no TE, so Megatron fell back to torch's AdamW
    # (every call-25 log warns so), where plan.md priced TE's FusedAdam of the specs' NGC image
    no_te = (Override("image.base=registry.example.com/pytorch-without-te:1"),)
    parts = {}
    for h in (512, 1024, 1536, 1792, 2048, 2560, 3072):
        log = (HOSTS / "call25" / f"hx-h{h}" / "train.log").read_text()
        assert host_time.TORCH_OPTIMIZER_WARNING in log
        st = compile_spec(str(REPO / "tests" / "e2e" / f"hx-h{h}.yaml"), "hx", overrides=no_te,
                          render_files=False).facts.step_time
        s = st.stages[0]
        parts[h] = (s.gpu_s, s.host_s, st.seconds - 4 * s.microbatch_s)
    measured = {h: _call25_step(f"hx-h{h}") for h in parts}

    def err(h: int, f: float, form: Any) -> float:
        g, host, rest = parts[h]
        return (4 * form(g, host * f) + rest) / measured[h] - 1

    f = min((k / 100 for k in range(50, 250)), key=lambda f: sum(err(h, f, split) ** 2 for h in (512, 1024)))
    # the README's figures are the model's at f21c84f (with the runs' optimizer x1.18; +2.1, -2.3, +2.0 % against
    # -3.5, -14.8, -6.2 %); a refit of the host's speed since moves the factor, not the verdict
    assert 1.05 <= f <= 1.4  # 1.31 since call 43's split
    between = (1536, 1792, 2048)
    assert all(abs(err(h, f, split)) < 0.05 for h in between)
    assert max(abs(err(h, f, ahead)) for h in between) > 0.12
    assert sum(err(h, f, split) ** 2 for h in between) < sum(err(h, f, ahead) ** 2 for h in between) / 5
    # h1792, where the two forms differ most, is also where this host's two runs differ most (121.7 and 137.7 ms)


def test_call24_one_launch_twice_on_one_host() -> None:
    # the calibration job's run-to-run noise: 137.3 and 171.9 ms, the same launch minutes apart
    first = statistics.median(steady(HOSTS / "call24" / "calibrate-host" / "train.log"))
    again = statistics.median(steady(HOSTS / "call24" / "calibrate-host-b" / "train.log"))
    assert (first, again) == (137.3, 171.9) and again / first > 1.25


def test_the_same_job_on_three_hosts() -> None:
    # the docs' claim: one compiled job, tiny-l2-h256 at 4 micro batches, 42.4 ms on device call 3's host,
    # 56-70 ms on call 7's (six runs), 91-94 ms on call 6's
    call3 = statistics.median(steady(HOSTS.parent / "measurements" / "tiny-l2-h256" / "train.log"))
    call7 = [statistics.median(steady(p)) for p in sorted((HOSTS / "call7" / "local").glob("ab-tiny-ga4-*/train.log"))]
    call6 = statistics.median(steady(HOSTS / "call6" / "mem-tiny-l2-h256" / "train.log"))
    assert len(call7) == 6
    assert call3 < min(call7) and max(call7) < call6
    assert call6 / call3 > 2.1
    # and the launch options do not order them: the two unmodified launches bracket the modified ones' spread
    by = {p.parent.name: statistics.median(steady(p)) for p in (HOSTS / "call7" / "local").glob("ab-*/train.log")}
    assert min(by["ab-tiny-ga4-flags"], by["ab-tiny-ga4-flags2"]) < by["ab-tiny-ga4-noflags"]
    assert max(by["ab-tiny-ga4-flags"], by["ab-tiny-ga4-flags2"]) > by["ab-tiny-ga4-noflags2"]


def test_fused_attention_bench_has_every_shape_with_and_without_dropout() -> None:
    rows = json.loads((HOSTS / "call8" / "fused-attention.json").read_text())["rows"]
    assert {r["dropout"] for r in rows} == {0.0, 0.1}
    big = {r["dropout"]: r for r in rows if r["s"] == 16384}
    # the docs' figures: 8.0 ms forward and backward with dropout, 4.5 without, 1.6 ps a causal score between
    assert big[0.1]["forward_backward_s"] == pytest.approx(8.0e-3, rel=0.01)
    assert big[0.0]["forward_backward_s"] == pytest.approx(4.5e-3, rel=0.01)
    scores = big[0.1]["b"] * big[0.1]["heads"] * 16384 ** 2 / 2
    assert (big[0.1]["forward_backward_s"] - big[0.0]["forward_backward_s"]) / scores == pytest.approx(1.6e-12, rel=0.05)


def _losses(log: Path) -> list[str]:
    return re.findall(r"lm loss: ([\d.E+-]+)", log.read_text(errors="replace"))


def test_the_mask_off_trains_the_same_model() -> None:
    # call10's launches, compiled with --no-create-attention-mask-in-dataloader, against call6's with the mask:
    # Megatron's local layers give the same loss digit for digit
    for name in ("mem-l4", "mem-tiny-l2-h256"):
        off = _losses(HOSTS / "call10" / "local" / name / "train.log")
        on = _losses(HOSTS / "call6" / name / "train.log")
        assert len(off) >= 15 and off == on
    assert re.search(r"create_attention_mask_in_dataloader \.+ False",
                     (HOSTS / "call10" / "local" / "mem-l4" / "train.log").read_text())
    # Transformer Engine's within what two runs with the mask differ by (cuDNN's attention is not bitwise
    # reproducible)
    off = [float(x) for x in _losses(HOSTS / "call10" / "te" / "te-s16384-b1" / "train.log")]
    on = [float(x) for x in _losses(HOSTS / "call9" / "te-s16384-b1-mask" / "train.log")]
    again = [float(x) for x in _losses(HOSTS.parent / "te-h200" / "measurements" / "te-s16384-b1" / "train.log")]
    spread = max(abs(a / b - 1) for a, b in zip(on, again))
    assert max(abs(a / b - 1) for a, b in zip(off, on)) <= 2 * spread


def _ratios(a: dict, b: dict, names: tuple[str, ...]) -> list[float]:
    return [a[n] / b[n] for n in names]


def test_the_slow_hosts_main_thread_not_its_autograd_thread() -> None:
    # call11's README: the same compiled tiny job profiled on two hosts; the forward's ops (Python's main
    # thread) took 1.3-2.1x as long on call 11's host, the backward's (autograd's thread) no longer
    from collections import defaultdict

    from helpers import load_tool

    trace = load_tool("trace_summary")

    def per_op(path: Path) -> dict:
        out: dict = defaultdict(float)
        for e in trace.load(path):  # type: ignore[attr-defined]
            if e.get("cat") == "cpu_op":
                out[e["name"]] += e["dur"]
        return out

    slow = per_op(HOSTS / "call11" / "experiments" / "t-ga4-prof" / "trace.json.gz")
    ref = per_op(Path(__file__).parent / "fixtures" / "measurements" / "profiles" / "tiny-l2-h256-prof-trace.json.gz")
    main = ("LinearWithGradAccumulationAndAsyncCommunication", "_VocabParallelCrossEntropy", "aten::dropout",
            "aten::layer_norm", "aten::view")
    autograd = ("LinearWithGradAccumulationAndAsyncCommunicationBackward",
                "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                "autograd::engine::evaluate_function: NativeLayerNormBackward0")
    assert all(1.3 <= r <= 2.1 for r in _ratios(slow, ref, main))
    assert all(0.8 <= r <= 1.0 for r in _ratios(slow, ref, autograd))


def test_the_data_loaders_workers_do_not_pace_the_host_bound_step() -> None:
    exp = HOSTS / "call11" / "experiments"
    one, eight = (statistics.median(steady(exp / n / "run.log")) for n in ("t-ga4-nw1", "t-ga4-nw8"))
    none = statistics.median(steady(exp / "t-ga4-nw0" / "run.log"))
    assert abs(one / eight - 1) < 0.1 and none > 1.8 * eight


def test_transformer_engine_layers_split_in_the_traces() -> None:
    # tools/trace_summary.py --phases finds TE's layers by _LayerNormLinear and _Linear (call12's README)
    from helpers import load_tool

    trace = load_tool("trace_summary")
    steps = trace.phases(trace.load(HOSTS / "call12" / "experiments" / "te-l4-prof" / "trace.json.gz"))  # type: ignore[attr-defined]
    assert len(steps) == 2
    for st in steps:
        assert len(st["layer_forward"]) == 3 and 2.3 <= statistics.mean(st["layer_forward"]) <= 2.7
        assert 3.2 <= statistics.mean(st["layer_backward"]) <= 4.4
        assert 9.5 <= st["iteration"] <= 9.8


def test_optimizer_and_accumulation_rates_are_the_traces() -> None:
    # compiler/megatron/rates.py's per-parameter figures: call14's traces, each kernel family's time a profiled
    # step over the rank's parameters (and micro batches for the accumulation)
    from compiler.megatron import rates
    from helpers import load_tool

    trace = load_tool("trace_summary")
    families = rates.TRACE_KERNELS
    assert set(families) == {"GRAD_ACCUMULATION_S_PER_PARAM", "FUSED_ADAM_S_PER_PARAM", "GRAD_CLIP_S_PER_PARAM",
                             "GRAD_NORM_S_PER_PARAM"}
    got: dict = {k: [] for k in families}
    copies = []
    for name in ("te-llama-prof", "te-qwen-prof", "mem-llama-prof"):
        run = HOSTS / "call14" / "experiments" / name
        log = (run / "run.log").read_text()
        params = int(re.search(r"number of parameters on \(tensor, pipeline\) model parallel rank \(0, 0\): (\d+)", log)[1])
        micro = int(re.search(r" global_batch_size \.+ (\d+)", log)[1]) // int(re.search(r" micro_batch_size \.+ (\d+)", log)[1])
        events = trace.load(run / "trace.json.gz")  # type: ignore[attr-defined]
        for key, parts in families.items():
            per = micro if key == "GRAD_ACCUMULATION_S_PER_PARAM" else 1
            got[key].append(trace.kernel_ms(events, *parts) / 1e3 / (params * per))  # type: ignore[attr-defined]
        copies.append(trace.kernel_ms(events, "bfloat16_copy_kernel") / 1e3 / params)  # type: ignore[attr-defined]
    # the main parameters' copy into the model's bf16 ones: 6 bytes at the copy rate, as priced
    assert all(c == pytest.approx(6 / rates.hbm_bytes_per_second(), rel=0.1) for c in copies[:2])
    for key, values in got.items():
        assert getattr(rates, key) == pytest.approx(statistics.mean(values), rel=0.01), key
        assert max(values) / min(values) < 1.1, key  # three runs, two stacks: one figure


def test_grouped_experts_host_costs_are_the_designated_runs_fit() -> None:
    # compiler/megatron/layer_time.py's two grouped-expert constants: tools/grouped_experts_fit.py on the runs
    # named before call 16; the held-out runs' errors as the README and the constants' comment give them
    from compiler.megatron import layer_time
    from helpers import load_tool

    fit = load_tool("grouped_experts_fit")
    layer_s, gemm_s, errors = fit.fit()  # type: ignore[attr-defined]
    assert layer_time.GROUPED_MOE_LAYER_HOST_S == pytest.approx(layer_s)
    assert layer_time.GROUPED_EXPERT_GEMM_HOST_S == pytest.approx(gemm_s)
    assert set(errors) == set(fit.DESIGNATED) | set(fit.HELD_OUT)  # type: ignore[attr-defined]
    assert max(abs(errors[n]) for n in fit.DESIGNATED) < 0.27  # type: ignore[attr-defined]
    assert abs(errors["call16/te-moe32-top2"]) < 0.02 and abs(errors["call15/te-ds-mla-moe"]) < 0.03
    assert -0.35 < errors["te-moe8-top2"] < -0.30


def _expert_slope(values: list[float], experts: tuple[int, ...] = (8, 16, 32, 64)) -> float:
    """The least-squares slope over the experts of tools/moe_host_bench.py's top-2 figures (seconds an expert)."""
    mx, my = sum(experts) / len(experts), sum(values) / len(values)
    return sum((x - mx) * (y - my) for x, y in zip(experts, values)) / sum((x - mx) ** 2 for x in experts)


def _fresh(rows: dict[str, dict], key: str, experts: tuple[int, ...] = (8, 16, 32, 64)) -> list[float]:
    """A `fresh` top-2 figure of the bench by expert count."""
    return [rows[f"e{e}-top2 fresh"][key] for e in experts]


def test_call34_local_expert_share_is_the_bench_by_the_rule_written_down_before() -> None:
    """Device call 34: tools/moe_host_bench.py's `fresh` layer passes at top 2 (8 to 64 experts), their least-squares
    slope over the experts against the GPT layer pass of the same rounds, is host_time.LOCAL_EXPERT_SHARE (rule 1 and
    2 of the README, committed before the call); `fresh+gc`'s slope within the per-round slopes' quartiles of
    `fresh`'s, so no term for a run without --manual-gc (rule 3)."""
    from compiler.megatron import host_time

    rows = {r["config"]: r for r in json.loads((HOSTS / "call34" / "moe_host-bench.json").read_text())["rows"]}
    experts = (8, 16, 32, 64)
    b = _expert_slope(_fresh(rows, "layer_pass_s"))
    assert host_time.LOCAL_EXPERT_SHARE == pytest.approx(b / rows["gpt"]["layer_pass_s"], abs=5e-4)
    per_round = {mode: sorted(_expert_slope([rows[f"e{e}-top2 {mode}"]["per_round_s"][r] for e in experts])
                              for r in range(rows["gpt"]["rounds"])) for mode in ("fresh", "fresh+gc")}
    q = {mode: statistics.quantiles(v, n=4) for mode, v in per_round.items()}
    gc_b = _expert_slope([rows[f"e{e}-top2 fresh+gc"]["layer_pass_s"] for e in experts])
    assert q["fresh"][0] < gc_b < q["fresh"][2] and q["fresh+gc"][0] < b < q["fresh+gc"][2]


def test_call34_runs_table_is_the_logs_against_both_figures_written_down() -> None:
    """Call 34's four one-GPU local-expert runs: the model's figure before the bench (predicted-before.txt) and with
    the bench's share applied (predicted-after-bench.txt, committed before the logs were opened), against the logs."""
    readme = (HOSTS / "README.md").read_text()
    before = predicted(HOSTS / "call34" / "predicted-before.txt")
    after = predicted(HOSTS / "call34" / "predicted-after-bench.txt")
    assert before.keys() == after.keys() and len(before) == 4
    for name, p in before.items():
        (log,) = (HOSTS / "call34" / "fakepg" / name.split("/")[0]).glob("first-rank*.log")
        its = steady(log)
        assert len(its) == 27
        m = statistics.median(its)
        q = after[name]
        row = (f"| call34/{name} | {p:.0f} | {q:.0f} | {m:.1f} ({min(its):.1f}-{max(its):.1f}) | "
               f"{(p / m - 1) * 100:+.1f}% | {(q / m - 1) * 100:+.1f}% |")
        assert row in readme, row
        assert q < p  # the measured expert cost is below the profiled one it replaced
    # without --manual-gc within 5 % of the same job with it, on one host
    with_gc = statistics.median(steady(HOSTS / "call34" / "fakepg" / "fpg-moe-e32" / "first-rank0.log"))
    without = statistics.median(steady(HOSTS / "call34" / "fakepg" / "fpg-moe-e32-autogc" / "first-rank0.log"))
    assert abs(without / with_gc - 1) < 0.05
    assert "--manual-gc" not in (HOSTS / "call34" / "fakepg" / "fpg-moe-e32-autogc" / "first-rank0.log").read_text().split("\n", 1)[0]


def test_call35_forward_share_is_the_bench_by_the_rule_written_down_before() -> None:
    """Device call 35: the forward's slope over the experts over the whole layer pass's, both of its bench, is
    host_time.LOCAL_EXPERT_FORWARD_SHARE (rule 1 of the README, committed before the call). The bench's repeat of call
    34's figure, this host's whole slope over its GPT pass, came out at 0.55x call 34's: LOCAL_EXPERT_SHARE stays call
    34's by the rule, and the README says the two hosts' per-round quartiles do not overlap."""
    from compiler.megatron import host_time

    bench = {c: {r["config"]: r for r in json.loads((HOSTS / c / "moe_host-bench.json").read_text())["rows"]}
             for c in ("call34", "call35")}
    rows = bench["call35"]
    whole, forward = _expert_slope(_fresh(rows, "layer_pass_s")), _expert_slope(_fresh(rows, "forward_s"))
    assert host_time.LOCAL_EXPERT_FORWARD_SHARE == pytest.approx(forward / whole, abs=5e-4)
    assert 0 < forward < whole
    repeat = whole / rows["gpt"]["layer_pass_s"]
    assert repeat == pytest.approx(0.186, abs=5e-4) and host_time.LOCAL_EXPERT_SHARE == pytest.approx(
        _expert_slope(_fresh(bench["call34"], "layer_pass_s")) / bench["call34"]["gpt"]["layer_pass_s"], abs=5e-4)

    def round_slopes(b: dict[str, dict]) -> list[float]:
        return [_expert_slope([v[i] for v in _fresh(b, "per_round_s")]) for i in range(b["gpt"]["rounds"])]

    q34, q35 = (statistics.quantiles(round_slopes(bench[c]), n=4) for c in ("call34", "call35"))
    assert q35[2] < q34[0]  # the two hosts' per-round slopes' quartiles do not overlap


def _fakepg_its(call: str, name: str) -> list[float]:
    """A one-GPU run's iterations after 3 (27 of its 30), `name` as predicted-before.txt gives it (JOB/first)."""
    (log,) = (HOSTS / call / "fakepg" / name.split("/")[0]).glob("first-rank*.log")
    its = steady(log)
    assert len(its) == 27
    return its


def _before_after_table(call: str) -> dict[str, tuple[float, float, float]]:
    """A call's runs against the model before its bench (predicted-before.txt) and with its rule applied
    (predicted-after-bench.txt, committed before the logs were opened): the README's row of each checked, and
    (before, after, measured median) a run returned."""
    readme = (HOSTS / "README.md").read_text()
    before = predicted(HOSTS / call / "predicted-before.txt")
    after = predicted(HOSTS / call / "predicted-after-bench.txt")
    assert before.keys() == after.keys()
    out = {}
    for name, p in before.items():
        its = _fakepg_its(call, name)
        m, q = statistics.median(its), after[name]
        row = (f"| {call}/{name} | {p:.0f} | {q:.0f} | {m:.1f} ({min(its):.1f}-{max(its):.1f}) | "
               f"{(p / m - 1) * 100:+.1f}% | {(q / m - 1) * 100:+.1f}% |")
        assert row in readme, row
        out[name] = (p, q, m)
    return out


def test_call35_runs_table_is_the_logs_against_both_figures_written_down() -> None:
    """Call 35's four one-GPU local-expert runs against the model before the bench and with the rule; the README's
    expectations, as they came out."""
    runs = _before_after_table("call35")
    assert len(runs) == 4
    assert all(q < p for p, q, _ in runs.values())  # the backward's expert host work beside the GPU: never slower
    # the expectation written down: the three new jobs under the model's figures by more than 10 %; it held for the
    # 48-expert job only (the two GPU-bound ones 7 and 9 % under)
    under = {n: 1 - runs[n][2] / runs[n][0] for n in ("fpg-moe-e32-mb4/first", "fpg-moe-e16-v256k/first",
                                                      "fpg-moe-e48-l8/first")}
    assert under["fpg-moe-e48-l8/first"] > 0.10 and all(0.05 < u < 0.10 for n, u in under.items() if "e48" not in n)


def test_call36_table_is_the_traces_summaries_against_the_model() -> None:
    """Device call 36: each profiled step's GPU busy time (tools/trace_summary.py on the device, trace-summary.md) against
    the model's GPU time a step as the README gives it (its micro batches' GPU time and the optimizer's, as the model
    stood then), and the reading written down before the call: fpg-moe-e32-mb4 between 1.05 and 1.10x, so both sides."""
    readme = (HOSTS / "README.md").read_text()
    ratio, now = {}, {}
    for name in ("fpg-moe-e32-mb4", "fpg-moe-e32", "fpg-moe-e48-l8"):
        busy = _busy(HOSTS / "call36" / "experiments" / name)
        # the model's figure as the call had it (before call 37's activation term), from the README's row
        (model,) = (float(m) for m in re.findall(rf"^\| {re.escape(name)} \| ([\d.]+) \| {busy:.1f} \| ", readme, re.M))
        ratio[name] = busy / model
        assert f"| {name} | {model:.1f} | {busy:.1f} | {busy / model:.3f} |" in readme
        now[name] = busy / _gpu_a_step(name)
    assert 1.05 < ratio["fpg-moe-e32-mb4"] < 1.10 and ratio["fpg-moe-e48-l8"] < ratio["fpg-moe-e32"] < 1.10
    # call 37's activation term priced most of the GPU work the call found uncounted: today's model within 6 % of each
    # (the 48-expert job's 341 tokens an expert 4 % over its busy time from call 37: small experts' GEMMs, call 37's
    # whole rows; 5.5 % from call 48, whose GQA repeats it prices at 2.6 ms a step where this trace's repeat kernels
    # take 2.8, the passes before them 1.3: the term holds, the small experts' excess stays)
    assert all(0.94 < r < 1.05 for r in now.values()) and now["fpg-moe-e32-mb4"] < ratio["fpg-moe-e32-mb4"] - 0.03, now
    assert now["fpg-moe-e48-l8"] < 1.0 < now["fpg-moe-e32"] < now["fpg-moe-e32-mb4"]


def _busy(experiment: Path) -> float:
    """The profiled step's GPU busy time (ms), from tools/trace_summary.py's summary the device wrote."""
    summary = (experiment / "trace-summary.md").read_text()
    return float(next(line for line in summary.splitlines() if line.startswith("| ProfilerStep#10")).split("|")[3])


def _gpu_a_step(name: str) -> float:
    """Today's model's GPU time a step (ms) of a one-stage tests/e2e job as the lent H200 ran it (no TE): its two micro
    batches' GPU time and the optimizer's."""
    from compiler.load.override import Override
    from compiler.one_pass import compile_spec

    spec = str(REPO / "tests" / "e2e" / f"{name}.yaml")
    step = compile_spec(spec, spec, overrides=(Override("image.base=docker.io/library/python:3.11"),),
                        render_files=False).facts.step_time
    return (step.stages[0].gpu_s * 2 + step.term("optimizer").seconds) * 1e3


CALL37 = ("fpg-moe-e8-f4096/first", "fpg-moe-e16-gelu/first", "fpg-moe-e16-f1024-mb16/first", "fpg-moe-e32-mb4/first")


def test_call37_bench_is_the_models_activation_table() -> None:
    """Device call 37's bench (tools/expert_act_bench.py) is the table rates.expert_activation_seconds reads, which
    gives its measured GPU time at every case, and the README's figure at 2048 tokens x 1536 by the rule."""
    from compiler.megatron import rates

    bench = json.loads((HOSTS / "call37" / "expert_act-bench.json").read_text())
    assert json.loads((REPO / "compiler" / "megatron" / "data" / "expert-activation-h200.json").read_text()) == bench
    acts = [r for r in bench["rows"] if r["kind"] == "activation"]
    assert len(acts) == 32 and all(r["gpu_seconds"] for r in acts)
    for r in acts:
        assert rates.expert_activation_seconds(r["tokens"], r["ffn"], r["glu"]) == pytest.approx(r["gpu_seconds"])
    mid = rates.expert_activation_seconds(2048, 1536, True) / (2048 * 1536) * 1e12
    assert f"**{mid:.1f} ps**" in (HOSTS / "README.md").read_text() and 20 < mid < 45  # the range written down
    # GeLU's path has no chunk, offset add or product: cheaper than SwiGLU's at every case
    glu = {(r["tokens"], r["ffn"]): r["gpu_seconds"] for r in acts if r["glu"]}
    assert all(r["gpu_seconds"] < glu[r["tokens"], r["ffn"]] for r in acts if not r["glu"])


def test_call37_runs_table_is_the_logs_against_both_figures_written_down() -> None:
    """Call 37's four held-out local-expert runs: the model before the bench and with the rule applied (committed in
    555102b before the logs were opened) against the logs; the expectation as it came out."""
    runs = _before_after_table("call37")
    assert set(runs) == set(CALL37)
    err = {name: (p / m - 1, q / m - 1) for name, (p, q, m) in runs.items()}
    # written down: every run under the model as committed by more than 5 %, and with the rule each within 15 % and
    # nearer; nearer, all four; within 15 %, two
    assert all(b < -0.05 and abs(a) < abs(b) for b, a in err.values())
    assert sum(abs(a) <= 0.15 for _, a in err.values()) == 2


def test_call38_table_is_the_traces_against_the_model_with_call37s_term() -> None:
    """Device call 38: each profiled step's GPU busy time against the model's GPU time a step with call 37's term, as
    the README gives it, and the reading written down: within 0.95-1.05x, the gap is the host's, all three; today's
    model (call 46's element-wise paths in it too) as close."""
    readme = (HOSTS / "README.md").read_text()
    for name in ("fpg-moe-e16-f1024-mb16", "fpg-moe-e8-f4096", "fpg-moe-e16-gelu"):
        busy = _busy(HOSTS / "call38" / "experiments" / name)
        (model,) = (float(m) for m in re.findall(rf"^\| {re.escape(name)} \| ([\d.]+) \| {busy:.1f} \| ", readme, re.M))
        assert f"| {name} | {model:.1f} | {busy:.1f} | {busy / model:.3f} |" in readme
        assert 0.95 < busy / model < 1.05
        assert 0.95 < busy / _gpu_a_step(name) < 1.05


def test_call39_table_is_the_bench() -> None:
    """Device call 39 (tools/expert_plan_bench.py): a GEMM call at a token count cuBLAS has not planned against one it
    has, in a training-like loop; the README's rows, and the reading: between 150 and 200 us at every configuration."""
    readme = (HOSTS / "README.md").read_text()
    rows = json.loads((HOSTS / "call39" / "expert_plan-bench.json").read_text())["rows"]
    assert len(rows) == 5
    for r in rows:
        share = r["new_share_by_step"]
        line = (f"| {r['hidden']} | {r['ffn']} | {r['tokens']} | {r['experts']} x {r['layers']} | {r['new_calls']} | "
                f"{r['seen_calls']} | {r['new_median_s'] * 1e6:.1f} ({r['new_q1_s'] * 1e6:.1f}-{r['new_q3_s'] * 1e6:.1f}) | "
                f"{r['seen_median_s'] * 1e6:.1f} | {share[0]:.2f} -> {share[-1]:.2f} |")
        assert line in readme, line
        assert 150e-6 < r["new_median_s"] < 200e-6 and r["seen_median_s"] < 30e-6


def test_call40_dense_shapes_held_out_are_the_logs_against_the_model_as_committed() -> None:
    """Device call 40: four dense shapes no kept run had, their figures committed before the call (1789904); the
    expectation written down, each within 15 % and within the GPU-bound spread plan.md shows, held."""
    assert len(_held_out("call40", 1.18)) == 4


def _held_out(call: str, spread_high: float) -> list[str]:
    """A call of one-GPU runs held out for the model as committed (predicted-before.txt): each README row is the log's
    median against the figure written down, within 15 % and within the GPU-bound spread (0.91 to `spread_high`, as
    plan.md showed it then); the rows."""
    readme = (HOSTS / "README.md").read_text()
    rows = []
    for name, p in predicted(HOSTS / call / "predicted-before.txt").items():
        its = _fakepg_its(call, name)
        m = statistics.median(its)
        row = f"| {call}/{name} | {p:.0f} | {m:.1f} ({min(its):.1f}-{max(its):.1f}) | {(p / m - 1) * 100:+.1f}% | {m / p:.3f} |"
        assert row in readme, row
        assert abs(p / m - 1) <= 0.15 and 0.91 <= m / p <= spread_high
        rows.append(next(line for line in readme.splitlines() if line.startswith(row)))
    return rows


def test_call44_whole_small_models_held_out_are_the_logs_against_the_model_as_committed() -> None:
    """Device call 44: five whole small models of the families users train, never run, their figures committed before
    the call (b7032f8); the expectation written down, each within 15 % and the GPU-bound spread, memory within 5 %,
    held (the README's rows are the logs' medians and Megatron's max allocated)."""
    rows = _held_out("call44", 1.21)
    assert len(rows) == 5
    for line in rows:
        job = line.split("|")[1].strip().split("/")[1]
        (log,) = (HOSTS / "call44" / "fakepg" / job).glob("first-rank*.log")
        allocated = max(float(x) for x in re.findall(r"max allocated: ([\d.]+)", log.read_text()))
        estimate = float(line.rsplit("|", 2)[-2].split("/")[0].replace(",", ""))
        assert f"/ {allocated:,.0f} (" in line and abs(estimate / allocated - 1) <= 0.05


def test_call47_whole_dense_models_held_out_are_the_logs_against_the_model_as_committed() -> None:
    """Device call 47: five whole dense models never run, their figures committed before the call (c548533) with call
    46's paths and without them (6b80b8e); the expectation written down, each within 15 % and the GPU-bound spread,
    memory within 5 %, held, and call 46's paths held: the five's median |error| lower with them."""
    rows = _held_out("call47", 1.21)
    assert len(rows) == 5
    before = predicted(HOSTS / "call47" / "predicted-before-call46.txt")
    now, then = [], []
    for line in rows:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        job = cells[0].split("/")[1]
        m = float(cells[2].split()[0])
        assert cells[5] == f"{before[job + '/first']:.0f}" and cells[6] == f"{(before[job + '/first'] / m - 1) * 100:+.1f}%"
        now.append(abs(float(cells[1]) / m - 1))
        then.append(abs(before[job + "/first"] / m - 1))
        (log,) = (HOSTS / "call47" / "fakepg" / job).glob("first-rank*.log")
        allocated = max(float(x) for x in re.findall(r"max allocated: ([\d.]+)", log.read_text()))
        estimate = float(cells[7].split("/")[0].replace(",", ""))
        assert f"/ {allocated:,.0f} (" in cells[7] and abs(estimate / allocated - 1) <= 0.05
    assert statistics.median(now) < statistics.median(then)


def test_call49_moe_families_held_out_are_the_logs_against_the_model_as_committed() -> None:
    """Device call 49: three MoE blocks of families users train through the local experts, never run, their figures
    committed before the call (72ea8dd) with a tiny GPT as the host's reference; the reading as written down: the
    Mixtral block within 15 % and the GPU-bound spread, the two host-bound blocks within the host-bound spread, OLMoE's
    within 15 % and the Qwen3-shaped one's not (+19.4 %: the model over at 256 tokens an expert), memory within 5 %."""
    readme = (HOSTS / "README.md").read_text()
    spread = {"GPU": (0.91, 1.21), "host": (0.69, 2.06)}
    within = {}
    for name, p in predicted(HOSTS / "call49" / "predicted-before.txt").items():
        job = name.split("/")[0]
        (log,) = (HOSTS / "call49" / "fakepg" / job).glob("first-rank*.log")
        its = steady(log)
        m = statistics.median(its)
        row = f"| call49/{name}{' (the host' + chr(39) + 's reference)' if job == 'mem-hc-tiny-ga4' else ''} | {p:.0f} | " \
              f"{m:.1f} ({min(its):.1f}-{max(its):.1f}) | {(p / m - 1) * 100:+.1f}% | {m / p:.3f} |"
        (line,) = (x for x in readme.splitlines() if x.startswith(row))
        if job == "mem-hc-tiny-ga4":
            continue
        assert len(its) == 27
        bound = (HOSTS / "call49" / "predicted-before.txt").read_text().split(name)[1].split()[1]
        lo, hi = spread[bound]
        assert lo <= m / p <= hi, name
        within[job] = abs(p / m - 1) <= 0.15
        allocated = max(float(x) for x in re.findall(r"max allocated: ([\d.]+)", log.read_text()))
        estimate = float(line.rsplit("|", 2)[-2].split("/")[0].replace(",", ""))
        assert f"/ {allocated:,.0f} (" in line and abs(estimate / allocated - 1) <= 0.05
    assert within == {"fam-mixtral-l2": True, "fam-olmoe-l4": True, "fam-qwen3moe-l4": False}


CALL45 = ("fam-qwen3-06b", "fam-tinyllama-11b", "hx-h1536", "mem-l4", "fpg-llama8b-l2-s8192")


def test_call45_table_is_the_logs_and_the_traces() -> None:
    """Device call 45 (written down in 633fe52 before it ran): each job's unprofiled median and its profiled step's GPU
    busy time against the model as committed then (the README's columns, the step as predicted-before.txt rounds it),
    and the reading: busy at 1.03x the model's GPU time or more on three of the four, the control within 0.97-1.03x and
    its step within 5 %."""
    readme = (HOSTS / "README.md").read_text()
    before = predicted(HOSTS / "call45" / "predicted-before.txt")
    ratios = {}
    for name in CALL45:
        its = steady(next((HOSTS / "call45" / "fakepg" / name).glob("first-rank*.log")))
        m, busy = statistics.median(its), _busy(HOSTS / "call45" / "experiments" / name)
        (line,) = (x for x in readme.splitlines() if re.match(rf"\| {re.escape(name)}( \(control\))? \| [\d.]+ \| [\d.]+ \(", x))
        cells = [c.strip() for c in line.split("|")[1:-1]]
        step, gpu = float(cells[1]), float(cells[4])
        assert abs(step - before[f"{name}/first"]) <= 0.5
        assert cells[2] == f"{m:.1f} ({min(its):.1f}-{max(its):.1f})" and cells[3] == f"{(step / m - 1) * 100:+.1f}%"
        assert cells[5] == f"{busy:.1f}" and cells[6] == f"{busy / gpu:.3f}"
        ratios[name] = (busy / gpu, step / m - 1)
    assert sum(ratios[n][0] >= 1.03 for n in CALL45[:4]) == 3
    assert 0.97 <= ratios["fpg-llama8b-l2-s8192"][0] <= 1.03 and abs(ratios["fpg-llama8b-l2-s8192"][1]) <= 0.05


def test_call46_bench_is_the_model_table_and_the_rule_as_checked() -> None:
    """Device calls 46 and 48 (tools/layer_ew_bench.py): the benches' rows are the model's table (call 46's, and call
    48's GQA repeats as a layer lays them out), and the check the rules asked for (tools/layer_path_check.py on call
    45's traces) is the README's tables: SwiGLU, RoPE and the norms within 15 % of their traced kernels (call 46), GQA's
    repeats too (call 48; call 46's contiguous repeat was not, and stays in the data as measured)."""
    from helpers import load_tool

    bench = json.loads((HOSTS / "call46" / "layer-ew-bench.json").read_text())
    call48 = json.loads((HOSTS / "call48" / "layer-ew-bench.json").read_text())
    model = json.loads((REPO / "compiler" / "megatron" / "data" / "layer-elementwise-h200.json").read_text())
    kv = [r for r in call48["rows"] if r["kind"] == "gqa_kv"]
    assert model == {**bench, "rows": bench["rows"] + kv}
    assert len(bench["rows"]) == 113 and len(kv) == 27 and all(r["gpu_seconds"] for r in model["rows"])
    # call 48's control: call 46's contiguous repeats rerun, the GPU's time within 15 % of call 46's in the median
    before = {(r["tokens"], r["width"], r["repeat"]): r["gpu_seconds"] for r in bench["rows"] if r["kind"] == "gqa_repeat"}
    again = [r["gpu_seconds"] / before[(r["tokens"], r["width"], r["repeat"])]
             for r in call48["rows"] if r["kind"] == "gqa_repeat"]
    assert len(again) == 27 and 0.85 <= statistics.median(again) <= 1.15
    check = load_tool("layer_path_check")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert check.main([str(HOSTS / "call45")]) == 0
    readme = (HOSTS / "README.md").read_text()
    call48_text = readme[readme.index("## call48"):]
    rows = [line for line in out.getvalue().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 14 and all(line in (call48_text if "| gqa |" in line else readme) for line in rows)
    for line in rows:
        assert 0.85 <= float(line.split("|")[5]) <= 1.15, line


def test_call38_gemm_call_table_is_the_traces() -> None:
    """Calls 36 and 38's profiled local-expert steps: tools/trace_summary.py --calls aten::mm gives the README's table
    of the host's GEMM calls (the slow ones' share rising with the tokens an expert receives), and --ops accounts for
    every kernel of the step."""
    from helpers import load_tool

    trace = load_tool("trace_summary")
    readme = (HOSTS / "README.md").read_text()
    jobs = (("call36", "fpg-moe-e48-l8", 341), ("call36", "fpg-moe-e32", 1024), ("call36", "fpg-moe-e32-mb4", 2048),
            ("call38", "fpg-moe-e16-gelu", 2048), ("call38", "fpg-moe-e8-f4096", 4096),
            ("call38", "fpg-moe-e16-f1024-mb16", 8192))
    shares = []
    for call, job, tokens in jobs:
        events = trace.load(HOSTS / call / "experiments" / job / "trace.json.gz")  # type: ignore[attr-defined]
        row = trace.calls_text(events, "aten::mm").splitlines()[-1].split("|")  # type: ignore[attr-defined]
        count, median, slow, share, their_ms, their_median, busy = (float(c) for c in row[2:9])
        assert f"| {job} ({call[4:]}) | {tokens} | {count:.0f} | {median:.1f} | {share * 100:.1f} % | {their_median:.1f} | " \
               f"{busy:.1f} of {their_ms:.1f} |" in readme
        shares.append(share)
        (step,) = trace.profiler_steps(events)  # type: ignore[attr-defined]
        gpu = sum(e["dur"] for e in events if e.get("cat") in trace.GPU_CATS  # type: ignore[attr-defined]
                  and step["ts"] <= e["ts"] < step["ts"] + step["dur"]) / 1e3
        assert sum(ms for _, ms in trace.launched_by(events).values()) == pytest.approx(gpu)  # type: ignore[attr-defined]
    assert shares[0] < shares[1] < min(shares[2:5]) and max(shares[2:5]) < shares[5]


def test_trace_compact_keeps_what_every_mode_reads(tmp_path: Path) -> None:
    """tools/trace_summary.py --compact (the fixtures' traces were rewritten by it to fit a device call's carry): the
    flow events and every arg but the correlation and the input shapes dropped, each mode's output the same."""
    from helpers import load_tool

    trace = load_tool("trace_summary")
    raw = {"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#10", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "ts": 1, "dur": 20, "pid": 1, "tid": 1,
         "args": {"Input Dims": [[4, 8]], "Input type": ["c10::BFloat16"], "External id": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 5, "pid": 1, "tid": 1,
         "args": {"correlation": 9, "cbid": 211}},
        {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "ts": 10, "dur": 30, "pid": 0, "tid": 7,
         "args": {"correlation": 9, "grid": [1, 1, 1]}},
        {"ph": "s", "cat": "ac2g", "name": "flow", "ts": 2, "id": 9, "pid": 1, "tid": 1}]}
    full = tmp_path / "full.json"
    full.write_text(json.dumps(raw))
    small = tmp_path / "small.json.gz"
    assert trace.main([str(full), "--compact", str(small)]) == 0  # type: ignore[attr-defined]
    events = trace.load(small)  # type: ignore[attr-defined]
    assert [e.get("args") for e in events] == [None, {"Input Dims": [[4, 8]]}, {"correlation": 9}, {"correlation": 9}]
    for mode in ([], ["--ops"], ["--calls", "aten::mul"]):
        outs = []
        for path in (full, small):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                trace.main([str(path), *mode])  # type: ignore[attr-defined]
            outs.append(out.getvalue())
        assert outs[0] == outs[1] and outs[0]


def _counts(name: str) -> list[list[int]]:
    """Call 41's routers' token counts: one list of the 16 experts' counts a local experts' forward (4 layers x 2 micro
    batches an iteration, 80 iterations)."""
    path = HOSTS / "call41" / "fakepg" / name / "first-counts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_call41_cache_bench_and_runs_are_the_readme_and_its_reading() -> None:
    """Device call 41 (written down in b033cc2 before it ran): cuBLASLt's heuristics cache is what saves a GEMM call's
    plan (B1) and a spread of counts outgrows its 8192 entries (B2), but the runs' counts are new rather than evicted,
    and a large cache moved the job's step by less than the host's drift (R2 fails): nothing changed by the rule."""
    readme = (HOSTS / "README.md").read_text()
    rows = {(r["setting"], r["spread"]): r for r in
            json.loads((HOSTS / "call41" / "cublas_cache-bench.json").read_text())["rows"]}
    assert len(rows) == 6
    slow = {k: statistics.mean(r["seen_slow_share_by_step"][-10:]) for k, r in rows.items()}
    for (setting, spread), r in rows.items():
        line = (f"| {setting or 'unset'} | {r['capacity']} | {spread} | {r['new_median_s'] * 1e6:.1f} | "
                f"{r['seen_median_s'] * 1e6:.1f} | {slow[setting, spread] * 100:.1f} % |")
        assert line.replace("100.0 %", "100 %") in readme, line
    assert rows[None, "normal"]["capacity"] == 8192
    assert all(rows["0", s]["seen_median_s"] >= 100e-6 for s in ("normal", "wide"))  # B1
    assert slow[None, "wide"] >= 0.25 and slow["1048576", "wide"] <= 0.05  # B2
    assert slow[None, "normal"] <= 0.05 and slow["1048576", "normal"] <= 0.05
    # R1: the routers' counts, the same in the three runs (one seed), outgrow the default cache six shapes a count
    runs = ("fpg-moe-e16-f1024-mb16-long", "fpg-moe-e16-f1024-mb16-long-cache", "fpg-moe-e16-f1024-mb16-long-again")
    for name in runs:
        counts = _counts(name)
        assert len(counts) == 640 and all(len(c) == 16 and sum(c) == 16 * 8192 for c in counts)
        flat = [n for c in counts for n in c]
        assert 6 * len(set(flat)) > 5 * 8192 and min(flat) < 100 and max(flat) > 29000
        cv = [statistics.pstdev(c) / statistics.mean(c) for c in counts]
        assert cv[0] < 0.2 and 0.4 < statistics.median(cv) < 0.5 and cv[-1] > 0.6
        seen: set[int] = set()
        new = []
        for i in range(0, 640, 8):
            its = [n for c in counts[i:i + 8] for n in c]
            new.append(sum(n not in seen for n in its) / len(its))
            seen.update(its)
        assert all(0.35 < s < 0.55 for s in new[-10:])  # counts never met before, not evicted ones
    # the runs' table; R2: the large cache within the host's drift of the two default runs
    before = predicted(HOSTS / "call41" / "predicted-before.txt")["fpg-moe-e16-f1024-mb16-long/first"]
    late = {}
    for name in runs:
        its = [ms for ms in steady(HOSTS / "call41" / "fakepg" / name / "first-rank0.log")]
        assert len(its) == 77
        m, late[name] = statistics.median(its), statistics.median(its[37:])
        assert (f"| call41/{name}/first | {m:.1f} | {statistics.median(its[:27]):.1f} | {late[name]:.1f} | {before:.0f} | "
                f"{(before / m - 1) * 100:+.1f}% |") in readme
    default = (late[runs[0]] + late[runs[2]]) / 2
    assert abs(late[runs[1]] / default - 1) < 0.05 < abs(late[runs[2]] / late[runs[0]] - 1)


def test_call42_grid_is_the_logs_and_the_split_stays_by_the_rule() -> None:
    """Device call 42 (written down in 3b9149e before it ran): the tiny GPT at 1-8 layers x 1-8 micro batches on one
    host, unprofiled; the README's table is the logs against the figures committed before, and tools/host_split_fit.py
    gives the README's ratios, whose interval for a micro batch beyond its layers includes the profile's: the split
    stays (the L2 m4 job drifted 30 % within the call)."""
    from helpers import load_tool

    split = load_tool("host_split_fit")
    readme = (HOSTS / "README.md").read_text()
    before = predicted(HOSTS / "call42" / "predicted-before.txt")
    runs = split.runs()  # type: ignore[attr-defined]
    assert len(runs) == 15 and len(before) == 15
    for name, p in before.items():
        layers, micro, ms = runs[name.split("/")[0]]
        assert f"| call42/{name} | {layers} | {micro} | {p:.0f} | {ms:.1f} | {(p / ms - 1) * 100:+.1f}% |" in readme
    result = split.fit()  # type: ignore[attr-defined]
    for key in ("B/P", "a/P", "b/P"):
        lo, hi = result["interval"][key]
        assert f"{key} {result['point'][key]:.3f} ({lo:.3f} to {hi:.3f})".replace(" (", " (90 % ", 1) in readme
    lo, hi = result["interval"]["B/P"]
    assert lo < result["profile"]["B/P"] < hi  # the rule: nothing changes
    refs = result["references_ms"]
    assert len(refs) == 4 and max(refs) / min(refs) > 1.25  # the host's drift, against the 10 % expected


def test_call43_grid_with_references_is_the_logs_and_gives_the_split_the_model_takes() -> None:
    """Device call 43 (written down in a89f2e3 before it ran): call 42's grid twice over beside a reference every three
    runs; the README's table is the logs, the drift factors and the figures committed before, and the fit's interval
    for a micro batch beyond its layers excludes the profile's, so host_time took it (test_host_time checks the value)."""
    from helpers import load_tool

    split = load_tool("host_split_fit")
    call = HOSTS / "call43"
    readme = (HOSTS / "README.md").read_text()
    before = predicted(call / "predicted-before.txt")
    factors = split.drift_factors(call)  # type: ignore[attr-defined]
    assert len(before) == 33 and len(factors) == 24
    for name, p in before.items():
        job = name.split("/")[0]
        ms = statistics.median(steady(call / "fakepg" / job / "first-rank0.log"))
        tail = f"{factors[job]:.3f} | {ms / factors[job]:.1f} |" if job in factors else "- | - |"
        assert f"| call43/{name} | {p:.0f} | {ms:.1f} | {(p / ms - 1) * 100:+.1f}% | {tail}" in readme
    result = split.fit(call)  # type: ignore[attr-defined]
    assert result["grid"] == 24
    for key in ("B/P", "a/P", "b/P"):
        lo, hi = result["interval"][key]
        assert f"{key} {result['point'][key]:.3f} (90 % {lo:.3f} to {hi:.3f})" in readme
    lo, hi = result["interval"]["B/P"]
    assert not lo <= result["profile"]["B/P"] <= hi and 1.5 < result["point"]["B/P"] < 3


def test_fakepg_predict_prices_a_rank_without_the_loss_sync_the_fake_group_drops(tmp_path) -> None:
    """Megatron turns the loss's NaN check off under a fake process group (arguments.py:1591-1593), so a rank the
    harness runs has no host sync at its loss: `fakepg.py predict` prices it so (the figures written down before call
    49 priced the sync: the local-expert blocks' forward host work waited for, 703 and 1298 ms where the runs' model
    is 639 and 1219). A spec that already turns the check off predicts the same; the check on prices more."""
    from helpers import load_tool

    fakepg = load_tool("fakepg")
    spec = REPO / "tests" / "e2e" / "fam-olmoe-l4.yaml"
    text = spec.read_text().replace('args: ["--qk-layernorm"]', 'args: ["--qk-layernorm", "--no-check-for-nan-in-loss-and-grad"]')
    assert text != spec.read_text()
    (tmp_path / "fpg.yaml").write_text((REPO / "tests" / "e2e" / "fpg.yaml").read_text())
    off = tmp_path / "fam-olmoe-l4.yaml"
    off.write_text(text)
    (a,), (b,) = fakepg.predict([spec]), fakepg.predict([off])  # type: ignore[attr-defined]
    assert a == b and a.startswith("fam-olmoe-l4/first ")
    from compiler.load.override import Override
    from compiler.one_pass import compile_spec

    res = compile_spec(str(spec), "s.yaml", overrides=(Override(f"image.base={fakepg.NO_TE_IMAGE}"),),  # type: ignore[attr-defined]
                       render_files=False)
    assert res.facts is not None and res.facts.step_time is not None
    from compiler.megatron.timing import fake_rank_seconds

    with_sync = fake_rank_seconds(res.facts.step_time, "first", 2)  # the spec's own step: the check on
    assert float(a.split()[1]) < with_sync * 1e3 * 0.95


def _window(log: Path, first: int, last: int) -> float:
    its = {int(k): float(ms) for k, ms in _ITER.findall(log.read_text(errors="replace"))}
    return statistics.median(ms for k, ms in its.items() if first <= k <= last)


def _last(log: Path) -> int:
    return max(int(k) for k, _ in _ITER.findall(log.read_text(errors="replace")))


def _misses(counts: Path, first: int, capacity: int) -> float:
    import expert_counts

    lines = [json.loads(line) for line in counts.read_text().splitlines() if line.strip()]
    share = expert_counts.window(expert_counts.miss_shares(lines, 8, capacity), f"{first}-")
    assert share is not None
    return share


def test_call50_the_cache_in_a_long_run_is_the_logs_and_the_counts() -> None:
    """Device call 50 (written down in edd8467 before it ran): 720 iterations of an 8192-tokens-an-expert local-experts
    job with cuBLASLt's default heuristics cache and with 1048576 plans. The README's windows are the logs'; C2 holds
    (85 % of the calls miss 8192 plans over iterations 301 on, 5 % miss 1048576); C1 fails on one of its three clauses
    (the large cache's run falls to 0.91x its own 41-100, where 0.88 was written down), so nothing changed on it."""
    readme = (HOSTS / "README.md").read_text()
    run = HOSTS / "call50" / "fakepg"
    default = run / "fpg-moe-e16-f1024-mb16-soak" / "first-rank0.log"
    cache = run / "fpg-moe-e16-f1024-mb16-soak-cache" / "first-rank0.log"
    assert (_last(default), _last(cache)) == (657, 720)
    d_late, c_late = _window(default, 301, 720), _window(cache, 301, 720)
    assert f"| 301-720 (default: 301-657) | {d_late:.1f} | {c_late:.1f} | {c_late / d_late:.3f} |" in readme
    assert c_late / d_late <= 0.90  # clause 1 holds
    assert d_late / _window(default, 41, 100) >= 0.95  # clause 2 holds
    assert c_late / _window(cache, 41, 100) > 0.88  # clause 3 fails: C1 fails as written
    for name in ("fpg-moe-e16-f1024-mb16-soak", "fpg-moe-e16-f1024-mb16-soak-cache"):
        counts = run / name / "first-counts.jsonl"
        assert _misses(counts, 301, 8192) >= 0.50 and _misses(counts, 301, 1048576) <= 0.15  # C2


def test_call51_the_cache_decided_by_the_counts_is_the_logs() -> None:
    """Device call 51 (written down in 434352e before it ran): the OLMoE-shaped block with both caches; the reading
    follows the default run's counts (m8 - m1M over iterations 101 to the last both logged) and holds by its first
    branch: R at most 0.92 and the saving within 0.5-2x of what the misses give at 110 us a call."""
    readme = (HOSTS / "README.md").read_text()
    run = HOSTS / "call51" / "fakepg"
    default = run / "fam-olmoe-l4-soak" / "first-rank0.log"
    cache = run / "fam-olmoe-l4-soak-cache" / "first-rank0.log"
    last = min(_last(default), _last(cache))
    assert last == 302
    d, c = _window(default, 101, last), _window(cache, 101, last)
    assert f"| W: 101-302 | {d:.1f} | {c:.1f} | {c / d:.3f} |" in readme
    m8 = _misses(run / "fam-olmoe-l4-soak" / "first-counts.jsonl", 101, 8192)
    m1m = _misses(run / "fam-olmoe-l4-soak" / "first-counts.jsonl", 101, 1048576)
    assert f"m8 = {m8:.2f}" in readme and f"m1M = {m1m:.2f}" in readme
    saving = (m8 - m1m) * 3072 * 110e-6 * 1e3
    assert m8 - m1m >= 0.30 and c / d <= 0.92 and 0.5 <= (d - c) / saving <= 2.0


def test_call52_the_large_cache_on_counts_that_fit_is_the_logs() -> None:
    """Device call 52 (written down in 0f8de90 before it ran): the Qwen3-30B-A3B-shaped block at 256 tokens an expert,
    default cache, large cache, default again. The counts fit the default cache (m8 - m1M 0.03); R is 0.92 against
    the defaults' mean, whose two runs drifted 15 % apart, the large-cache run (between them in time) 0.7 % under the faster: no cost the drift does not
    swamp, so the launch's setting stays."""
    readme = (HOSTS / "README.md").read_text()
    run = HOSTS / "call52" / "fakepg"
    names = ("fam-qwen3moe-l4-soak", "fam-qwen3moe-l4-soak-cache", "fam-qwen3moe-l4-soak-again")
    logs = [run / n / "first-rank0.log" for n in names]
    last = min(_last(log) for log in logs)
    assert last == 95
    first, cache, again = (_window(log, 41, last) for log in logs)
    for name, log, w in zip(names, logs, (first, cache, again)):
        whole = statistics.median(steady(log))
        assert f"| call52/{name}{' (default)' if 'cache' not in name else ' (1048576)'} | {whole:.1f} | " \
               f"{_window(log, 4, 40):.1f} | {w:.1f} |" in readme
    m8 = _misses(run / names[0] / "first-counts.jsonl", 41, 8192)
    m1m = _misses(run / names[0] / "first-counts.jsonl", 41, 1048576)
    assert f"m8 = {m8:.2f}" in readme and f"m1M = {m1m:.2f}" in readme and m8 - m1m <= 0.10
    assert cache / ((first + again) / 2) < 0.95 and abs(again / first - 1) > 0.05  # below, and the host drifted
    assert abs(cache / min(first, again) - 1) < 0.01  # 0.7 % under the faster default run
