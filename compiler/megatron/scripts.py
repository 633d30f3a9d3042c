"""Which training scripts Megatron-LM has at the pinned commit (data/megatron_files.txt, written by
tools/megatron_files.py from the checkout), and why a script that is not one of them is refused.

A `training.script` relative to megatron.root (or absolute under it) names a file of the Megatron-LM
the image builds; one that is not there fails on the GPUs after the job queued. Entry points of
other projects (Alibaba Pai-Megatron-Patch's `examples/*/pretrain_*.py`), scripts Megatron removed
(`pretrain_gpt2.py`), moved (`pretrain_bert.py` now under examples/bert/) or misspelt are caught
here. A script outside megatron.root (the user's own code on the storage) is not Megatron's, and
a spec pinning another commit cannot be checked against this list.
"""

from __future__ import annotations

import posixpath
from functools import lru_cache
from pathlib import Path

from ..tuples import NamedTuple
from . import PINNED_COMMIT

FILES = Path(__file__).resolve().parent / "data" / "megatron_files.txt"

# Entry points Megatron-LM had and removed before the pinned commit, with what took their place
# (`git log --diff-filter=D 571370c8 -- NAME` in the Megatron-LM history). Moved ones (pretrain_bert.py
# and pretrain_t5.py went to examples/ in 547fb1713e) are found by name in the file list instead.
REMOVED = {
    "pretrain_gpt2.py": "pretrain_gpt.py (152aab304d renamed GPT-2 pretraining to GPT)",
    "pretrain_ict.py": "nothing: fe9279eaa7 deleted it",
    "pretrain_vision_classify.py": "nothing: fe9279eaa7 deleted it",
    "pretrain_vision_dino.py": "nothing: fe9279eaa7 deleted it",
    "pretrain_vision_inpaint.py": "nothing: fe9279eaa7 deleted it",
    "pretrain_retro.py": "nothing: fc6969fbb3 removed RETRO",
}


class ScriptProblem(NamedTuple):
    """Why a training script is not a file of Megatron-LM, and what to write instead."""

    message: str
    hint: str
    moved_to: str | None = None  # the one file of that name elsewhere in Megatron-LM, where it moved


@lru_cache(maxsize=1)
def pinned_files() -> frozenset[str]:
    """The Python files of Megatron-LM at PINNED_COMMIT, relative to its root."""
    lines = FILES.read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


def entry_points() -> list[str]:
    """Megatron-LM's pretrain_*.py scripts at the pinned commit (top level and examples/*/)."""
    return sorted((f for f in pinned_files() if posixpath.basename(f).startswith("pretrain_") and f.count("/") <= 2),
                  key=lambda f: (f.count("/"), f))


def relative_to_root(script: str, megatron_root: str) -> str | None:
    """The script relative to megatron.root, or None when it lies outside it (the user's own code)."""
    if not script.startswith("/"):
        return posixpath.normpath(script)
    root = posixpath.normpath(megatron_root)
    norm = posixpath.normpath(script)
    if norm.startswith(root.rstrip("/") + "/"):
        return norm[len(root.rstrip("/")) + 1:]
    return None


def script_problem(script: str, megatron_root: str, commit: str) -> ScriptProblem | None:
    """None when `script` is a file of Megatron-LM at `commit` (or cannot be checked); else why not."""
    if commit != PINNED_COMMIT:
        return None
    relative = relative_to_root(script, megatron_root)
    if relative is None or relative.startswith("../"):
        return None  # outside megatron.root: another rule speaks of '..'
    files = pinned_files()
    if relative in files:
        return None
    name = posixpath.basename(relative)
    what = f"training.script ({script}) is not a file of Megatron-LM at {commit[:8]}"
    own = ("if it is your own script, put it on the shared storage and give its absolute path "
           "(e.g. /mnt/megatron/code/train.py)")
    if name in REMOVED:
        return ScriptProblem(f"{what}: Megatron-LM removed {name}", f"use {REMOVED[name]}; {own}")
    moved = sorted(f for f in files if posixpath.basename(f) == name)
    if moved:
        return ScriptProblem(f"{what}: {name} is at {moved[0]}" + (f" (and {len(moved) - 1} more)" if len(moved) > 1 else ""),
                             f"training.script: {moved[0]}", moved[0] if len(moved) == 1 else None)
    if relative.startswith("examples/") and name.startswith("pretrain_"):
        return ScriptProblem(f"{what}: an examples/…/pretrain_*.py that Megatron-LM does not have is another "
                             "project's entry point (Alibaba Pai-Megatron-Patch has these)",
                             f"Megatron-LM's entry points at {commit[:8]}: {', '.join(entry_points())}; {own}")
    import difflib  # deferred: only a script Megatron-LM does not have needs a close match

    close = difflib.get_close_matches(relative, sorted(files), n=1, cutoff=0.8)
    if close:
        return ScriptProblem(f"{what}; did you mean {close[0]}?", f"training.script: {close[0]}")
    return ScriptProblem(what, f"write a file of Megatron-LM relative to megatron.root (pretrain_gpt.py, "
                               f"examples/…/x.py); {own}")
