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

Resolution goes through skopeo (`skopeo inspect --raw`), which does the registry's token or basic
authentication from its auth files (`--authfile`, or skopeo's defaults); no registry HTTP here.
An image index (or Docker manifest list) gives the digest of the platform's entry, checked by
fetching that manifest; a plain manifest gives its own digest after its config's os/architecture
is checked. Credentials are never written. Every failure is one line on stderr, exit status 1.
`SOURCE_DATE_EPOCH`, when set, is the time written to resolved_at/recorded_at.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, TextIO

import yaml

from ..load.lockfile import (
    DEFAULT_PLATFORM,
    BaseEntry,
    BuiltEntry,
    Lock,
    LockError,
    built_reference,
    check_lock,
    lock_path,
    read_lock,
    utc_now,
    with_base,
    write_lock,
)
from ..platform.images import ImageRef, is_digest, parse_reference, skopeo_reference

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
SKOPEO_TIMEOUT_S = 120  # one registry round trip; skopeo's own --command-timeout is a little shorter
MAX_EXTENDS = 16

INDEX_TYPES = {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
MANIFEST_TYPES = {"application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"}


class LockFailure(Exception):
    """One spec's lock could not be made: a one-line message for stderr."""


# -- the spec's image section (the seam the lead replaces with the validated spec) ---------------


def _deep_merge(base: Any, over: Any) -> Any:
    """compose.py's rule: mappings merge, the later wins, everything else is replaced whole."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            merged[key] = _deep_merge(base.get(key), value) if key in base else value
        return merged
    return over


def _load_composed(path: Path, chain: tuple[Path, ...]) -> dict:
    if len(chain) > MAX_EXTENDS:
        raise LockFailure(f"{chain[0]}: extends nests deeper than {MAX_EXTENDS} levels")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LockFailure(f"{path}: no such spec") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise LockFailure(f"{path}: cannot read the spec: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise LockFailure(f"{path}: a spec is a mapping")
    extends = doc.pop("extends", None)
    bases = [extends] if isinstance(extends, str) else (extends or [])
    merged: dict = {}
    for base in bases:
        base_path = (path.parent / str(base)).resolve()
        if base_path in chain:
            raise LockFailure(f"{path}: extends cycle through {base}")
        merged = _deep_merge(merged, _load_composed(base_path, chain + (base_path,)))
    return _deep_merge(merged, doc)


def image_of_spec(path: str | Path) -> dict:
    """The spec's `image` section as a plain dict, its `extends` bases merged in."""
    spec = Path(path)
    image = _load_composed(spec, (spec.resolve(),)).get("image")
    if not isinstance(image, dict) or not isinstance(image.get("base"), str):
        raise LockFailure(f"{path}: the spec has no image.base")
    image.setdefault("platform", DEFAULT_PLATFORM)
    return image


# -- skopeo -----------------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]")
    return name in ("localhost", "::1") or name.startswith("127.")


class Skopeo:
    """Runs `skopeo inspect --raw` for one reference at a time."""

    def __init__(self, binary: str, insecure: frozenset[str], authfile: str | None) -> None:
        self.binary, self.insecure, self.authfile = binary, insecure, authfile
        self.version = self._version()
        # One answer per (reference, platform) in a run: specs sharing a base lock the same digest
        # even if its tag moves while the run goes on.
        self.resolved: dict[tuple[str, str], str] = {}

    def _version(self) -> str:
        try:
            done = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
        except OSError as exc:
            raise LockFailure(f"cannot run {self.binary}: {exc.strerror}") from None
        words = done.stdout.split()
        # "skopeo version 1.9.3" (later releases add "commit: …")
        version = words[2] if len(words) >= 3 and words[1] == "version" else "unknown"
        return f"skopeo {version}"

    def raw(self, ref: ImageRef, digest: str | None = None, *, config: bool = False) -> bytes:
        """The manifest (or, with config, the config blob) that the registry serves for a reference."""
        name = skopeo_reference(_text(ref), digest)
        argv = [self.binary, "--command-timeout", f"{SKOPEO_TIMEOUT_S - 10}s", "inspect", "--raw"]
        if config:
            argv.append("--config")
        if ref.registry in self.insecure or (ref.registry.count(":") == 1 and ref.registry.split(":")[0] in self.insecure):
            argv.append("--tls-verify=false")
        if self.authfile:
            argv += ["--authfile", self.authfile]
        argv.append(name)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=SKOPEO_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise LockFailure(f"{name}: skopeo did not answer within {SKOPEO_TIMEOUT_S} s") from None
        except OSError as exc:
            raise LockFailure(f"cannot run {self.binary}: {exc.strerror}") from None
        if done.returncode != 0:
            raise LockFailure(_explain(ref, name, done.stderr.decode("utf-8", "replace")))
        return done.stdout


def _text(ref: ImageRef) -> str:
    tag = f":{ref.tag}" if ref.tag else ""
    digest = f"@{ref.digest}" if ref.digest else ""
    return f"{ref.name}{tag}{digest}"


def _skopeo_message(stderr: str) -> str:
    """The message of skopeo's last `level=fatal msg="…"` line (or its last line)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if not lines:
        return "skopeo failed without a message"
    last = lines[-1]
    start = last.find('msg="')
    if start < 0:
        return last.strip()
    body = last[start + 5:]
    end = body.rfind('"')
    body = body[:end] if end >= 0 else body
    try:
        return json.loads(f'"{body}"')
    except json.JSONDecodeError:
        return body.replace('\\"', '"')


def _explain(ref: ImageRef, name: str, stderr: str) -> str:
    """One line saying why skopeo failed, with what to do about it."""
    message = _skopeo_message(stderr)
    lower = message.lower()
    host = ref.registry
    if "unauthorized" in lower or "authentication required" in lower or "denied" in lower:
        return (f"{name}: {host} refused access (no or wrong credentials): log in with `skopeo login {host}` "
                f"or pass --authfile FILE [skopeo: {message}]")
    if "manifest unknown" in lower or "name unknown" in lower or "not found" in lower:
        return f"{name}: no such repository or tag in {host} [skopeo: {message}]"
    if "http response to https client" in lower:
        return f"{name}: {host} speaks plain HTTP: for a loopback test registry pass --insecure-registry {host}"
    if "x509" in lower or "certificate" in lower:
        return f"{name}: {host}'s TLS certificate is not trusted [skopeo: {message}]"
    if "connection refused" in lower or "no such host" in lower or "timeout" in lower or "dial tcp" in lower:
        return f"{name}: cannot reach {host} [skopeo: {message}]"
    return f"{name}: skopeo failed: {message}"


# -- resolution -------------------------------------------------------------------------------


class Platform(NamedTuple):
    os: str
    architecture: str
    variant: str | None

    def __str__(self) -> str:
        return "/".join(part for part in self if part)


def parse_platform(text: str) -> Platform:
    """linux/amd64 or linux/arm64/v8."""
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise LockFailure(f"{text}: a platform is os/architecture[/variant], e.g. linux/amd64")
    return Platform(parts[0], parts[1], parts[2] if len(parts) == 3 else None)


def _platform_of(value: Mapping[str, Any]) -> Platform:
    variant = value.get("variant") or None
    # containerd's normalisation: arm64 without a variant is arm64/v8
    if value.get("architecture") == "arm64" and variant is None:
        variant = "v8"
    return Platform(str(value.get("os", "")), str(value.get("architecture", "")), variant)


def _matches(want: Platform, have: Platform) -> bool:
    want_variant = want.variant or ("v8" if want.architecture == "arm64" else None)
    return (want.os, want.architecture) == (have.os, have.architecture) and (
        want.variant is None or want_variant == have.variant)


def _json(raw: bytes, name: str) -> dict:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise LockFailure(f"{name}: the registry's answer is not JSON") from None
    if not isinstance(doc, dict):
        raise LockFailure(f"{name}: the registry's answer is not a manifest")
    return doc


def _kind(doc: Mapping[str, Any], name: str) -> str:
    media = doc.get("mediaType")
    if doc.get("schemaVersion") == 1:
        raise LockFailure(f"{name}: a Docker schema 1 manifest; push the image again with a current client")
    if media in INDEX_TYPES or (media is None and "manifests" in doc):
        return "index"
    if media in MANIFEST_TYPES or (media is None and "config" in doc and "layers" in doc):
        return "manifest"
    raise LockFailure(f"{name}: not an image manifest or index (media type {media})")


def sha256_digest(raw: bytes) -> str:
    """The content digest of a manifest: sha256 of the exact bytes the registry served."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def resolve(skopeo: Skopeo, reference: str, platform_text: str) -> str:
    """The digest of `reference`'s manifest for the platform (once per run)."""
    key = (reference, platform_text)
    if key not in skopeo.resolved:
        skopeo.resolved[key] = _resolve(skopeo, reference, platform_text)
    return skopeo.resolved[key]


def _resolve(skopeo: Skopeo, reference: str, platform_text: str) -> str:
    try:
        ref = parse_reference(reference)
    except ValueError as exc:
        raise LockFailure(str(exc)) from None
    want = parse_platform(platform_text)
    raw = skopeo.raw(ref)
    top = sha256_digest(raw)
    if ref.digest and top != ref.digest:
        raise LockFailure(f"{reference}: the registry served a manifest whose digest is {top}")
    doc = _json(raw, reference)
    if _kind(doc, reference) == "manifest":
        _check_config(skopeo, ref, top, want, reference)
        return top
    return _from_index(skopeo, ref, doc, want, reference)


def _check_config(skopeo: Skopeo, ref: ImageRef, digest: str, want: Platform, reference: str) -> None:
    config = _json(skopeo.raw(ref, digest, config=True), reference)
    have = _platform_of(config)
    if not _matches(want, have):
        raise LockFailure(f"{reference} is a single-platform image for {have}, not {want}: "
                          "set image.platform to it or use a base built for the platform")


def _from_index(skopeo: Skopeo, ref: ImageRef, doc: Mapping[str, Any], want: Platform, reference: str) -> str:
    entries = [entry for entry in doc.get("manifests") or [] if isinstance(entry, dict)]
    found: dict[str, Platform] = {}
    for entry in entries:
        if isinstance(entry.get("platform"), dict) and _matches(want, _platform_of(entry["platform"])):
            found.setdefault(str(entry.get("digest")), _platform_of(entry["platform"]))
    listed = sorted({str(_platform_of(e["platform"])) for e in entries if isinstance(e.get("platform"), dict)}
                    - {"unknown/unknown"})  # attestation manifests carry unknown/unknown
    if not found:
        raise LockFailure(f"{reference} has no image for {want} (it has {', '.join(listed) or 'no platforms'})")
    if len(found) > 1:
        variants = ", ".join(sorted(str(p) for p in found.values()))
        raise LockFailure(f"{reference} has several images for {want} ({variants}): name the variant in image.platform")
    digest = next(iter(found))
    if not is_digest(digest):
        raise LockFailure(f"{reference}: the index names {digest} for {want}, not a sha256 digest")
    child = skopeo.raw(ref, digest)
    if sha256_digest(child) != digest:
        raise LockFailure(f"{reference}: the manifest served for {digest} has another digest")
    if _kind(_json(child, reference), reference) != "manifest":
        raise LockFailure(f"{reference}: the {want} entry {digest} is itself an index; nested indexes are not supported")
    return digest


# -- the command ------------------------------------------------------------------------------


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
        if not _is_loopback(host):
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


def _layers(skopeo: Skopeo, reference: str, digest: str) -> list[str]:
    doc = _json(skopeo.raw(parse_reference(reference), digest), reference)
    return [str(layer.get("digest")) for layer in doc.get("layers") or [] if isinstance(layer, dict)]


def _warn_unless_on_base(skopeo: Skopeo, base: BaseEntry, reference: str, digest: str, err: TextIO) -> None:
    """Warn when the built image's first layers are not the locked base's: it was built from another base.

    Both build paths keep the base's layer blobs as they are (regctl image mod adds one layer; BuildKit
    reuses the base's compressed layers), so a prefix mismatch means another base, not recompression.
    """
    try:
        base_layers = _layers(skopeo, base.reference, base.digest)
        built_layers = _layers(skopeo, reference, digest)
    except LockFailure as exc:
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
    if old.built and old.built.reference == reference and old.built.digest == digest:
        out.write(f"{path}: built unchanged ({_show(reference, digest)})\n")
        return
    _warn_unless_on_base(skopeo_factory(), old.base, reference, digest, err)
    built = BuiltEntry(reference, digest, _now(), skopeo_factory().version)
    write_lock(Lock(base=old.base, built=built), path)
    before = f"{_show(old.built.reference, old.built.digest)} → " if old.built else ""
    out.write(f"{path}: built {before}{_show(reference, digest)}\n")


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile lock SPEC… [--update | --record-built] [--insecure-registry HOST] [--authfile FILE]`."""
    try:
        args = _parser().parse_args(argv)
        _check_options(args)
    except LockFailure as exc:
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
        except LockFailure as exc:
            err.write(f"megatron-compile lock: {exc}\n")
            status = EXIT_FAIL
        except OSError as exc:  # the lock's directory not writable, and the like
            err.write(f"megatron-compile lock: {exc.filename or spec}: {exc.strerror or exc}\n")
            status = EXIT_FAIL
    return status
