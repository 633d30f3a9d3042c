"""`megatron-compile lock SPEC…`: resolve the base image's digest for the spec's platform, with the
network, and write it to the lock beside the spec (compiler/load/lockfile.py).

- `lock SPEC` writes a missing lock, re-resolves one that no longer matches its spec, and leaves a
  matching one alone (no network).
- `lock --update SPEC` re-resolves and prints `old → new`; an unchanged digest keeps the file byte
  for byte (resolved_at included), so a lock diff in review always means a new image. A new base
  digest drops the `built` record: that image was built from the old base.
- `lock --record-built SPEC` records the digest of the image buildx.sh or regctl.sh pushed
  (registry/namespace/repository:tag for the spec's platform): regctl's `image mod` layer is not
  reproducible, so that digest can be recorded, not predicted.

Resolution goes through skopeo (platform/registry.py), which does the registry's token or basic
authentication from its auth files (`--authfile`, or skopeo's defaults). Credentials are never written. Every failure is one line on stderr, exit status 1.
`SOURCE_DATE_EPOCH`, when set, is the time written to resolved_at/recorded_at.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import Any, Callable, TextIO

from ..load.lockfile import (
    BaseEntry,
    BuiltEntry,
    Lock,
    LockError,
    built_from,
    built_reference,
    check_lock,
    lock_path,
    utc_now,
    with_base,
    write_lock,
)
from ..load.lockparse import read_lock
from ..platform.registry import RegistryFailure, Skopeo, is_loopback, layers, resolve
from pydantic_core import ValidationError
from ..diagnostics import format_text
from ..load.compose import compose
from ..megatron.packages import image_packages
from ..schema import validator
from ..schema.defaults import MEGATRON_REPO, MEGATRON_ROOT

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class LockFailure(RegistryFailure):
    """One spec's lock could not be made: a one-line message for stderr."""


# -- the spec's image section ------------------------------------------------------------------


def image_of_spec(path: str | Path) -> dict[str, Any]:
    """The spec's `image` section (its `extends` bases merged in, defaults filled) as a plain dict,
    validated on its own: a spec with other problems can still be locked."""
    composed = compose(str(path), str(path))
    if composed.doc is None:
        raise LockFailure(format_text(composed.diagnostics).splitlines()[0] if composed.diagnostics
                          else f"{path}: cannot read the spec")
    raw = composed.doc.data.get("image")
    if not isinstance(raw, dict) or not isinstance(raw.get("base"), str):
        raise LockFailure(f"{path}: the spec has no image.base")
    try:
        image = validator.section_validator("image").validate_python(raw)
    except ValidationError as exc:
        raise LockFailure(f"{path}: image section does not validate: {exc.errors()[0]['msg']}") from None
    result: dict[str, Any] = image.model_dump(mode="json")
    return result


def built_from_spec(path: str | Path, base_digest: str) -> dict[str, str]:
    """What the spec's image is built from (lockfile.BUILT_FROM), read from the composed spec: the
    megatron section and what init_from installs, defaults filled as the schema fills them."""
    composed = compose(str(path), str(path))
    data: dict[str, Any] = composed.doc.data if composed.doc is not None else {}
    section = data.get("megatron")
    megatron: dict[str, Any] = section if isinstance(section, dict) else {}
    commit = megatron.get("commit")
    if not isinstance(commit, str) or not commit:
        raise LockFailure(f"{path}: the spec has no megatron.commit: the image it builds is not known")
    init = None
    if data.get("init_from") is not None:
        try:
            init = validator.section_validator("init_from").validate_python(data["init_from"])
        except ValidationError as exc:
            raise LockFailure(f"{path}: init_from does not validate: {exc.errors()[0]['msg']}") from None
    return built_from(base_digest, str(megatron.get("repo", MEGATRON_REPO)), commit,
                      str(megatron.get("root", MEGATRON_ROOT)), image_packages(init))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise LockFailure(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="megatron-compile lock",
        description="Resolve the base image's digest for each spec's image.platform (with the network, through "
        "skopeo) and write specs/NAME.lock beside the spec; compiles then pin that digest without the network.")
    parser.add_argument("specs", nargs="+", metavar="SPEC")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_true", help="re-resolve every lock and print old → new")
    mode.add_argument("--record-built", action="store_true",
                      help="record the digest of the built image (registry/namespace/repository:tag) after "
                      "buildx.sh or regctl.sh pushed it")
    parser.add_argument("--insecure-registry", action="append", default=[], metavar="HOST[:PORT]",
                        help="talk plain HTTP / unverified TLS to this loopback registry (tests only; repeatable)")
    parser.add_argument("--authfile", metavar="FILE",
                        help="registry credentials in containers-auth.json form (default: skopeo's own auth files)")
    return parser


def _skopeo(args: argparse.Namespace) -> Skopeo:
    binary = shutil.which("skopeo")
    if binary is None:
        raise LockFailure("skopeo is not installed: `apt-get install skopeo` (or your platform's package)")
    return Skopeo(binary, frozenset(args.insecure_registry), args.authfile)


def _check_options(args: argparse.Namespace) -> None:
    for host in args.insecure_registry:
        if not is_loopback(host):
            raise LockFailure(f"--insecure-registry {host}: only loopback registries (127.0.0.1, localhost, [::1])")
    if args.authfile and not Path(args.authfile).is_file():
        raise LockFailure(f"--authfile {args.authfile}: no such file")


def _now() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return utc_now(float(epoch) if epoch and epoch.isdigit() else None)


def _show(reference: str, digest: str) -> str:
    return f"{reference}@{digest}"


def _read(path: Path) -> Lock | None:
    try:
        return read_lock(path)
    except LockError as exc:
        raise LockFailure(str(exc).replace("\n", "; ")) from None


def _lock_base(spec: str, skopeo_factory: Callable[[], Skopeo], update: bool, out: TextIO) -> None:
    image = image_of_spec(spec)
    path = lock_path(spec)
    old = _read(path)
    if old and not check_lock(old, image, spec) and not update:
        out.write(f"{path}: up to date ({_show(old.base.reference, old.base.digest)}, {old.base.platform})\n")
        return
    reference, platform = image["base"], image["platform"]
    digest = resolve(skopeo_factory(), reference, platform)
    unchanged = old is not None and (old.base.reference, old.base.platform, old.base.digest) == (reference, platform, digest)
    # Unchanged: the old entry, resolved_at included, so the file stays byte for byte.
    new = old if unchanged and old else with_base(old, BaseEntry(reference, platform, digest, _now(), skopeo_factory().version))
    if new.built is not None and check_lock(new, image, spec):
        new = Lock(base=new.base)  # the built record names another image than the spec now builds
    write_lock(new, path)
    if old is None:
        out.write(f"{path}: base {_show(reference, digest)} ({platform})\n")
    elif unchanged:
        out.write(f"{path}: base unchanged ({_show(reference, digest)}, {platform})\n")
    else:
        out.write(f"{path}: base {_show(old.base.reference, old.base.digest)} ({old.base.platform}) → "
                  f"{_show(reference, digest)} ({platform})\n")
    if old is not None and old.built is not None and new.built is None:
        out.write(f"{path}: built record of {_show(old.built.reference, old.built.digest)} dropped: rebuild, then "
                  f"`megatron-compile lock --record-built {spec}`\n")


def _warn_unless_on_base(skopeo: Skopeo, base: BaseEntry, reference: str, digest: str, err: TextIO) -> None:
    """Warn when the built image's first layers are not the locked base's: it was built from another base.

    Both build paths keep the base's layer blobs as they are (regctl image mod adds one layer; BuildKit
    reuses the base's compressed layers), so a prefix mismatch means another base, not recompression.
    """
    try:
        base_layers = layers(skopeo, base.reference, base.digest)
        built_layers = layers(skopeo, reference, digest)
    except RegistryFailure as exc:
        err.write(f"megatron-compile lock: warning: could not compare {reference} with its base: {exc}\n")
        return
    if built_layers[:len(base_layers)] != base_layers:
        err.write(f"megatron-compile lock: warning: {_show(reference, digest)} does not start with the layers of the "
                  f"locked base {_show(base.reference, base.digest)}: was it built from another base?\n")


def _record_built(spec: str, skopeo_factory: Callable[[], Skopeo], out: TextIO, err: TextIO) -> None:
    image = image_of_spec(spec)
    path = lock_path(spec)
    old = _read(path)
    if old is None:
        raise LockFailure(f"{path}: no lock yet: run `megatron-compile lock {spec}` before building")
    stale = check_lock(Lock(base=old.base, path=old.path, positions=old.positions), image, spec)
    if stale:
        raise LockFailure(f"{stale[0].message}: lock the base first (`megatron-compile lock {spec}`), then rebuild")
    reference = built_reference(image)
    digest = resolve(skopeo_factory(), reference, image["platform"])
    sources = built_from_spec(spec, old.base.digest)
    if (old.built and old.built.reference == reference and old.built.digest == digest
            and all(getattr(old.built, key) == value for key, value in sources.items())):
        out.write(f"{path}: built unchanged ({_show(reference, digest)})\n")
        return
    _warn_unless_on_base(skopeo_factory(), old.base, reference, digest, err)
    built = BuiltEntry(reference, digest, _now(), skopeo_factory().version, **sources)
    write_lock(Lock(base=old.base, built=built), path)
    before = f"{_show(old.built.reference, old.built.digest)} → " if old.built else ""
    out.write(f"{path}: built {before}{_show(reference, digest)}\n")


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile lock SPEC… [--update | --record-built] [--insecure-registry HOST] [--authfile FILE]`."""
    try:
        args = _parser().parse_args(argv)
        _check_options(args)
    except RegistryFailure as exc:
        err.write(f"{exc}\n")
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    cache: list[Skopeo] = []

    def skopeo_factory() -> Skopeo:
        # skopeo is looked for only when a spec needs the network: an up-to-date lock needs none.
        if not cache:
            cache.append(_skopeo(args))
        return cache[0]

    status = EXIT_OK
    for spec in args.specs:
        try:
            if args.record_built:
                _record_built(spec, skopeo_factory, out, err)
            else:
                _lock_base(spec, skopeo_factory, args.update, out)
        except RegistryFailure as exc:
            err.write(f"megatron-compile lock: {exc}\n")
            status = EXIT_FAIL
        except OSError as exc:  # the lock's directory not writable, and the like
            err.write(f"megatron-compile lock: {exc.filename or spec}: {exc.strerror or exc}\n")
            status = EXIT_FAIL
    return status
