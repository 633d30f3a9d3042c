#!/usr/bin/env python3
"""Feed the compiler's pretrain flags to Megatron-LM's own parser and compare what it resolves.

    python tools/megatron_conformance.py PATH-TO-MEGATRON-LM SPEC... [--markdown]

For each pretrain spec: the flags of generated launch.sh go through Megatron's `parse_args` and
`validate_args` (at the checkout's commit; the pinned one is 571370c8) with WORLD_SIZE set to the
spec's world size, on the CPU. Reported: every flag Megatron rejects, every flag whose parsed value
differs from the plan's, the derived values (data parallel, microbatches, virtual pipeline, FFN
size, padded vocabulary) against the plan's, and Megatron's own theoretical memory figures against
the estimator's. Exit 0 when nothing differs. Megatron-LM is never installed or committed: point
this at a checkout (MEGATRON_LM in CI).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _import_megatron(root: Path):
    import typing

    if not hasattr(typing, "override"):  # Megatron uses Python 3.12's typing.override
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]
    sys.path.insert(0, str(root))
    with contextlib.redirect_stderr(io.StringIO()):
        import warnings

        warnings.simplefilter("ignore")
        from megatron.training import arguments  # noqa: F401
        from megatron.training.utils import common_utils

        # validate_args asks the GPU's architecture; answer for the platform's H200 (Hopper, 9) so
        # that the flags are checked as the job would check them, without a GPU here.
        arguments.get_device_arch_version = lambda: 9
        common_utils.get_device_arch_version = lambda: 9
        from megatron.training import theoretical_memory_usage  # noqa: F401
        from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding  # noqa: F401
    return arguments, theoretical_memory_usage, vocab_size_with_padding


# Flags Megatron stores under another name (TransformerConfig's argparse_meta arg_names).
RENAMED = {"--fp8-format": "fp8"}


def _dest(flag: str) -> str:
    return RENAMED.get(flag) or flag.lstrip("-").replace("-", "_")


# Switches Megatron stores under another name, inverted.
INVERTED = {"--disable-bias-linear": "add_bias_linear", "--no-rope-fusion": "apply_rope_fusion"}
_ARGS_PROBE = None  # the parsed namespace, so that _expected can see which spelling Megatron stores


def _expected(flag, run_root: str):
    """What argparse should hold for a Flag: (dest, value)."""
    name = flag.name
    if name in INVERTED:
        return INVERTED[name], False
    if not flag.values:
        if name.startswith("--no-") and not hasattr(_ARGS_PROBE, _dest(name)):
            return _dest(name[len("--no-"):]), False
        if name == "--use-distributed-optimizer":
            return "use_distributed_optimizer", True
        return _dest(name), True
    values = [f"{run_root}/{v}" if flag.run_root_relative else v for v in flag.values]
    return _dest(name), values if name == "--data-path" else values[0]


def _same(parsed, expected) -> bool:
    if isinstance(expected, bool):
        return parsed is expected
    if isinstance(expected, list):
        return [str(p) for p in (parsed or [])] == expected
    if isinstance(parsed, float):
        return parsed == float(expected)
    return str(parsed) == expected or (hasattr(parsed, "name") and parsed.name == expected)


def check_spec(path: str, megatron_root: Path) -> tuple[list[str], list[str]]:
    """(rows of a report, problems) for one spec."""
    from compiler.one_pass import compile_spec
    from compiler.plan.build import flag_words
    from compiler.plan.shell import argv_of

    arguments, memory, pad_vocab = _import_megatron(megatron_root)
    result = compile_spec(path, path)
    if not result.ok:
        return [], [f"{path}: does not compile: " + "; ".join(d.message for d in result.diagnostics)]
    plan = result.plan
    if plan.pretrain is None:
        return [f"{path}: not a pretrain_gpt.py spec; nothing to compare"], []
    argv = argv_of(tuple(flag_words(f) for f in plan.pretrain.flags))
    argv = [a.replace("$RUN_ROOT", plan.run_root) for a in argv]
    argv += result.spec.training.args
    problems: list[str] = []
    rows: list[str] = [f"flags: {len(plan.pretrain.flags)} typed, {len(result.spec.training.args)} raw"]
    os.environ.update({"WORLD_SIZE": str(plan.world_size), "RANK": "0", "LOCAL_RANK": "0"})
    os.environ.update(dict(plan.launch.env))  # the launch command's exports (CUDA_DEVICE_MAX_CONNECTIONS)
    saved_argv = sys.argv
    sys.argv = ["pretrain_gpt.py", *argv]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                args = arguments.parse_args()
            except SystemExit:
                return rows, [f"{path}: Megatron's parser rejected the flags: {err.getvalue().strip().splitlines()[-1]}"]
            try:
                arguments.validate_args(args, {})
            except (AssertionError, ValueError) as exc:
                return rows, [f"{path}: Megatron's validate_args rejected the flags: {exc}"]
            except Exception as exc:  # anything else is the tool's problem, shown with its cause
                import traceback

                return rows, [f"{path}: validate_args failed: {exc!r} at "
                              + traceback.extract_tb(exc.__traceback__)[-1].filename + ":"
                              + str(traceback.extract_tb(exc.__traceback__)[-1].lineno)]
    finally:
        sys.argv = saved_argv
    global _ARGS_PROBE
    _ARGS_PROBE = args
    for flag in plan.pretrain.flags:
        dest, expected = _expected(flag, plan.run_root)
        if not hasattr(args, dest):
            problems.append(f"{flag.name}: Megatron has no argument {dest}")
        elif not _same(getattr(args, dest), expected):
            problems.append(f"{flag.name}: plan says {expected!r}, Megatron resolved {getattr(args, dest)!r}")
    t = result.spec.training
    from compiler.megatron.pretrain import ffn_hidden_size, padded_vocab_size, vocab_size

    derived = [
        ("world size", plan.world_size, args.world_size),
        ("data parallel", plan.parallel.data, args.data_parallel_size),
        ("microbatches per step", plan.pretrain.num_microbatches,
         args.global_batch_size // (args.micro_batch_size * args.data_parallel_size)),
        ("virtual pipeline size", plan.pretrain.virtual_pipeline, args.virtual_pipeline_model_parallel_size),
        ("ffn hidden size", ffn_hidden_size(t.model), args.ffn_hidden_size),
        ("expert tensor parallel", plan.parallel.expert_tensor, args.expert_tensor_parallel_size),
    ]
    vocab = vocab_size(t)
    if vocab is not None:
        args.padded_vocab_size = pad_vocab(vocab, args, logging_enabled=False)
        derived.append(("padded vocabulary", padded_vocab_size(vocab, t.model.make_vocab_size_divisible_by,
                                                              plan.parallel.tensor), args.padded_vocab_size))
    est = plan.pretrain.estimate
    if est is not None:
        with contextlib.redirect_stdout(io.StringIO()):
            weights = memory.compute_weight_and_optimizer_memory(args) / memory.NUM_BYTES_IN_MEGABYTE
            if args.sequence_parallel and args.recompute_granularity == "selective":
                act = memory.compute_activation_memory(args, plan.pretrain.num_microbatches)
            else:
                act = memory.compute_activation_memory_without_sp(args, plan.pretrain.num_microbatches)
        derived += [
            ("weight and optimizer MB", f"{est.weights_and_optimizer_mb:.2f}", f"{weights:.2f}"),
            ("activation MB", f"{est.activations_mb:.2f}", f"{act / memory.NUM_BYTES_IN_MEGABYTE:.2f}"),
        ]
    for name, ours, theirs in derived:
        mark = "ok" if ours == theirs else "DIFFERS"
        rows.append(f"{name}: plan {ours}, Megatron {theirs} — {mark}")
        if ours != theirs:
            problems.append(f"{name}: plan {ours}, Megatron {theirs}")
    return rows, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("megatron", type=Path, help="a Megatron-LM checkout (its megatron/ package)")
    parser.add_argument("specs", nargs="+")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown report")
    args = parser.parse_args(argv)
    if not (args.megatron / "megatron" / "training" / "arguments.py").is_file():
        parser.error(f"{args.megatron} is not a Megatron-LM checkout")
    failed = False
    for spec in args.specs:
        rows, problems = check_spec(spec, args.megatron)
        failed |= bool(problems)
        heading = f"{spec}: {'conforms' if not problems else f'{len(problems)} difference(s)'}"
        if args.markdown:
            print(f"### `{spec}`\n")
            print("\n".join(f"- {r}" for r in rows))
            print("\n".join(f"- **problem**: {p}" for p in problems))
            print()
        else:
            print(heading)
            for row in rows:
                print(f"  {row}")
            for problem in problems:
                print(f"  PROBLEM {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
