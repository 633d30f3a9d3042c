"""`megatron-compile import`: a script's FP8 and performance-option flags -> training.fp8 and
training.performance, each exactly as the script has it, so the spec compiles back to its flags."""

from __future__ import annotations

from typing import Any

from ..megatron.flags import FP8_FLAGS
from ..megatron.performance import imported as imported_performance
from .import_record import ImportFailed


def fp8_and_performance(training: dict[str, Any], flags: dict[str, tuple[str, ...]], report: list[str]) -> None:
    """training.fp8 from a script's --fp8-* flags (precision fp8 on its --bf16 base) and
    training.performance as the script has each option, so the compiled flags are the script's."""
    fp8: dict[str, Any] = {name: flags[flag][0] for flag, name in zip(FP8_FLAGS, ("format", "recipe", "amax_history_len",
                                                                  "amax_compute_algo")) if flags.get(flag)}
    if fp8 and "format" not in fp8:
        report.append(f"{', '.join(f for f in FP8_FLAGS if f in flags)}: dropped (without --fp8-format Megatron "
                      "trains without FP8)")
    elif fp8:
        if training.get("precision") != "bf16":
            raise ImportFailed("--fp8-format without --bf16: the spec's training.precision: fp8 trains FP8 GEMMs on "
                               "a BF16 base, as Megatron's examples do; add --bf16 to the script and import again")
        if str(fp8.get("amax_history_len", "")).isdigit():
            fp8["amax_history_len"] = int(fp8["amax_history_len"])
        # the spec's amax defaults (1024, max) are not Megatron's (1, most_recent: transformer_config.py:552-555)
        for flag, name, megatron in (("--fp8-amax-history-len", "amax_history_len", 1),
                                     ("--fp8-amax-compute-algo", "amax_compute_algo", "most_recent")):
            if name not in fp8:
                fp8[name] = megatron
                report.append(f"{flag} {megatron}: added (Megatron's default, written out: the spec's differs)")
        training["fp8"] = fp8
        training["precision"] = "fp8"
    training["performance"] = imported_performance(flags)
