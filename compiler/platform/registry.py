"""Resolving an image's platform digest through skopeo (`skopeo inspect --raw`), never hand-written
registry HTTP: skopeo does the registry's token or basic authentication from its auth files.

An image index (or Docker manifest list) gives the digest of the platform's entry, checked by
fetching that manifest; a plain manifest gives its own digest after its config's os/architecture
is checked. Every failure is a RegistryFailure with a one-line message that says what to do.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import Any, Mapping

from ..tuples import NamedTuple
from .images import ImageRef, is_digest, parse_reference, skopeo_reference

SKOPEO_TIMEOUT_S = 120  # one registry round trip; skopeo's own --command-timeout is a little shorter

INDEX_TYPES = {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
MANIFEST_TYPES = {"application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"}


class RegistryFailure(Exception):
    """An image could not be resolved: a one-line message for stderr."""


def is_loopback(host: str) -> bool:
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
            raise RegistryFailure(f"cannot run {self.binary}: {exc.strerror}") from None
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
            raise RegistryFailure(f"{name}: skopeo did not answer within {SKOPEO_TIMEOUT_S} s") from None
        except OSError as exc:
            raise RegistryFailure(f"cannot run {self.binary}: {exc.strerror}") from None
        if done.returncode != 0:
            raise RegistryFailure(_explain(ref, name, done.stderr.decode("utf-8", "replace")))
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
        result: str = json.loads(f'"{body}"')
        return result
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
        raise RegistryFailure(f"{text}: a platform is os/architecture[/variant], e.g. linux/amd64")
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


def _json(raw: bytes, name: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RegistryFailure(f"{name}: the registry's answer is not JSON") from None
    if not isinstance(doc, dict):
        raise RegistryFailure(f"{name}: the registry's answer is not a manifest")
    return doc


def _kind(doc: Mapping[str, Any], name: str) -> str:
    media = doc.get("mediaType")
    if doc.get("schemaVersion") == 1:
        raise RegistryFailure(f"{name}: a Docker schema 1 manifest; push the image again with a current client")
    if media in INDEX_TYPES or (media is None and "manifests" in doc):
        return "index"
    if media in MANIFEST_TYPES or (media is None and "config" in doc and "layers" in doc):
        return "manifest"
    raise RegistryFailure(f"{name}: not an image manifest or index (media type {media})")


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
        raise RegistryFailure(str(exc)) from None
    want = parse_platform(platform_text)
    raw = skopeo.raw(ref)
    top = sha256_digest(raw)
    if ref.digest and top != ref.digest:
        raise RegistryFailure(f"{reference}: the registry served a manifest whose digest is {top}")
    doc = _json(raw, reference)
    if _kind(doc, reference) == "manifest":
        _check_config(skopeo, ref, top, want, reference)
        return top
    return _from_index(skopeo, ref, doc, want, reference)


def _check_config(skopeo: Skopeo, ref: ImageRef, digest: str, want: Platform, reference: str) -> None:
    config = _json(skopeo.raw(ref, digest, config=True), reference)
    have = _platform_of(config)
    if not _matches(want, have):
        raise RegistryFailure(f"{reference} is a single-platform image for {have}, not {want}: "
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
        raise RegistryFailure(f"{reference} has no image for {want} (it has {', '.join(listed) or 'no platforms'})")
    if len(found) > 1:
        variants = ", ".join(sorted(str(p) for p in found.values()))
        raise RegistryFailure(f"{reference} has several images for {want} ({variants}): name the variant in image.platform")
    digest = next(iter(found))
    if not is_digest(digest):
        raise RegistryFailure(f"{reference}: the index names {digest} for {want}, not a sha256 digest")
    child = skopeo.raw(ref, digest)
    if sha256_digest(child) != digest:
        raise RegistryFailure(f"{reference}: the manifest served for {digest} has another digest")
    if _kind(_json(child, reference), reference) != "manifest":
        raise RegistryFailure(f"{reference}: the {want} entry {digest} is itself an index; nested indexes are not supported")
    return digest


# -- the command ------------------------------------------------------------------------------


def layers(skopeo: Skopeo, reference: str, digest: str) -> list[str]:
    """The layer digests of one platform's manifest, in order."""
    doc = _json(skopeo.raw(parse_reference(reference), digest), reference)
    return [str(layer.get("digest")) for layer in doc.get("layers") or [] if isinstance(layer, dict)]
