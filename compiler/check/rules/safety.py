"""Safety rules: no secret in a spec, no value that cannot be carried safely into an artifact."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterator

from ...diagnostics import Diagnostic, dotted
from ...platform.engine import RESERVED_ENV
from ...tree import nodes
from ..context import RuleContext

# Credentials by their shape: (pattern, re flags, what it is). Compiled only for a string the
# combined pattern below matched (a spec almost never holds one).
_CREDENTIALS = (
    (r"nvapi-[A-Za-z0-9_-]{8,}", 0, "an NGC API key (nvapi-…)"),
    (r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE, "a bearer token"),
    (r"-----BEGIN [A-Z ]*PRIVATE KEY-----", 0, "a private key block"),
    (r"\bgh[pousr]_[A-Za-z0-9]{20,}", 0, "a GitHub token"),
    (r"\bgithub_pat_[A-Za-z0-9_]{20,}", 0, "a GitHub token"),
    (r"\bAKIA[0-9A-Z]{16}\b", 0, "an AWS access key id"),
    (r"\bhf_[A-Za-z0-9]{20,}", 0, "a Hugging Face token (hf_…)"),
    (r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}", 0, "an API secret key (sk-…)"),
    (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", 0, "a Slack token (xox…)"),
    (r"://[^/\s:@]+:[^/\s@]+@", 0, "a password inside a URL"),
    # a JSON Web Token: base64url of '{"' (eyJ), a payload, a signature (empty when unsigned)
    (r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", 0, "a JSON Web Token (eyJ….….…)"),
    # NAME=VALUE inside one string, the name credential-ish: WANDB_API_KEY=<40 hex>, DB_PASSWORD=…
    (r"(?:KEY|TOKEN|SECRET)[\"']?\s*[=:]\s*[\"']?[0-9a-fA-F]{32,}\b", re.IGNORECASE,
     "a hex key assigned to a credential's name"),
    (r"(?:PASSWORD|PASSWD)[\"']?\s*[=:]\s*[\"']?[^\s\"']+", re.IGNORECASE, "a password"),
)

# Credentials by NAME: an environment variable or a `--flag VALUE` whose name says it holds one.
# An env name: *_API_KEY, *_TOKEN, *SECRET*, *PASSWORD*, *_ACCESS_KEY*, *_PRIVATE_KEY (not *CREDENTIALS,
# which by convention names a file: GOOGLE_APPLICATION_CREDENTIALS=/path/key.json).
# Both are compiled on first use (_credential_env, _credential_flag): a spec without training.env or
# training.args never needs them, and compiling them took 0.6 ms of every compile.
CREDENTIAL_ENV = r"(?:^|_)(?:API_?KEY|TOKEN|ACCESS_?KEY|PRIVATE_?KEY|AUTH_?KEY)(?:_|$)|SECRET|PASSWORD|PASSWD"
# A flag: the same words, except a bare -token, which Megatron's own flags use for vocabulary items
# (--fim-eod-token, megatron/training/arguments.py); a token flag counts with a credential's prefix.
CREDENTIAL_FLAG = (
    r"^--?(?:[a-z0-9-]*[-_])?(?:api[-_]?key|access[-_]?key|secret[a-z0-9-]*|password|passwd|private[-_]key|"
    r"auth[-_]key|(?:hf|auth|access|api|github|gh|wandb|bearer|session|refresh|hub)[-_]token|credentials?)"
    r"(?:[-_][a-z0-9-]*)?$")
SECRET_HINT = ("remove it; pass the credential at run time through the platform's secrets or job environment "
               "variables (the launch command inherits them), never in the spec")


def credential_shape(text: str) -> str | None:
    """What a string looks like when it holds a credential by its shape (hf_…, nvapi-…), else None."""
    if not may_hold_credential(text) or not _any_credential().search(text):
        return None
    return next((what for pattern, what in _compiled_credentials() if pattern.search(text)), None)


# What every credential shape above holds, in any case: a string without any of them matches none
# of the patterns, so the patterns (0.5 to 0.9 ms to compile) are compiled only for a spec with one.
# The word and URL pairs are checked in one string (`\s*` in the patterns may cross the lines that
# join a spec's strings, but credential_shape reads them one by one).
_SHAPE_HINTS = ("nvapi-", "bearer", "-----begin ", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "akia",
                "hf_", "sk-", "xox", "eyj")
_NAME_HINTS = ("key", "token", "secret", "password", "passwd")


def may_hold_credential(text: str) -> bool:
    """False when no credential pattern can match the string: it holds none of the literals each needs."""
    lower = text.casefold()  # as re's IGNORECASE matches: 'ſ' is an 's', 'K' (Kelvin) a 'k'
    if any(hint in lower for hint in _SHAPE_HINTS):
        return True
    if "://" in lower and "@" in lower:
        return True
    return ("=" in lower or ":" in lower) and any(hint in lower for hint in _NAME_HINTS)


@lru_cache(maxsize=1)
def _compiled_credentials() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern, flags), what) for pattern, flags, what in _CREDENTIALS)


@lru_cache(maxsize=1)
def _credential_env() -> re.Pattern[str]:
    return re.compile(CREDENTIAL_ENV, re.IGNORECASE)


@lru_cache(maxsize=1)
def _credential_flag() -> re.Pattern[str]:
    return re.compile(CREDENTIAL_FLAG, re.IGNORECASE)


def is_credential_env(name: str) -> bool:
    """An environment variable whose name says it holds a credential (WANDB_API_KEY, HF_TOKEN, …)."""
    return bool(_credential_env().search(name))


def credential_flags(args: list[str]) -> list[tuple[int, str]]:
    """(index of the value, flag) for each `--flag VALUE` / `--flag=VALUE` in args naming a credential."""
    out: list[tuple[int, str]] = []
    for index, token in enumerate(args):
        if not isinstance(token, str) or not token.startswith("-"):
            continue
        flag, sep, value = token.partition("=")
        if not _credential_flag().match(flag):
            continue
        if sep and value:
            out.append((index, flag))
        elif not sep and index + 1 < len(args) and isinstance(args[index + 1], str) \
                and not args[index + 1].startswith("--"):
            out.append((index + 1, flag))
    return out


def check_image_values(ctx: RuleContext) -> Iterator[Diagnostic]:
    # megatron.root becomes the Dockerfile's ENV PYTHONPATH and regctl's --env PYTHONPATH=…: Docker
    # treats a backslash inconsistently across instructions, and ':' would split PYTHONPATH in two.
    root = ctx.sections["megatron"].root
    bad = sorted({ch for ch in root if ch in "\\:"})
    if bad:
        yield ctx.locate(
            "unsafe-character", f"megatron.root contains {' and '.join(repr(c) for c in bad)}, which cannot be "
            "carried safely into the image's PYTHONPATH", ("megatron", "root"),
            hint="choose a directory name without backslashes or colons, e.g. /opt/Megatron-LM",
        )


def check_reserved_env(ctx: RuleContext) -> Iterator[Diagnostic]:
    for name in ctx.sections["training"].env:
        if name in RESERVED_ENV:
            yield ctx.locate(
                "reserved-env", f"training.env.{name} is set by the launch command itself", ("training", "env", name),
                key=True, hint="the spec's own fields control it; remove it from training.env",
            )


def check_visible_devices(ctx: RuleContext) -> Iterator[Diagnostic]:
    """torchrun starts gpus_per_worker processes a worker, each on the device its LOCAL_RANK numbers among those
    CUDA_VISIBLE_DEVICES leaves; a list of another length starves ranks of a GPU ('invalid device ordinal') or
    leaves GPUs idle, after launch.sh's GPU count has passed (it counts what nvidia-smi sees)."""
    value = ctx.sections["training"].env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return
    devices = [d for d in value.split(",") if d.strip()]
    wanted = ctx.sections["resources"].gpus_per_worker
    if len(devices) != wanted:
        yield ctx.locate(
            "visible-devices", f"training.env.CUDA_VISIBLE_DEVICES lists {len(devices)} device"
            f"{'' if len(devices) == 1 else 's'} where each worker starts {wanted} ranks (resources.gpus_per_worker)",
            ("training", "env", "CUDA_VISIBLE_DEVICES"),
            hint="remove it (each rank takes the GPU of its local rank), or list exactly gpus_per_worker devices",
        )


def _strings(value: Any) -> Iterator[tuple[tuple[str | int, ...], str, bool]]:
    """(path, text, is_key) for every string in the raw data, keys included."""
    return ((path, node, is_key) for path, node, is_key in nodes(value) if isinstance(node, str))


# One pass over every string that may hold one first; the patterns one by one only for a string that
# matched. Each alternative keeps its own flags: it matches exactly when one of the patterns does
# (and compiles in a third of the time a pattern ignoring case throughout takes).
@lru_cache(maxsize=1)
def _any_credential() -> re.Pattern[str]:
    return re.compile("|".join(("(?i:{})" if flags & re.IGNORECASE else "(?:{})").format(pattern)
                               for pattern, flags, _ in _CREDENTIALS))


def check_credentials(ctx: RuleContext) -> Iterator[Diagnostic]:
    # A spec almost never holds a credential: one search over all its text first (every string is
    # in it verbatim, so nothing a string matches is missed), the walk with paths only on a match.
    found: dict[tuple[str | int, ...], Diagnostic] = {}
    strings = [(path, text, is_key) for path, text, is_key in _strings(ctx.doc.data) if may_hold_credential(text)]
    if strings and _any_credential().search("\n".join(text for _, text, _ in strings)):
        for path, text, is_key in strings:
            what = credential_shape(text)
            if what is not None:
                found[path] = ctx.locate(
                    "credential-in-spec", f"{dotted(path)} looks like {what}; a spec is committed and its "
                    "artifacts are reviewed, so it must hold no secret", path, key=is_key, hint=SECRET_HINT,
                )
    training = ctx.doc.data.get("training") if isinstance(ctx.doc.data, dict) else None
    if isinstance(training, dict):
        env = training.get("env")
        if isinstance(env, dict):
            for name, value in env.items():
                path = ("training", "env", name)
                if isinstance(name, str) and is_credential_env(name) and value in (None, "") and path not in found:
                    found[path] = ctx.locate(
                        "env-empty-credential", f"training.env.{name} is empty: launch.sh would export an empty "
                        f"{name} over the one the platform or the job injects, and the run would fail to log in",
                        path, hint=f"remove training.env.{name}; set the credential in the platform's secrets",
                    )
                elif isinstance(name, str) and is_credential_env(name) and path not in found:
                    found[path] = ctx.locate(
                        "credential-in-spec", f"training.env.{name} names a credential; a spec is committed and "
                        "its artifacts (launch.sh, job.json) are reviewed, so it must hold no secret", path,
                        hint=SECRET_HINT,
                    )
        args = training.get("args")
        if isinstance(args, list):
            for index, flag in credential_flags(args):
                path = ("training", "args", index)
                if path not in found:
                    found[path] = ctx.locate(
                        "credential-in-spec", f"training.args[{index}] is the value of {flag}, which names a "
                        "credential; a spec is committed and its artifacts are reviewed, so it must hold no "
                        "secret", path, hint=SECRET_HINT,
                    )
    yield from found.values()


# What `megatron-compile import` writes for a value it could not know: @runtime:date@, @unset:NAME@.
IMPORT_MARKER = r"@(unset|runtime):([A-Za-z0-9_.-]+)@"


def check_import_markers(ctx: RuleContext) -> Iterator[Diagnostic]:
    # A marker is non-empty, so a script test such as [ -n "$X" ] would turn true on it: a spec that
    # still holds one describes a run nobody ran. Every marker holds "@unset:" or "@runtime:": the
    # pattern is compiled only for a spec that holds one of them.
    strings = list(_strings(ctx.doc.data))
    text = "\n".join(text for _, text, _ in strings)
    if "@unset:" not in text and "@runtime:" not in text:
        return
    marker = re.compile(IMPORT_MARKER)
    for path, text, is_key in strings:
        match = marker.search(text)
        if match:
            kind, name = match.groups()
            what = f"the unset variable {name}" if kind == "unset" else (
                f"${name}" if name.isupper() else f"the output of `{name}`")
            yield ctx.locate(
                "import-marker", f"{dotted(path)} holds {match.group()}, the import's placeholder for {what}, "
                "which was not known when the script was imported", path, key=is_key,
                hint="replace it with the value the job should use",
            )
