"""AIStudio's slow-training detection ("训练变慢检测"), which reads Megatron-LM's iteration lines
(`iteration N/ M | … | elapsed time per iteration (ms): X |`, printed by the last rank every
logging.interval iterations): when to turn it on, and when it cannot work. Warnings only.

And the seed's routing: jobs that belong to another tool on the platform (LoRA/QLoRA fine-tuning
to LLaMA Factory, GRPO/PPO to verl) are named as such.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterator

from ...diagnostics import Diagnostic, Severity
from ...megatron.flags import arg_flag_name
from ..context import RuleContext

LONG_RUN_SECONDS = 2 * 3600  # the seed: turn detection on when the run becomes long, formal training
LONG_RUN_ITERATIONS = 5000  # the same, when the step time is unknown
TREND_POINTS = 20  # fewer iteration lines than this over a run shows no step-time trend
# (what a flag starts with or a script's name holds, the job, the tool); MLA's --q-lora-rank and
# --kv-lora-rank are Megatron's own and are not LoRA
ROUTES = (("lora", "LoRA/QLoRA fine-tuning", "LLaMA Factory"), ("qlora", "LoRA/QLoRA fine-tuning", "LLaMA Factory"),
          ("peft", "LoRA/QLoRA fine-tuning", "LLaMA Factory"), ("grpo", "GRPO reinforcement learning", "verl"),
          ("ppo", "PPO reinforcement learning", "verl"))


def check_slow_training(ctx: RuleContext) -> Iterator[Diagnostic]:
    if not ctx.facts.engine.watches_step_time:
        return
    res: Any = ctx.sections["resources"]
    t: Any = ctx.sections["training"]
    where = ("resources", "slow_training_detection")
    if res.slow_training_detection and not ctx.facts.is_pretrain:
        yield ctx.locate("slow-detection", f"resources.slow_training_detection is on, but {t.script} prints no "
                         "Megatron-LM iteration lines for it to read", where, severity=Severity.WARNING,
                         hint="turn it off for this entry point; it applies to pretrain_gpt.py runs")
        return
    if not ctx.facts.is_pretrain:
        return
    iterations = ctx.facts.train_iters
    if iterations is None:
        return
    step = ctx.facts.step_time
    seconds = None if step is None else step.seconds * iterations
    long = seconds >= LONG_RUN_SECONDS if seconds is not None else iterations >= LONG_RUN_ITERATIONS
    if long and not res.slow_training_detection:
        how = f"about {seconds / 3600:,.1f} h" if seconds is not None else f"{iterations:,} iterations"
        yield ctx.locate("slow-detection", f"a long pretrain_gpt.py run ({how}) with slow-training detection off",
                         ("resources",), severity=Severity.WARNING,
                         hint="set resources.slow_training_detection: true: the platform then watches the step time")
    elif res.slow_training_detection and iterations // t.logging.interval < TREND_POINTS:
        yield ctx.locate("slow-detection", f"training.logging.interval {t.logging.interval} gives "
                         f"{iterations // t.logging.interval} iteration lines over {iterations} iterations, too few "
                         "for slow-training detection to see a trend", ("training", "logging"),
                         severity=Severity.WARNING,
                         hint=f"log at most every {max(1, iterations // TREND_POINTS)} iterations")


def check_routing(ctx: RuleContext) -> Iterator[Diagnostic]:
    t: Any = ctx.sections["training"]
    words = [arg_flag_name(a).lower() for a in t.args] + [posixpath.basename(t.script).lower()]
    for index, word in enumerate(words):
        for needle, what, tool in ROUTES:
            is_script = index == len(t.args)
            if (word.startswith("--" + needle) if not is_script else needle in word.replace("_", "-").split("-")
                    or word.startswith(needle)):
                where = ("training", "args", index) if index < len(t.args) else ("training", "script")
                yield ctx.locate("job-routing", f"{word} looks like {what}, which the platform runs with {tool}, "
                                 "not Megatron-LM", where, severity=Severity.WARNING,
                                 hint=f"use {tool} for this job (README: scope)")
                return
