"""compiler/platform/images.py: a reference pinned to a digest in each consumer's spelling."""

from __future__ import annotations

import pytest

from compiler.platform.images import (
    ImageRef,
    image_pins,
    aistudio_image,
    docker_from,
    enroot_uri,
    is_digest,
    kubernetes_image,
    parse_reference,
    pinned_reference,
    regctl_reference,
    skopeo_reference,
)

D = "sha256:" + "0123456789abcdef" * 4
OTHER = "sha256:" + "f" * 64


@pytest.mark.parametrize(("reference", "parts"), [
    ("nvcr.io/nvidia/pytorch:25.03-py3", ImageRef("nvcr.io", "nvidia/pytorch", "25.03-py3", None)),
    ("ubuntu", ImageRef(None, "ubuntu", None, None)),
    ("ubuntu:24.04", ImageRef(None, "ubuntu", "24.04", None)),
    ("library/ubuntu:24.04", ImageRef(None, "library/ubuntu", "24.04", None)),
    ("localhost/x/y", ImageRef("localhost", "x/y", None, None)),
    ("127.0.0.1:5000/ns/repo:v1", ImageRef("127.0.0.1:5000", "ns/repo", "v1", None)),
    ("127.0.0.1:5000/ns/repo", ImageRef("127.0.0.1:5000", "ns/repo", None, None)),
    (f"cr.example.com/a/b/c:t@{D}", ImageRef("cr.example.com", "a/b/c", "t", D)),
    (f"cr.example.com/a@{D}", ImageRef("cr.example.com", "a", None, D)),
])
def test_parse_reference(reference, parts):
    assert parse_reference(reference) == parts
    assert parts.registry == (parts.host or "docker.io")


@pytest.mark.parametrize("bad", ["", "nvcr.io/", "repo:", "repo@sha256:abc", f"repo@sha512:{'0' * 64}"])
def test_parse_reference_refuses(bad):
    with pytest.raises(ValueError):
        parse_reference(bad)


def test_pinned_forms():
    ref = "nvcr.io/nvidia/pytorch:25.03-py3"
    assert docker_from(ref, D) == f"nvcr.io/nvidia/pytorch:25.03-py3@{D}"
    assert regctl_reference(ref, D) == f"nvcr.io/nvidia/pytorch@{D}"
    assert aistudio_image("cr.example.com/ns/megatron-core:t1", D) == f"cr.example.com/ns/megatron-core:t1@{D}"
    assert kubernetes_image(ref, D) == f"nvcr.io/nvidia/pytorch@{D}"
    assert pinned_reference("ubuntu", D) == f"ubuntu@{D}"
    # A digest already in the spec's reference is replaced by the locked one (the platform's).
    assert pinned_reference(f"{ref}@{OTHER}", D) == f"nvcr.io/nvidia/pytorch:25.03-py3@{D}"
    with pytest.raises(ValueError):
        pinned_reference(ref, "sha256:short")


def test_skopeo_reference_never_has_tag_and_digest():
    assert skopeo_reference("nvcr.io/nvidia/pytorch:25.03-py3") == "docker://nvcr.io/nvidia/pytorch:25.03-py3"
    assert skopeo_reference("nvcr.io/nvidia/pytorch:25.03-py3", D) == f"docker://nvcr.io/nvidia/pytorch@{D}"
    assert skopeo_reference(f"nvcr.io/nvidia/pytorch:25.03-py3@{D}") == f"docker://nvcr.io/nvidia/pytorch@{D}"
    assert skopeo_reference("ubuntu") == "docker://ubuntu"


def test_enroot_uri():
    assert enroot_uri("nvcr.io/nvidia/pytorch:25.03-py3", D) == f"docker://nvcr.io#nvidia/pytorch@{D}"
    assert enroot_uri("nvcr.io/nvidia/pytorch:25.03-py3", D, legacy=True) == f"docker://nvcr.io#nvidia/pytorch:{D}"
    assert enroot_uri("127.0.0.1:5000/ns/repo:v1", D) == f"docker://127.0.0.1:5000#ns/repo@{D}"
    assert enroot_uri("docker.io/library/ubuntu:24.04", D) == f"docker://ubuntu@{D}"
    assert enroot_uri("ubuntu:24.04", D) == f"docker://ubuntu@{D}"
    assert enroot_uri("nvidia/cuda:12.8", D) == f"docker://nvidia/cuda@{D}"


def test_is_digest():
    assert is_digest(D)
    assert not is_digest(D.upper()) and not is_digest(D[:-1]) and not is_digest("sha256:" + "g" * 64)


def test_image_pins_with_and_without_a_lock():
    base, built = "nvcr.io/nvidia/pytorch:25.03-py3", "cr.example.com/ns/megatron-core:t1"
    pins = image_pins(base, built, D, OTHER)
    assert pins.base_pinned and pins.built_pinned
    assert pins.docker_from == f"{base}@{D}"
    assert pins.regctl_source == f"nvcr.io/nvidia/pytorch@{D}"
    assert pins.built == built
    assert pins.job_image == f"{built}@{OTHER}"
    assert pins.kubernetes_image == f"cr.example.com/ns/megatron-core@{OTHER}"
    assert pins.enroot_uri == f"docker://cr.example.com#ns/megatron-core@{OTHER}"
    base_only = image_pins(base, built, D, None)
    assert base_only.docker_from == f"{base}@{D}" and base_only.job_image == built and not base_only.built_pinned
    unpinned = image_pins(base, built, None, None)
    assert (unpinned.docker_from, unpinned.regctl_source, unpinned.job_image) == (base, base, built)
    assert unpinned.enroot_uri == "docker://cr.example.com#ns/megatron-core:t1"
    assert not unpinned.base_pinned
