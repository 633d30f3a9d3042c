#!/usr/bin/env python3
"""Leave-one-out validation of the step-time model (compiler/megatron/timing.py) on every kept H200 run.

    python tools/validate_timing.py            # the table, the folds and the published check
    python tools/validate_timing.py --write    # also the FIT block of timing.py and docs/performance-model.md

Runs: every committed H200 log with iteration times (_runs_spec below): tests/fixtures/measurements,
the Transformer Engine runs, the GPU failed-run logs, the end-to-end, stop-and-resume and MoE round-trip
runs. Each run's inputs come from Megatron's own argument dump in
its log (the model, layout, batch, precision, fusions, attention path) and its parameter count line;
the measured figure is the median `elapsed time per iteration` of the lines after iteration 3 (and
after the first logged interval).

Fitted: on the runs without Transformer Engine only HOST_SPEED, the scale of the host work the
profiled runs measured (compiler/megatron/host_time.py: per layer pass, per micro batch, per iteration
and parameter tensor); on the TE runs TE's host per layer pass and per iteration and its fused
attention's rate; each by least squares on the relative error of the runs in the fit set. Runs that shared their GPU with other jobs (`contended`: the failed-run batches
start several jobs at once on one H200, tests/fixtures/failed-runs/gpu-*summary.txt) are never fitted on,
a rule fixed before any result was seen: their time is not their own. Runs with an option the model does
not price (UNPRICED: --deterministic-mode) are not fitted on either, so that their unpriced cost does not
move the constants every other job is priced with; their error still counts. Leave-one-out: each
uncontended run is predicted by the fit on all the others. MODEL_ERROR is the 90th percentile of the folds' |error| (perfdoc.model_error).
Host-calibrated (resources.host_time_factor): each run predicted again with the fold's fit and its host's factor on
every host figure, fitted on the other kept runs of its device call (one lent host), never on the run itself.
The published multi-GPU runs are checked by tools/published_check.py (imported here for the doc).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

from compiler.megatron.flops import FlopsArgs  # noqa: E402
from compiler.megatron.gpus import GPUS  # noqa: E402
from compiler.megatron import host_time  # noqa: E402
from compiler.megatron.host_calibration import steady_iterations  # noqa: E402
from compiler.megatron.layer_time import Model  # noqa: E402
from compiler.megatron.pretrain import padded_vocab_size  # noqa: E402
from compiler.megatron.schedule import bubble_fraction  # noqa: E402
from compiler.megatron.data_loader import loader_seconds  # noqa: E402
from compiler.megatron.timing import (FUSED_ATTENTION_SCORE_S, Parallel, iteration_tensors, pace,  # noqa: E402
                                      step_time)
from fakepg import ENV_LINE  # noqa: E402
from measurements import parse_args_dump  # noqa: E402

FIX = REPO / "tests" / "fixtures"
MODULE = REPO / "compiler" / "megatron" / "timing.py"
DOC = REPO / "docs" / "performance-model.md"
_PARAMS = re.compile(r"number of parameters on \(tensor, pipeline\) model parallel rank \(\d+, \d+\): (\d+)")
_VOCAB = re.compile(r"> padded vocab \(size: (\d+)\)")
_EXIT = re.compile(r"\[exiting program after receiving SIGTERM\.\] datetime: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)")


class Run(NamedTuple):
    name: str
    source: str  # the log(s), relative to the repository
    args: dict[str, str]
    params: int
    measured_s: float
    steady: int
    contended: bool
    unpriced: str  # an option the model does not price ("": none): shown and counted, never fitted on
    gpus_per_worker: int  # the physical host's GPUs (the 2-worker run ran on one 2-GPU host)
    optimizer: str  # what Megatron imported (host_time.optimizer_impl): "torch" where it warned, else "te"
    stage: str = ""  # a --fake-process-group rank run alone (tools/fakepg.py): its pipeline stage, "first" or "last"
    void: str = ""  # why its time is not its configuration's though it ran alone ("": it is): shown, never fitted or counted


def _fake_ranks() -> list[tuple[str, Path, Path, str]]:
    """The --fake-process-group ranks a device call ran one at a time (tools/fakepg.py run with SEQUENTIAL=1,
    h200-hosts/callN/fakepg/<layout>/<stage>-rankN.log): (name, its log, the log with the layout's argument
    dump, its stage). Only rank 0 dumps Megatron's arguments; the other ranks ran the same command."""
    out = []
    logs = sorted((FIX / "h200-hosts").glob("call*/fakepg/*/*-rank*.log"))

    def command(log: Path) -> str:  # the first line: `# WORLD_SIZE=.. RANK=.. <how> <pretrain_gpt.py's arguments>`
        return re.sub(r"^# WORLD_SIZE=\d+ RANK=\d+ python (pretrain_gpt.py|tools/fakepg.py rank GO MEGATRON) ", "",
                      log.read_text(errors="replace").split("\n", 1)[0])

    dumps = [x for x in logs if x.name == "first-rank0.log"]
    for log in logs:
        stage = log.stem.split("-rank")[0]
        call = log.relative_to(FIX / "h200-hosts").parts[0]
        # rank 0's argument dump of the same command: this call's, or another call's (call 29 reran ranks)
        dump = next((d for d in dumps if d.parent.name == log.parent.name and command(d) == command(log)), None)
        if dump is None:
            print(f"{log.relative_to(REPO)}: no rank 0 of the same command dumped Megatron's arguments; left out",
                  file=sys.stderr)
            continue
        out.append((f"{call}/{log.parent.name}/{stage}", log, dump, stage))
    return out


_GRAD_NORM = re.compile(r"\| grad norm: ([^ |]+) \|")
# A stage after the first receives nothing under a fake process group: the fake receive leaves its torch.empty buffer
# as it was. Where that went NaN (the grad norm nan) or zero (the grad norm 0: a last stage's loss then ln(its vocabulary
# shard)), its GEMMs ran on NaN or zeros, which the H200 runs in 12-17 % less time than data once its clock settles under the
# power limit (tools/gemm_data_bench.py, tests/fixtures/h200-hosts/call28): not a rank's time
VOID_DATA = ("its stage's received activations went {what} (the fake receive's unfilled buffer: grad norm {norm}); the "
             "H200 runs GEMMs on NaN or zeros in 12-17 % less time than on data (h200-hosts/call28): not a rank's time")


# tools/fakepg.py rank's line where it fills what the fake receive returns (FAKEPG_FILL=1, device call 29)
FILLED = "# fakepg: FAKEPG_FILL=1"
UNFILLED = ("a pipelined rank on the fake receive's unfilled buffer (finite garbage: gradient norms up to 1e18), not on "
            "data; its rerun with the buffer filled (h200-hosts/call29) is counted")


def void_data(text: str, pipelined: bool = False) -> str:
    """Why a fake-process-group rank's time is not a rank's ("" where it is): its last grad norm NaN or zero
    (VOID_DATA), or a pipelined rank whose received buffers were not filled (UNFILLED)."""
    norms = _GRAD_NORM.findall(text)
    last = norms[-1] if norms else ""
    if last.lower() == "nan" or (last and float(last) == 0.0):
        return VOID_DATA.format(what="NaN" if last.lower() == "nan" else "zero", norm=last)
    return UNFILLED if pipelined and FILLED not in text else ""


def _runs_spec() -> list[tuple[str, list[Path], bool, int, str]]:
    """(name, logs, contended, GPUs of the host, timestamp after which its iterations count ("": all))."""
    out = [(p.parent.name, [p], False, 1, "") for p in sorted((FIX / "measurements").glob("*/train.log"))]
    # Transformer Engine's runs (issue 27, tests/fixtures/te-h200/measurements): each alone on the GPU too
    out += [(p.parent.name, [p], False, 1, "") for p in sorted((FIX / "te-h200" / "measurements").glob("*/train.log"))]
    # issue 26's device calls 6-12 (tests/fixtures/h200-hosts/README.md): each run alone on the GPU but those
    # under a call's contended/ (a launch given twice ran as two copies at once); the edited launches of
    # experiments/ (the profiler, the loader in the training process, Megatron's timers) are logged as run.log
    hosts = FIX / "h200-hosts"
    out += [(str(p.parent.relative_to(hosts)), [p], "contended" in p.relative_to(hosts).parts, 1, "")
            for p in sorted(hosts.glob("call*/**/train.log"))]
    out.append(("h200-pretrain-tp1-run", [FIX / "h200-pretrain-tp1-run" / "train.log"], False, 1, ""))
    # 2 workers x 1 GPU started on one 2 x H200 host: NCCL connects them over the host's NVLink
    out.append(("h200-pretrain-2workers-run", [FIX / "h200-pretrain-2workers-run" / "node-0.log",
                                                FIX / "h200-pretrain-2workers-run" / "node-1.log"], False, 2, ""))
    for d in sorted((FIX / "failed-runs").glob("gpu-*")):
        log = d / "run" / "train.log"
        if log.exists():
            out.append((f"failed-runs/{d.name}", [log], True, 1, ""))
    # tools/stop_resume_device.sh starts stop-ref and stop-resume together and, once both have ended, the
    # restart and stop-damaged together: contended, but for stop-ref's iterations after stop-resume's first
    # start exited (its own log's timestamp), when stop-ref ran alone until it finished
    sr = FIX / "h200-stop-resume"
    exits = _EXIT.findall((sr / "stop-resume" / "train.log").read_text(errors="replace"))
    if exits:
        out.append(("h200-stop-resume/stop-ref (alone)", [sr / "stop-ref" / "train.log"], False, 1, exits[0]))
    out += [(f"h200-stop-resume/{n}", [sr / n / "train.log"], True, 1, "") for n in ("stop-ref", "stop-resume", "stop-damaged")]
    # tools/bridge/moe_device.sh runs the reference and the stopped run side by side (moe-device/README.md)
    out += [(f"moe-device/{n}", [FIX / "moe-device" / n / "train.log"], True, 1, "") for n in ("run3-reference", "run3-stopped")]
    return out


def _optimizer(log: str) -> str:
    """What Megatron imported (host_time.optimizer_impl): "torch" where the log has its fallback warning, else "te"."""
    return "torch" if host_time.TORCH_OPTIMIZER_WARNING in log else "te"


def load_runs() -> list[Run]:
    runs = []
    for name, logs, contended, gpw, after in _runs_spec():
        text = "\n".join(p.read_text(errors="replace") for p in logs)
        args = parse_args_dump(text.splitlines())
        params = [int(m.group(1)) for m in _PARAMS.finditer(text)]
        vocab = _VOCAB.search(text)
        if args.get("vocab_size") in (None, "None"):  # a tokenizer's: Megatron logs what it padded, or the padded size
            padded = vocab.group(1) if vocab else args.get("padded_vocab_size")
            if padded not in (None, "None"):
                args["vocab_size"] = padded
        # host_calibration's rule, as `megatron-compile calibrate` reads a log: the median after the warm-up
        steady = steady_iterations(text, after)
        if not args or not params or len(steady) < 2:
            continue
        runs.append(Run(name, ", ".join(str(p.relative_to(REPO)) for p in logs), args, max(params),
                        statistics.median(steady) / 1e3, len(steady), contended, unpriced(args), gpw,
                        _optimizer(text)))
    for name, log, dump, stage in _fake_ranks():
        text = log.read_text(errors="replace")
        args = parse_args_dump(dump.read_text(errors="replace").splitlines())
        params = [int(m.group(1)) for m in _PARAMS.finditer(text)]  # the rank's own
        steady = steady_iterations(text, "")
        if not args or not params or len(steady) < 2:
            continue
        why = "; ".join(x for x in (unpriced(args), unpriced_env(text)) if x)
        runs.append(Run(name, str(log.relative_to(REPO)), args, max(params), statistics.median(steady) / 1e3,
                        len(steady), False, why, 1,
                        _optimizer(text), stage,
                        void_data(text, _i(args, "pipeline_model_parallel_size", 1) > 1)))
    return runs


# Options of a run's arguments the model does not price, and why
UNPRICED = {
    "deterministic_mode": "--deterministic-mode, which the model does not price: torch.use_deterministic_algorithms "
                          "(arguments.py:1543) fills every uninitialized allocation and takes deterministic kernels",
}


def unpriced(args: dict[str, str]) -> str:
    return "; ".join(why for key, why in UNPRICED.items() if _b(args, key))


def unpriced_env(text: str) -> str:
    """A fake-process-group rank's environment variables its plan entry set (tools/fakepg.py ENV_LINE), which the
    model does not price (call 41's CUBLASLT_HEURISTICS_CACHE_CAPACITY)."""
    found = [line[len(ENV_LINE):].strip() for line in text.splitlines() if line.startswith(ENV_LINE)]
    return f"run with {', '.join(found)} in its environment, which the model does not price" if found else ""


def _b(args: dict[str, str], key: str) -> bool:
    return args.get(key) == "True"


def _i(args: dict[str, str], key: str, default: int | None = None) -> int | None:
    v = args.get(key)
    return int(v) if v not in (None, "None") else default


def _freq(text: str | None) -> int | list[int]:
    """--moe-layer-freq as the dump prints it: an int, or the pattern as a list ("[0, 1, 1, 1]")."""
    if text in (None, "None"):
        return 1
    assert text is not None
    return [int(x) for x in text.strip("[]").split(",")] if text.startswith("[") else int(text)


def inputs(run: Run) -> tuple[FlopsArgs, Parallel]:
    """The model and layout a run's argument dump says."""
    a = run.args
    heads = _i(a, "num_attention_heads")
    fa = FlopsArgs(
        num_layers=_i(a, "num_layers"), hidden_size=_i(a, "hidden_size"), num_attention_heads=heads,
        kv_channels=_i(a, "kv_channels"), ffn_hidden_size=_i(a, "ffn_hidden_size"), seq_length=_i(a, "seq_length"),
        padded_vocab_size=padded_vocab_size(_i(a, "vocab_size"), _i(a, "make_vocab_size_divisible_by", 128),
                                            _i(a, "tensor_model_parallel_size", 1)), group_query_attention=_b(a, "group_query_attention"),
        num_query_groups=_i(a, "num_query_groups"), swiglu=_b(a, "swiglu"), num_experts=_i(a, "num_experts"),
        moe_router_topk=_i(a, "moe_router_topk", 2), moe_ffn_hidden_size=_i(a, "moe_ffn_hidden_size"),
        moe_layer_freq=_freq(a.get("moe_layer_freq")),
        moe_shared_expert_intermediate_size=_i(a, "moe_shared_expert_intermediate_size"),
        mtp_num_layers=_i(a, "mtp_num_layers"), multi_latent_attention=_b(a, "multi_latent_attention"),
        q_lora_rank=_i(a, "q_lora_rank"), kv_lora_rank=_i(a, "kv_lora_rank", 32), qk_head_dim=_i(a, "qk_head_dim", 128),
        qk_pos_emb_head_dim=_i(a, "qk_pos_emb_head_dim", 64), v_head_dim=_i(a, "v_head_dim", 128))
    world = _i(a, "world_size", 1)
    gpw = min(run.gpus_per_worker, world)
    precision = "fp16" if _b(a, "fp16") else "fp8" if a.get("fp8") not in (None, "None") else "bf16"
    te = a.get("transformer_impl") == "transformer_engine"
    par = Parallel(
        tensor=_i(a, "tensor_model_parallel_size", 1), pipeline=_i(a, "pipeline_model_parallel_size", 1),
        context=_i(a, "context_parallel_size", 1), data=_i(a, "data_parallel_size", 1),
        micro_batch=_i(a, "micro_batch_size"), global_batch=_i(a, "global_batch_size"),
        gpus_per_worker=gpw, workers=world // gpw, expert=_i(a, "expert_model_parallel_size", 1),
        virtual_pipeline=_i(a, "virtual_pipeline_model_parallel_size"),
        sequence_parallel=_b(a, "sequence_parallel"), distributed_optimizer=_b(a, "use_distributed_optimizer"),
        recompute=None if a.get("recompute_granularity") in (None, "None") else a["recompute_granularity"],
        recompute_method=None if a.get("recompute_method") in (None, "None") else a["recompute_method"],
        recompute_num_layers=_i(a, "recompute_num_layers"),
        overlap_grad_reduce=_b(a, "overlap_grad_reduce"), overlap_param_gather=_b(a, "overlap_param_gather"),
        local_attention=a.get("transformer_impl") == "local",
        fused_kernels=_b(a, "bias_gelu_fusion") and _b(a, "bias_dropout_fusion"),
        fused_softmax=_b(a, "masked_softmax_fusion"), grad_accumulation_fusion=_b(a, "gradient_accumulation_fusion"),
        # Megatron's bias_activation_fusion (argument_utils.py:312-314): SwiGLU's flag, else GeLU's (off without biases)
        bias_activation_fusion=_b(a, "bias_swiglu_fusion") if _b(a, "swiglu") else _b(a, "bias_gelu_fusion"),
        precision=precision, stack="te" if te else "local", grouped_gemm=te and _b(a, "moe_grouped_gemm"),
        cross_entropy_fusion=_b(a, "cross_entropy_loss_fusion"), nan_check=_b(a, "check_for_nan_in_loss_and_grad"),
        attention_mask=a.get("create_attention_mask_in_dataloader") != "False", optimizer=run.optimizer,
        model=Model(bias=_b(a, "add_bias_linear"), rope=a.get("position_embedding_type") == "rope",
                    learned_position=a.get("position_embedding_type") == "learned_absolute",
                    layernorm=a.get("normalization") != "RMSNorm", dtype="fp16" if precision == "fp16" else "bf16",
                    untied=_b(a, "untie_embeddings_and_output_weights"), qk_norm=_b(a, "qk_layernorm")))
    return fa, par


# Fused attention tried for the Transformer Engine runs: its FLOPs' share of the layer's GEMM rate (its cost
# per causal score is the measured dropout's, timing.FUSED_ATTENTION_SCORE_S)
SHARES = tuple(round(0.2 + 0.05 * i, 2) for i in range(11))
# Transformer Engine's host share of a micro batch before the loss's sync, tried
TE_FORWARD_SHARES = (0.5, 0.6, 0.7, 0.8)
# Transformer Engine's host per micro batch beyond its layers, tried (seconds): te-b1-ga8 and te-l4-ga4
# (tests/fixtures/h200-hosts/call7/te), the TE runs with several micro batches a step, tell it from the
# iteration's
TE_MICROBATCH = tuple(k * 4e-3 for k in range(7))


class Fit(NamedTuple):
    """The fitted constants: the host's speed (the runs without TE), Transformer Engine's host per layer
    pass and per iteration and its fused attention's rate (the TE runs)."""

    speed: float
    te_host: float = 0.0
    share: float = 0.6  # fused attention: its share of the layer's GEMM rate
    te_it: float = 0.0  # TE's host per iteration (FusedAdam, TE's multi-tensor grad norm: another tail)
    te_forward: float = 0.5  # TE's host share of a micro batch before the loss's sync
    te_mb: float = 0.0  # TE's host per micro batch beyond its layers
    host: float = 1.0  # the host's factor on every host figure (host_factor: from the same host's other runs)


class Parts(NamedTuple):
    """A run's prediction as a function of the fitted constants."""

    m: int
    pp: int
    v: int
    # per fused-attention share (one entry for a run without TE): per stage (GPU s, MoE launches s, TE's MoE host
    # s, layer passes, local expert passes, a local expert's GPU s)
    stages: tuple[tuple[tuple[float, float, float, float, float, float], ...], ...]
    rest: float  # communication and optimizer, exposed
    te: bool
    nan_check: bool
    tensors: int  # parameter tensors the optimizer walks one by one (timing.iteration_tensors)
    loader: float  # the data loader's least time a step (timing.loader_seconds: its causal masks)
    layer_factor: float  # its layer pass's host time over the GPT layer's (host_time.layer_factor)
    rank_stage: int = -1  # a fake-process-group rank: the index of its stage in `stages` (-1: the whole step)


def parts(run: Run) -> Parts:
    fa, par = inputs(run)
    te = par.stack.startswith("te")
    table = []
    for share in (SHARES if te else (0.6,)):
        step = step_time(fa, par._replace(fused_attention_share=share, fused_attention_score_s=FUSED_ATTENTION_SCORE_S),
                         GPUS["h200"],
                         run.params, host_speed=0.0, host_per_iteration=0.0, te_host_per_layer=0.0)
        table.append(tuple((s.gpu_s, s.launch_s, s.moe_host_s, s.passes, s.expert_passes, s.expert_gpu_s)
                           for s in step.stages))
    # a fake-process-group rank skips every collective: of the rest only its optimizer (timing.fake_rank_seconds)
    kept = ("optimizer",) if run.stage else tuple(t.name for t in step.terms if t.name not in
                                                  ("compute", "bubble", "iteration", "data-loader"))
    rest = sum(t.seconds for t in step.terms if t.exposed and t.name in kept)
    rank_stage = [s.stage for s in step.stages].index(run.stage) if run.stage else -1
    return Parts(par.microbatches, par.pipeline, par.virtual_pipeline or 1, tuple(table), rest, te,
                 _b(run.args, "check_for_nan_in_loss_and_grad"), iteration_tensors(fa, par), loader_seconds(fa, par),
                 host_time.layer_factor(fa, par), rank_stage)


def _stages(p: Parts, f: Fit) -> list[tuple[float, float, float]]:
    """Each stage's (micro batch, GPU, host with MoE's waits) seconds as timing.step_time takes them, with the
    fit's constants: a stage's host is its MoE launches, the profiled micro batch at the host's speed and its
    layer passes (TE's fitted figure, or the profiled one)."""
    stages = p.stages[SHARES.index(f.share)] if p.te else p.stages[0]
    layer = (f.te_host if p.te else f.speed * host_time.LAYER_PASS_S) * p.layer_factor
    forward = f.te_forward if p.te else host_time.MICROBATCH_FORWARD_SHARE
    beyond = f.te_mb if p.te else f.speed * host_time.MICROBATCH_S
    out = []
    for g, launch, moe, n, experts, expert_gpu in stages:
        host = (launch + beyond + layer * n) * f.host
        micro, moe_host = host_time.stage_microbatch(g, host, p.nan_check, forward, moe * f.host, experts, expert_gpu,
                                                     f.speed * f.host)
        out.append((micro, g, host + moe_host))
    return out


def _step(p: Parts, f: Fit) -> float:
    """timing.step_time's sum with the fit's constants; for a fake-process-group rank timing.fake_rank_seconds's."""
    per = [micro for micro, _, _ in _stages(p, f)]
    it = f.te_it if p.te else f.speed * (host_time.ITERATION_S + host_time.PER_TENSOR_S * p.tensors)
    if p.rank_stage >= 0:
        return p.m * per[p.rank_stage] + p.rest + it * f.host
    # the schedule's bubble, as timing.step_time takes it: (pp - 1) / v micro batches of the mean stage
    bubble = bubble_fraction(p.pp, p.v if p.v > 1 else None, p.m) * p.m * sum(per) / len(per)
    return p.m * max(per) + bubble + p.rest + it * f.host


def predict(p: Parts, f: Fit) -> float:
    """timing.step_time's seconds with the fit's constants: the step, or the data loader's bound where longer."""
    return max(_step(p, f), p.loader)


def bound(p: Parts, f: Fit) -> str:
    """What sets the run's pace by the fit: timing.pace on its slowest stage (a fake-process-group rank's own)."""
    stages = _stages(p, f)
    _, gpu, host = stages[p.rank_stage] if p.rank_stage >= 0 else max(stages)
    return pace(host, gpu, p.loader > _step(p, f))


# Host speeds tried: 0.005 to 1.5 of the profiled figures
SPEEDS = tuple(k * 0.005 for k in range(1, 301))


def _sse(items: list[tuple[Parts, float]], f: Fit) -> float:
    return sum((predict(p, f) / y - 1) ** 2 for p, y in items)


def _fit_host(ps: list[Parts], ys: list[float], f: Fit) -> Fit:
    """The host's speed on the runs without TE, minimising the summed squared relative error."""
    local = [(p, y) for p, y in zip(ps, ys) if not p.te]
    return min((f._replace(speed=k) for k in SPEEDS), key=lambda g: _sse(local, g))


# A host's factor on every host figure, tried: 0.4 to 2.5
HOST_FACTORS = tuple(round(0.4 + 0.01 * k, 2) for k in range(211))


def device_call(name: str) -> str | None:
    """The device call (tests/fixtures/h200-hosts/callN: one lent host) a run's name says it ran in, if any."""
    return name.split("/")[0] if name.startswith("call") else None


def host_group(run: Run) -> str | None:
    """The machine a run ran on, where the repository knows it and it says something about the host: a device call's
    runs shared one lent host (tests/fixtures/h200-hosts/callN); the older fixtures do not say which call each came
    from. A rank of a multi-GPU layout run with --fake-process-group (GPU-bound compute, which the factor barely moves:
    fitted on them it swings to the ends of its range) is neither calibrated nor calibrates; a one-GPU run through the
    same harness (world 1: nothing faked, a whole training run, calls 32 and 34's local experts) is a run like any."""
    if run.stage and run.args.get("world_size", "1") != "1":
        return None
    return device_call(run.name)


def host_factor(items: list[tuple[Parts, float]], f: Fit) -> float:
    """The factor on every host figure that fits the runs `items` of one host best (least squares on the
    relative error), as `megatron-compile calibrate` gives it from one run's log; 1 without a run."""
    if not items:
        return 1.0
    return min(HOST_FACTORS, key=lambda h: _sse(items, f._replace(host=h)))


def _closed_form(base: list[tuple[float, float]]) -> float:
    """The constant c >= 0 added to every prediction b that minimises sum(((b + c) / y - 1)^2)."""
    return max(0.0, sum((1 - b / y) / y for b, y in base) / sum(1 / y ** 2 for _, y in base))


def _fit_te(ps: list[Parts], ys: list[float], f: Fit) -> Fit:
    """On the TE runs: TE's host per layer pass (0.2 ms grid up to 10 ms), per micro batch beyond its
    layers (TE_MICROBATCH), its fused attention's share (SHARES), its host's forward share
    (TE_FORWARD_SHARES) and its host per iteration (closed form)."""
    te = [(p, y) for p, y in zip(ps, ys) if p.te]
    if not te:
        return f
    best = (float("inf"), f)
    for share, forward, mb in ((s, a, b) for s in SHARES for a in TE_FORWARD_SHARES for b in TE_MICROBATCH):
        for k in range(51):
            g = f._replace(te_host=k * 2e-4, share=share, te_it=0.0, te_forward=forward, te_mb=mb)
            base = [(predict(p, g), y) for p, y in te]
            c = _closed_form(base)
            sse = sum(((b + c) / y - 1) ** 2 for b, y in base)
            if sse < best[0]:
                best = (sse, g._replace(te_it=c))
    return best[1]


# Fit's fields _fit_te sets: a TE run's prediction reads none of the others (its host is TE's fitted figures, it has no
# local expert passes: _stages, _step), so the TE fit depends on the TE runs alone
TE_FIELDS = ("te_host", "share", "te_it", "te_forward", "te_mb")


def fit(ps: list[Parts], ys: list[float], te_fits: dict[tuple[tuple[int, float], ...], Fit] | None = None) -> Fit:
    """The host's speed on the runs without TE, then the TE constants on the TE runs. With `te_fits` (validate's, for
    its folds) the TE constants of a set of TE runs are searched once: every fold that leaves out a run without TE has
    the same TE runs, and their grid search is most of the time."""
    host = _fit_host(ps, ys, Fit(0.0))
    if te_fits is None:
        return _fit_te(ps, ys, host)
    key = tuple((id(p), y) for p, y in zip(ps, ys) if p.te)  # the same Parts objects in every fold
    if key not in te_fits:
        te_fits[key] = _fit_te(ps, ys, host)
    return host._replace(**{name: getattr(te_fits[key], name) for name in TE_FIELDS})


def validate() -> dict[str, Any]:
    runs = load_runs()
    ps = [parts(r) for r in runs]
    fit_idx = [i for i, r in enumerate(runs) if not r.contended and not r.void and not r.unpriced]
    te_fits: dict[tuple[tuple[int, float], ...], Fit] = {}
    full = fit([ps[i] for i in fit_idx], [runs[i].measured_s for i in fit_idx], te_fits)
    rows, folds = [], []
    for i, r in enumerate(runs):
        if i not in fit_idx:  # never fitted on: the full fit is out of sample for it
            h = full
        else:
            others = [j for j in fit_idx if j != i]
            h = fit([ps[j] for j in others], [runs[j].measured_s for j in others], te_fits)
            folds.append(h)
        pred = predict(ps[i], h)
        # calibrated: the fold's fit with the host's factor from its other kept runs (never this one)
        group = host_group(r)
        same = [(ps[j], runs[j].measured_s) for j in fit_idx if j != i and group and host_group(runs[j]) == group]
        factor = host_factor(same, h)
        calibrated = predict(ps[i], h._replace(host=factor))
        rows.append({"name": r.name, "source": r.source, "measured_ms": r.measured_s * 1e3, "steady": r.steady,
                     # "contended": its time is not its configuration's (another job on the GPU, or `void`)
                     "loo_ms": pred * 1e3, "error": pred / r.measured_s - 1, "contended": r.contended or bool(r.void),
                     "void": r.void, "stage": r.stage,
                     "calibrated_ms": calibrated * 1e3, "calibrated_error": calibrated / r.measured_s - 1,
                     "host_factor": factor, "calibrated_by": len(same),
                     "unpriced": r.unpriced,
                     "in_sample_ms": predict(ps[i], full) * 1e3, "te": ps[i].te, "bound": bound(ps[i], full)})
    own = [row for row in rows if not row["contended"]]
    worst = max(abs(row["error"]) for row in own)
    return {"rows": rows, "full": full, "folds": folds, "worst": worst,
            "worst_calibrated": max(abs(row["calibrated_error"]) for row in own),
            "worst_all": max(abs(row["error"]) for row in rows)}


class Floor(NamedTuple):
    floor: float  # the least worst |error| one figure can have on the group: (max - min) / (max + min)
    rows: list[dict[str, Any]]  # validate's rows, slowest first


def floors(rows: list[dict[str, Any]], one_host: bool = False) -> list[Floor]:
    """Kept runs the model reads as one job, grouped, with the floor under any estimate of them: the runs with its
    GPU to itself and no option the model does not read whose in-sample estimates agree to the microsecond (the same
    priced arguments; a run on other hosts or in other launches of one job). Any figure p for a group is off by at
    least (max - min) / (max + min) on its fastest or its slowest run (p = 2 max min / (max + min) balances the two),
    so no estimate that reads only the job meets a threshold under that. With `one_host`, only runs of one device call
    (one lent host) group together. Largest floor first; groups of one left out."""
    groups: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for row in rows:
        if not row["contended"] and not row["unpriced"]:
            call = device_call(row["name"]) if one_host else ""
            if call is None:
                continue  # the oldest fixtures do not record their host
            groups.setdefault((round(row["in_sample_ms"], 3), call), []).append(row)
    out = []
    for group in groups.values():
        if len(group) > 1:
            ms = [r["measured_ms"] for r in group]
            out.append(Floor((max(ms) - min(ms)) / (max(ms) + min(ms)),
                             sorted(group, key=lambda r: -r["measured_ms"])))
    return sorted(out, key=lambda f: -f.floor)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    ns = parser.parse_args(argv)
    result = validate()
    for row in result["rows"]:
        flag = " contended" if row["contended"] else ""
        print(f"{row['name']:<36} {row['measured_ms']:9.1f} {row['loo_ms']:9.1f} {row['error'] * 100:+7.1f}% "
              f"{row['calibrated_ms']:9.1f} {row['calibrated_error'] * 100:+7.1f}% x{row['host_factor']:.2f}{flag}")
    f = result["full"]
    print(f"fit: host speed {f.speed:.3f} of the profiled figures, TE per layer "
          f"{f.te_host * 1e3:.2f} ms (per micro batch {f.te_mb * 1e3:.1f} ms, per iteration {f.te_it * 1e3:.2f} ms, forward share {f.te_forward:.1f}), fused "
          f"attention {f.share:.2f} of the GEMM rate; "
          f"LOO worst {result['worst'] * 100:.1f}% (all runs {result['worst_all'] * 100:.1f}%), calibrated by the "
          f"host's other runs {result['worst_calibrated'] * 100:.1f}%")
    if ns.write:
        import perfdoc

        perfdoc.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
