#!/usr/bin/env python3
"""Import every training launcher of Megatron-LM's examples/ and check each round trip.

    python tools/import_examples.py MEGATRON_LM [--doc docs/import.md]

MEGATRON_LM is a checkout (the pinned commit is 571370c8). Each launcher in LAUNCHERS runs through
`megatron-compile import` with the positional parameters, options and node count listed there; the
written spec is compiled, and the flags Megatron would receive from the compiled launch command are
compared with the script's own, order aside, apart from the flags the report names as replaced,
dropped or added. Outcomes: `imports` (compiles and round-trips), `refused` (import or compile said
what to do), `MISMATCH` (compiled but the flags differ: a bug). Scripts under examples/ that start a
launcher but do not train (generation, inference, evaluation servers) are listed in NOT_TRAINING.
Writes the table to --doc; exit 1 when any launcher is unlisted or a round trip mismatches.
Megatron-LM is never installed or committed: point this at a checkout (MEGATRON_LM in CI).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.commands.importer import ImportFailed, flag_groups, import_script, render_spec  # noqa: E402
from compiler.one_pass import compile_spec  # noqa: E402
from compiler.plan.shell import argv_of  # noqa: E402


@dataclass(frozen=True)
class Launcher:
    """How to import one example: its parameters and why they are these."""

    positional: tuple[str, ...] = ()
    workers: int | None = None  # the node count, where the script reads it from the cluster
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    why: str = ""


# Paths on the spec's shared storage (the seed's /mnt/megatron) for the script's positional parameters.
CKPT, TB, DATA = "/mnt/megatron/ckpt", "/mnt/megatron/tensorboard", "/mnt/megatron/data/corpus_text_document"
VOCAB, MERGES, TOK = "/mnt/megatron/tok/vocab.json", "/mnt/megatron/tok/merges.txt", "/mnt/megatron/tok/tokenizer"

LAUNCHERS: dict[str, Launcher] = {
    "examples/bert/train_bert_340m_distributed.sh": Launcher((CKPT, TB, VOCAB, DATA), why="CKPT TB VOCAB DATA"),
    "examples/gpt3/train_gpt3_175b_distributed.sh": Launcher((CKPT, TB, VOCAB, MERGES, DATA), workers=16,
                                                             why="CKPT TB VOCAB MERGES DATA; TP 8 × PP 16 needs 16 nodes"),
    "examples/gptoss/02_train.sh": Launcher(("--checkpoint-path", "/", "--tensorboard-logs-path", "/"),
                                            why="its options; the checkpoint path must exist"),
    "examples/llama/train_llama3_8b_h100_fp8.sh": Launcher((CKPT, TB, "MOCK", "MOCK"), why="CKPT TB MOCK MOCK"),
    "examples/llama/train_llama3_8b_h100_fp8.sh real data": Launcher((CKPT, TB, TOK, DATA), why="CKPT TB TOKENIZER DATA"),
    "examples/mamba/train.sh": Launcher((DATA, TOK), cwd="examples/mamba", why="DATA TOKENIZER; runs from examples/mamba"),
    "examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh": Launcher((CKPT, "MOCK", "MOCK"),
                                                                        why="CKPT MOCK MOCK"),
    "examples/mixtral/train_mixtral_8x7b_distributed.sh": Launcher((CKPT, TOK, DATA), workers=4,
                                                                   why="CKPT TOKENIZER DATA; PP 4 × EP 8 needs 4 nodes"),
    "examples/t5/train_t5_220m_distributed.sh": Launcher((CKPT, TB, VOCAB, DATA), why="CKPT TB VOCAB DATA"),
    "examples/academic_paper_scripts/detxoify_lm/finetune_gpt_distributed-1.3b.sh": Launcher(
        (DATA, "detox", "2e-5", "16", "1000", CKPT), why="DATA NAME LR BATCH ITERS CKPT"),
    "examples/academic_paper_scripts/sc21/SRUN.sh": Launcher(why="sourced by the sc21 scripts with their parameters"),
    "examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh": Launcher(why="a Slurm batch script"),
    "examples/mimo/scripts/run_mock_train.sh": Launcher(("",), why="an empty first parameter (not -d, the debugger)"),
    "examples/mimo/scripts/run_avlm_train.sh": Launcher((DATA,), why="DATASET"),
    "examples/mimo/scripts/run_video_vlm_train.sh": Launcher((DATA,), why="DATASET"),
    "examples/mimo/scripts/run_vlm_train.sh": Launcher((DATA,), why="DATASET"),
    "examples/multimodal/pretrain_mistral_clip.sh": Launcher(
        env=(("WORKSPACE", "/mnt/megatron/workspace"), ("LOAD_NAME", "mistral-7b-clip")),
        why="WORKSPACE, LOAD_NAME in the environment"),
    "examples/multimodal/sft_mistral_clip.sh": Launcher(
        env=(("WORKSPACE", "/mnt/megatron/workspace"), ("LOAD_NAME", "mistral-7b-clip-pretrain"), ("LOAD_ITER", "1000")),
        why="WORKSPACE, LOAD_NAME, LOAD_ITER in the environment"),
    "examples/multimodal/nvlm/pretrain_qwen20_72b_internvit_6b.sh": Launcher(),
    "examples/multimodal/nvlm/pretrain_yi_34b_internvit_6b.sh": Launcher(),
    "examples/multimodal/nvlm/sft_34b_internvit.sh": Launcher(),
    "examples/multimodal/nvlm/sft_qwen20_72b_internvit_6b.sh": Launcher(),
    "examples/multimodal/nvlm/sft_qwen2p5_7b_internvit_6b_video.sh": Launcher(),
    "examples/multimodal/llama_3p1_nemotron_nano_vl_8b_v1/pretraining_llama_3p1_nemotron_nano_vl_8b_v1.sh": Launcher(),
    "examples/multimodal/llama_3p1_nemotron_nano_vl_8b_v1/sft_llama_3p1_nemotron_nano_vl_8b_v1.sh": Launcher(),
    "examples/post_training/modelopt/train.sh": Launcher(("meta-llama/Llama-3.2-1B-Instruct",), why="MODEL"),
}
# Launchers under examples/ that do not train: they are not imported.
NOT_TRAINING = {
    "examples/academic_paper_scripts/detxoify_lm/generate-1.3b.sh": "text generation",
    "examples/academic_paper_scripts/detxoify_lm/self_generation/selfgenerate-1.3b-unconditional.sh": "text generation",
    "examples/academic_paper_scripts/msdp/eval_knwl_generation.sh": "evaluation",
    "examples/academic_paper_scripts/msdp/eval_resp_generation.sh": "evaluation",
    "examples/academic_paper_scripts/msdp/prompt_knwl_gen.sh": "text generation",
    "examples/academic_paper_scripts/msdp/prompt_resp_gen.sh": "text generation",
    "examples/inference/run_inference_server.sh": "inference server",
    "examples/inference/run_offline_inference.sh": "inference",
    "examples/mamba/run_text_gen_server_8b.sh": "text generation server",
    "examples/mamba/run_text_gen_server_8b_gpt3.sh": "text generation server",
    "examples/multimodal/llama_3p1_nemotron_nano_vl_8b_v1/text_generation.sh": "text generation",
    "examples/multimodal/nvlm/run_text_generation_qwen20_72b_internvit_6b.sh": "text generation",
    "examples/multimodal/nvlm/run_text_generation_qwen25_7b_internvit_video.sh": "text generation",
    "examples/multimodal/nvlm/run_text_generation_qwen25_7b_siglip.sh": "text generation",
    "examples/multimodal/nvlm/run_text_generation_yi_34b_internvit_6b.sh": "text generation",
    "examples/multimodal/text_generation_mistral_clip.sh": "text generation",
    "examples/post_training/modelopt/conf/arguments.sh": "sourced by the modelopt scripts, launches nothing",
}
LAUNCH = re.compile(r"torchrun|torch\.distributed\.(run|launch)|pretrain_[a-z_]*\.py")


@dataclass
class Outcome:
    """What importing one launcher gave."""

    key: str
    outcome: str
    details: list[str] = field(default_factory=list)  # the import's report
    errors: list[str] = field(default_factory=list)  # why it was refused, or how the round trip differs


def find_launchers(root: Path) -> list[str]:
    """Every shell script under examples/ that starts torchrun, torch.distributed.run or a pretrain_*.py."""
    return sorted(str(p.relative_to(root)) for p in (root / "examples").rglob("*.sh")
                  if LAUNCH.search(p.read_text(errors="replace")))


def _normal(token: str) -> str:
    try:
        return repr(float(token)) if not token.startswith("-") or token[1:2].isdigit() else token
    except ValueError:
        return token


def _value(flag: str, value: str) -> str:
    """A value as Megatron reads it: --split keeps only its digits and dots (re.findall(r"[.0-9]+", split),
    megatron/core/datasets/blended_megatron_dataset_config.py:164), so '99,1,0' with quotes is 99,1,0."""
    if flag == "--split":
        return ",".join(re.findall(r"[.0-9]+", value))
    return _normal(value)


def _groups(args: list[str]) -> Counter:
    return Counter((name, tuple(_value(name, v) for v in values)) for name, values in flag_groups(args))


def named(report: list[str], verb: str) -> set[str]:
    """Flags the report says were `verb` (replaced/dropped/added)."""
    names = set()
    for line in report:
        head, _, rest = line.partition(": ")
        if rest.startswith(verb) and head.startswith("--"):
            names.add(head.split()[0])
    return names


def round_trip(recorded_args: list[str], compiled: list[str], report: list[str]) -> list[str]:
    """The flags that differ between the script and the compiled spec, apart from those reported."""
    replaced, dropped, added = named(report, "replaced"), named(report, "dropped"), named(report, "added")
    original = Counter({k: v for k, v in _groups(recorded_args).items() if k[0] not in replaced | dropped})
    ours = Counter({k: v for k, v in _groups(compiled).items() if k[0] not in replaced | added})
    return ([f"the script's {' '.join((k[0], *k[1]))} is missing" for k in sorted(original - ours)]
            + [f"the spec's {' '.join((k[0], *k[1]))} is extra" for k in sorted(ours - original)])


def import_one(root: Path, key: str, launcher: Launcher, work: Path) -> Outcome:
    """Import, compile and compare one launcher."""
    script = root / key.split(" ")[0]
    name = re.sub(r"[^a-z0-9-]+", "-", key.lower().removeprefix("examples/").removesuffix(".sh")).strip("-")[:63]
    try:
        result = import_script(script, name, list(launcher.positional), dict(launcher.env), launcher.cwd)
    except ImportFailed as exc:
        return Outcome(key, "refused", errors=[str(exc)])
    report = list(result.report)
    if launcher.workers is not None:
        result.data["resources"]["workers"] = launcher.workers
    target = work / f"{name}.yaml"
    target.write_text(render_spec(result, key, None), encoding="utf-8")
    compiled = compile_spec(str(target), f"{name}.yaml")
    if not compiled.ok:
        errors = [f"error: {d.message} [{d.code}]" + (f" (hint: {d.hint})" if d.hint else "")
                  for d in compiled.diagnostics if d.is_error]
        return Outcome(key, "refused", report, errors)
    argv = argv_of(compiled.plan.launch.torchrun)
    start = next(i for i, a in enumerate(argv) if a.endswith(".py")) + 1
    differences = round_trip(result.recorded.args, argv[start:], report)
    return Outcome(key, "MISMATCH" if differences else "imports", report, differences)


VERBATIM = "no typed field; passed through verbatim in training.args"


def _unique(lines: list[str]) -> list[str]:
    """Lines in order, a repeated one once."""
    return list(dict.fromkeys(lines))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def markdown(outcomes: list[Outcome], commit: str) -> str:
    """docs/import.md: one row per launcher."""
    lines = ["# `megatron-compile import` of Megatron-LM's own launchers", "",
             f"Generated by `python tools/import_examples.py MEGATRON_LM` at Megatron-LM {commit}: every shell "
             "script under `examples/` that starts torchrun, `python -m torch.distributed.run` or a `pretrain_*.py`. ",
             "A training launcher either imports (the spec compiles, and the flags Megatron receives from it equal "
             "the script's, order aside, apart from what the report names as replaced, dropped or added) or is "
             "refused with what to do. The parameters each needs are in the tool's `LAUNCHERS`.", "",
             "| script | given | outcome | reported (refused: why) |", "|---|---|---|---|"]
    for o in outcomes:
        launcher = LAUNCHERS.get(o.key, Launcher())
        shown = o.errors if o.errors else [line for line in o.details if not line.endswith(VERBATIM)]
        passed = sum(line.endswith(VERBATIM) for line in o.details)
        if not o.errors and passed:
            shown.append(f"{passed} flags with no typed field passed through verbatim in training.args")
        lines.append(f"| `{o.key}` | {_cell(launcher.why) or '—'} | {o.outcome} | "
                     f"{'<br>'.join(_cell(d) for d in _unique(shown)) or '—'} |")
    lines += ["", "Not training (not imported):", ""]
    lines += [f"- `{path}`: {why}" for path, why in sorted(NOT_TRAINING.items())]
    return "\n".join(lines) + "\n"


def _commit(root: Path) -> str:
    """The checkout's commit; 'unknown' when root is not the top of a git work tree (a copy inside another)."""
    top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
        return "unknown (pass --commit)"
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str]) -> int:
    """Import every launcher; write the table; exit 1 on an unlisted launcher or a mismatch."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("megatron_lm", type=Path)
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "import.md")
    parser.add_argument("--commit", help="the checkout's commit, when it is not a git work tree of its own")
    args = parser.parse_args(argv)
    root = args.megatron_lm.resolve()
    if not (root / "examples").is_dir() or not (root / "megatron").is_dir():
        print(f"{root} is not a Megatron-LM checkout", file=sys.stderr)
        return 2
    found = find_launchers(root)
    unlisted = [p for p in found if p not in NOT_TRAINING and p not in LAUNCHERS]
    for path in unlisted:
        print(f"{path}: a launcher this tool does not list; add it to LAUNCHERS or NOT_TRAINING", file=sys.stderr)
    commit = args.commit or _commit(root)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="mc-examples-") as tmp:
        for key, launcher in LAUNCHERS.items():
            if key.split(" ")[0] not in found:
                outcomes.append(Outcome(key, "MISSING", ["not in this checkout"]))
                continue
            outcome = import_one(root, key, launcher, Path(tmp))
            outcomes.append(outcome)
            print(f"{key}: {outcome.outcome}")
            for line in outcome.errors + outcome.details:
                print(f"  {line}")
    args.doc.write_text(markdown(outcomes, commit), encoding="utf-8")
    bad = [o for o in outcomes if o.outcome not in ("imports", "refused")]
    return 1 if unlisted or bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
