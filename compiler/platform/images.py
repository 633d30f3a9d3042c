"""Image references pinned to a digest, spelled the way each consumer of an artifact parses them.

Pure functions over strings: no network, no spec objects. A reference is distribution's
`[host[:port]/]path[:tag][@sha256:hex]`; the host is the first component when it has a '.' or a
':' or is `localhost` (the rule Docker, containerd and skopeo share), otherwise the image is on
Docker Hub.

Forms, by consumer:
- Dockerfile `FROM` and the AIStudio job image: `host/path:tag@sha256:…`: the tag stays for the
  reader, the digest decides (BuildKit resolves a reference with both by its digest; AIStudio's
  job description takes the image as a plain string).
- regctl and Kubernetes `image:`: `host/path@sha256:…`, the digest alone: the form every reference
  parser accepts (the Kubernetes images page documents "a tag or digest"); a script keeps the tag
  in a variable of its own for the reader.
- skopeo: `docker://host/path@sha256:…`: skopeo 1.9.3 refuses a tag and a digest together ("Docker
  references with both a tag and digest are currently not supported").
- enroot/pyxis: `docker://host#path@sha256:…`; enroot releases whose docker.sh parses only
  `[REGISTRY#]IMAGE[:TAG]` (docker::import's regex, tag `[[:alnum:]._:-]+`) need the legacy form
  `docker://host#path:sha256:…`, which puts the digest in the tag slot of `/v2/IMAGE/manifests/TAG`.
"""

from __future__ import annotations

import re
from ..tuples import NamedTuple

DIGEST = r"sha256:[0-9a-f]{64}"  # re.fullmatch: compiled at the first use, for a pinned image
DOCKER_HUB = "docker.io"


class ImageRef(NamedTuple):
    """A reference split into its parts; `host` is None when the reference names none (Docker Hub)."""

    host: str | None
    path: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """host/path as written (no tag, no digest)."""
        return f"{self.host}/{self.path}" if self.host else self.path

    @property
    def registry(self) -> str:
        """The registry host, docker.io when the reference names none."""
        return self.host or DOCKER_HUB


def is_digest(value: str) -> bool:
    """True for a full `sha256:` followed by 64 lowercase hex digits."""
    return re.fullmatch(DIGEST, value) is not None


def _host_of(first: str) -> bool:
    return "." in first or ":" in first or first == "localhost"


def parse_reference(reference: str) -> ImageRef:
    """Split `[host/]path[:tag][@digest]`; ValueError for an empty path or a malformed digest."""
    rest, digest = reference, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not is_digest(digest):
            raise ValueError(f"{reference}: the digest must be sha256: and 64 lowercase hex digits")
    host = None
    first, sep, remainder = rest.partition("/")
    if sep and _host_of(first):
        host, rest = first, remainder
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
    if not rest or rest.endswith("/") or not (tag is None or tag):
        raise ValueError(f"{reference}: not an image reference")
    return ImageRef(host, rest, tag, digest)


def _checked(digest: str) -> str:
    if not is_digest(digest):
        raise ValueError(f"{digest}: not a sha256 digest")
    return digest


def pinned_reference(reference: str, digest: str, *, keep_tag: bool = True) -> str:
    """`name:tag@digest` (or `name@digest` without keep_tag); a digest already in `reference` is replaced."""
    ref = parse_reference(reference)
    tag = f":{ref.tag}" if keep_tag and ref.tag else ""
    return f"{ref.name}{tag}@{_checked(digest)}"


def docker_from(reference: str, digest: str) -> str:
    """The word after `FROM` in a Dockerfile."""
    return pinned_reference(reference, digest)


def regctl_reference(reference: str, digest: str) -> str:
    """A reference regctl copies by digest (the digest alone)."""
    return pinned_reference(reference, digest, keep_tag=False)


def aistudio_image(reference: str, digest: str) -> str:
    """The AIStudio job's image: the pushed reference with its tag, pinned."""
    return pinned_reference(reference, digest)


def kubernetes_image(reference: str, digest: str) -> str:
    """A Kubernetes container `image:` by digest alone."""
    return pinned_reference(reference, digest, keep_tag=False)


def skopeo_reference(reference: str, digest: str | None = None) -> str:
    """`docker://…` for skopeo: by digest when there is one (the tag dropped), else as written."""
    ref = parse_reference(reference)
    digest = digest or ref.digest
    if digest:
        return f"docker://{ref.name}@{_checked(digest)}"
    return f"docker://{ref.name}:{ref.tag}" if ref.tag else f"docker://{ref.name}"


def enroot_uri(reference: str, digest: str | None, *, legacy: bool = False) -> str:
    """enroot's `docker://[REGISTRY#]IMAGE@sha256:…` (legacy: `…IMAGE:sha256:…`); `…IMAGE:TAG` without a digest."""
    ref = parse_reference(reference)
    # enroot supplies registry-1.docker.io and library/ itself when no registry is named.
    prefix = "" if ref.host in (None, DOCKER_HUB, "index.docker.io", "registry-1.docker.io") else f"{ref.host}#"
    path = ref.path
    if prefix == "" and path.startswith("library/"):
        path = path[len("library/"):]
    if digest is None:
        return f"docker://{prefix}{path}:{ref.tag}" if ref.tag else f"docker://{prefix}{path}"
    separator = ":" if legacy else "@"
    return f"docker://{prefix}{path}{separator}{_checked(digest)}"


class ImagePins(NamedTuple):
    """Every artifact's spelling of the base and the built image: pinned where the lock has a digest,
    the reference as written (a moving tag) where it has none."""

    base_digest: str | None
    built_digest: str | None
    docker_from: str  # Dockerfile FROM
    regctl_source: str  # regctl.sh's source of the base copy
    built: str  # registry/namespace/repository:tag, the reference the build pushes (never pinned: it is pushed to)
    job_image: str  # AIStudio job.json `image`
    kubernetes_image: str
    enroot_uri: str  # Slurm with pyxis/enroot

    @property
    def base_pinned(self) -> bool:
        return self.base_digest is not None

    @property
    def built_pinned(self) -> bool:
        return self.built_digest is not None


def image_pins(base: str, built: str, base_digest: str | None, built_digest: str | None) -> ImagePins:
    """The pinned forms of a spec's base (image.base) and built image (registry/namespace/repository:tag),
    given the lock's digests (None where it has none)."""
    def pin(reference: str, digest: str | None, keep_tag: bool = True) -> str:
        return reference if digest is None else pinned_reference(reference, digest, keep_tag=keep_tag)

    return ImagePins(
        base_digest=base_digest, built_digest=built_digest,
        docker_from=pin(base, base_digest), regctl_source=pin(base, base_digest, keep_tag=False), built=built,
        job_image=pin(built, built_digest), kubernetes_image=pin(built, built_digest, keep_tag=False),
        enroot_uri=enroot_uri(built, built_digest),
    )
