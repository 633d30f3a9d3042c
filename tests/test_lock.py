"""`megatron-compile lock` against a real registry on loopback (tests/registry.py), and the lock file's
format, its located errors and its check against the spec (no registry needed for those)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from registry import Registry, registry_fixture

from compiler.commands.lock import image_of_spec, main
from compiler.load.lockfile import (
    HEADER,
    BaseEntry,
    BuiltEntry,
    Lock,
    LockError,
    check_lock,
    dump_lock,
    lock_path,
)
from compiler.load.lockparse import parse_lock, read_lock
from compiler.platform.images import docker_from, kubernetes_image, pinned_reference

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    yield from registry_fixture(tmp_path_factory, None)


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory):
    yield from registry_fixture(tmp_path_factory, "basic")


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory):
    yield from registry_fixture(tmp_path_factory, "token")


def write_spec(directory: Path, base: str, platform: str = "linux/amd64", registry: str = "cr.example.com",
               tag: str = "t1", name: str = "job") -> Path:
    """A base spec holding the image section and a job spec extending it, as specs/ has them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "base.yaml").write_text(
        "version: 1\n"
        "megatron:\n"
        "  commit: 571370c829ca768fe37244f4e2e7f28d8accc4ab\n"
        "image:\n"
        f"  base: {base}\n"
        f"  platform: {platform}\n"
        f"  registry: {registry}\n"
        "  namespace: ns\n"
        "  repository: megatron-core\n"
        f"  tag: {tag}\n")
    spec = directory / f"{name}.yaml"
    spec.write_text(f"extends: base.yaml\nname: {name}\n")
    return spec


def lock(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def insecure(registry: Registry) -> list[str]:
    return ["--insecure-registry", registry.host]


# -- against the registry -------------------------------------------------------------------------


def test_lock_resolves_the_pushed_digest(registry, tmp_path):
    pushed = registry.push("ns/base:v1", "first")
    spec = write_spec(tmp_path, f"{registry.host}/ns/base:v1")
    code, out, err = lock(str(spec), *insecure(registry))
    assert (code, err) == (0, "")
    locked = read_lock(lock_path(spec))
    assert locked is not None
    assert locked.base.digest == pushed == registry.inspect_digest(f"{registry.host}/ns/base:v1")
    assert locked.base.reference == f"{registry.host}/ns/base:v1"
    assert locked.base.platform == "linux/amd64"
    assert locked.base.resolved_with.startswith("skopeo 1.")
    assert f"@{pushed}" in out
    assert lock_path(spec) == tmp_path / "job.lock"


def test_specs_sharing_a_base_lock_it_once_each(registry, tmp_path):
    pushed = registry.push("ns/shared:v1", "shared")
    first = write_spec(tmp_path, f"{registry.host}/ns/shared:v1", name="one")
    second = tmp_path / "two.yaml"
    second.write_text("extends: base.yaml\nname: two\n")
    # --insecure-registry without the port covers every port of that host
    code, out, err = lock(str(first), str(second), "--insecure-registry", "127.0.0.1")
    assert (code, err) == (0, "")
    assert out.count(f"@{pushed}") == 2
    assert lock_path(first).read_text().split("resolved_at")[0] == lock_path(second).read_text().split("resolved_at")[0]


def test_lock_file_is_stable_and_update_without_change_keeps_it(registry, tmp_path, monkeypatch):
    registry.push("ns/stable:v1", "stable")
    spec = write_spec(tmp_path, f"{registry.host}/ns/stable:v1")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764581400")
    assert lock(str(spec), *insecure(registry))[0] == 0
    first = lock_path(spec).read_bytes()
    assert b'resolved_at: "2025-12-01T09:30:00Z"' in first
    assert dump_lock(parse_lock(first.decode())).encode() == first  # one byte form
    assert first.decode().startswith(HEADER)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1864581400")  # a later run: only a new digest may change the file
    code, out, _ = lock(str(spec), *insecure(registry))
    assert code == 0 and "up to date" in out
    code, out, _ = lock("--update", str(spec), *insecure(registry))
    assert code == 0 and "base unchanged" in out
    assert lock_path(spec).read_bytes() == first


def test_repush_under_the_same_tag_shows_old_to_new_on_update(registry, tmp_path, monkeypatch):
    old = registry.push("ns/moving:v1", "release one")
    spec = write_spec(tmp_path, f"{registry.host}/ns/moving:v1")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764581400")
    assert lock(str(spec), *insecure(registry))[0] == 0
    new = registry.push("ns/moving:v1", "release two")
    assert new != old
    # A plain `lock` keeps what was reviewed: a moved tag changes nothing until --update.
    code, out, _ = lock(str(spec), *insecure(registry))
    assert code == 0 and "up to date" in out and old in out
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764585000")
    code, out, err = lock("--update", str(spec), *insecure(registry))
    assert (code, err) == (0, "")
    assert f"@{old} (linux/amd64) → {registry.host}/ns/moving:v1@{new} (linux/amd64)" in out
    locked = read_lock(lock_path(spec))
    assert locked is not None and locked.base.digest == new
    assert locked.base.resolved_at == "2025-12-01T10:30:00Z"
    # The pinned forms name an image the registry still serves, whatever the tag says now.
    assert registry.inspect_digest(pinned_reference(f"{registry.host}/ns/moving:v1", old, keep_tag=False)) == old
    assert docker_from(locked.base.reference, locked.base.digest) == f"{registry.host}/ns/moving:v1@{new}"
    assert kubernetes_image(locked.base.reference, locked.base.digest) == f"{registry.host}/ns/moving@{new}"


def test_index_gives_the_platforms_manifest(registry, tmp_path):
    index, per_platform = registry.push_index("ns/multi:v1", "multi", ["linux/amd64", "linux/arm64", "linux/arm/v7"])
    for number, platform in enumerate(["linux/amd64", "linux/arm64", "linux/arm/v7", "linux/arm64/v8"]):
        spec = write_spec(tmp_path / str(number), f"{registry.host}/ns/multi:v1", platform=platform)
        code, _, err = lock(str(spec), *insecure(registry))
        assert (code, err) == (0, "")
        locked = read_lock(lock_path(spec))
        assert locked is not None
        assert locked.base.digest == per_platform[platform.removesuffix("/v8")]
        assert locked.base.digest != index
    spec = write_spec(tmp_path / "s390x", f"{registry.host}/ns/multi:v1", platform="linux/s390x")
    code, _, err = lock(str(spec), *insecure(registry))
    assert code == 1
    assert "has no image for linux/s390x (it has linux/amd64, linux/arm/v7, linux/arm64/v8)" in err
    assert not lock_path(spec).exists()


def test_single_platform_image_of_another_platform_is_refused(registry, tmp_path):
    registry.push("ns/armonly:v1", "arm", architecture="arm64")
    spec = write_spec(tmp_path, f"{registry.host}/ns/armonly:v1", platform="linux/amd64")
    code, _, err = lock(str(spec), *insecure(registry))
    assert code == 1
    assert "is a single-platform image for linux/arm64/v8, not linux/amd64" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_base_with_a_digest_resolves_by_digest(registry, tmp_path):
    # skopeo 1.9.3 refuses `name:tag@digest`; the command asks for `name@digest`.
    digest = registry.push("ns/pinned:v1", "pinned")
    registry.push("ns/pinned:v1", "moved on")
    spec = write_spec(tmp_path, f"{registry.host}/ns/pinned:v1@{digest}")
    code, _, err = lock(str(spec), *insecure(registry))
    assert (code, err) == (0, "")
    locked = read_lock(lock_path(spec))
    assert locked is not None and locked.base.digest == digest


def test_unknown_tag_is_one_line(registry, tmp_path):
    spec = write_spec(tmp_path, f"{registry.host}/ns/nothing:v9")
    code, out, err = lock(str(spec), *insecure(registry))
    assert (code, out) == (1, "")
    assert err.startswith("megatron-compile lock: docker://") and "no such repository or tag" in err
    assert err.count("\n") == 1
    assert not lock_path(spec).exists()


def test_plain_http_registry_needs_the_insecure_option(registry, tmp_path):
    registry.push("ns/http:v1", "http")
    spec = write_spec(tmp_path, f"{registry.host}/ns/http:v1")
    code, _, err = lock(str(spec))
    assert code == 1 and f"pass --insecure-registry {registry.host}" in err


def test_insecure_registry_is_for_loopback_only(tmp_path):
    spec = write_spec(tmp_path, "nvcr.io/nvidia/pytorch:25.03-py3")
    code, _, err = lock(str(spec), "--insecure-registry", "nvcr.io")
    assert code == 2 and "only loopback registries" in err


@pytest.mark.parametrize("kind", ["basic", "token"])
def test_authentication(kind, request, tmp_path):
    registry = request.getfixturevalue(f"{kind}_registry")
    pushed = registry.push("ns/private:v1", "private")
    spec = write_spec(tmp_path, f"{registry.host}/ns/private:v1")
    code, _, err = lock(str(spec), *insecure(registry))
    assert code == 1 and "refused access" in err and f"skopeo login {registry.host}" in err
    wrong = registry.write_authfile(tmp_path / "wrong.json", "not-the-password")
    code, _, err = lock(str(spec), *insecure(registry), "--authfile", str(wrong))
    assert code == 1 and "refused access" in err
    code, _, err = lock(str(spec), *insecure(registry), "--authfile", str(registry.authfile))
    assert (code, err) == (0, "")
    text = lock_path(spec).read_text()
    assert pushed in text
    assert registry.password not in text and registry.user not in text
    assert Path(registry.authfile).read_text().split('"auth": "')[1].split('"')[0] not in text
    if kind == "token":
        assert registry.token.requests, "skopeo asked the token server for a Bearer token"


def test_missing_authfile_is_a_usage_error(tmp_path):
    spec = write_spec(tmp_path, "nvcr.io/nvidia/pytorch:25.03-py3")
    code, _, err = lock(str(spec), "--authfile", str(tmp_path / "none.json"))
    assert code == 2 and "no such file" in err


def test_up_to_date_lock_needs_neither_skopeo_nor_network(registry, tmp_path, monkeypatch):
    registry.push("ns/offline:v1", "offline")
    spec = write_spec(tmp_path, f"{registry.host}/ns/offline:v1")
    assert lock(str(spec), *insecure(registry))[0] == 0
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, _ = lock(str(spec))
    assert code == 0 and "up to date" in out
    code, _, err = lock("--update", str(spec))
    assert code == 1 and "skopeo is not installed" in err


def test_record_built_and_a_new_base_drops_it(registry, tmp_path):
    registry.push("ns/parent:v1", "parent")
    spec = write_spec(tmp_path, f"{registry.host}/ns/parent:v1", registry=registry.host, tag="b1")
    code, _, err = lock("--record-built", str(spec), *insecure(registry))
    assert code == 1 and "no lock yet" in err
    assert lock(str(spec), *insecure(registry))[0] == 0
    built = registry.push_derived("ns/parent:v1", "ns/megatron-core:b1", "what regctl image mod would add")
    code, out, err = lock("--record-built", str(spec), *insecure(registry))
    assert (code, err) == (0, "")
    assert f"built {registry.host}/ns/megatron-core:b1@{built}" in out
    locked = read_lock(lock_path(spec))
    assert locked is not None and locked.built is not None
    assert (locked.built.reference, locked.built.digest) == (f"{registry.host}/ns/megatron-core:b1", built)
    assert check_lock(locked, image_of_spec(spec), str(spec)) == []
    code, out, _ = lock("--update", str(spec), *insecure(registry))  # same base: the record stays
    assert code == 0 and read_lock(lock_path(spec)) == locked
    registry.push("ns/parent:v1", "parent, rebuilt upstream")
    code, out, _ = lock("--update", str(spec), *insecure(registry))
    assert code == 0 and "built record of" in out and "dropped" in out
    relocked = read_lock(lock_path(spec))
    assert relocked is not None and relocked.built is None


def test_record_built_warns_when_not_built_on_the_locked_base(registry, tmp_path):
    registry.push("ns/parent2:v1", "parent")
    spec = write_spec(tmp_path, f"{registry.host}/ns/parent2:v1", registry=registry.host, tag="b2")
    assert lock(str(spec), *insecure(registry))[0] == 0
    stranger = registry.push("ns/megatron-core:b2", "built from scratch, not from the base")
    code, out, err = lock("--record-built", str(spec), *insecure(registry))
    assert code == 0 and f"@{stranger}" in out
    assert "does not start with the layers of the locked base" in err


def test_record_built_refuses_a_stale_base(registry, tmp_path):
    registry.push("ns/parent3:v1", "parent")
    spec = write_spec(tmp_path, f"{registry.host}/ns/parent3:v1", registry=registry.host, tag="b3")
    assert lock(str(spec), *insecure(registry))[0] == 0
    write_spec(tmp_path, f"{registry.host}/ns/parent3:v1", platform="linux/arm64", registry=registry.host, tag="b3")
    code, _, err = lock("--record-built", str(spec), *insecure(registry))
    assert code == 1 and "image.platform is linux/arm64" in err and "lock the base first" in err


def test_lock_follows_a_changed_spec(registry, tmp_path):
    first = registry.push("ns/follow:v1", "one")
    second = registry.push("ns/follow:v2", "two")
    spec = write_spec(tmp_path, f"{registry.host}/ns/follow:v1")
    assert lock(str(spec), *insecure(registry))[0] == 0
    write_spec(tmp_path, f"{registry.host}/ns/follow:v2")
    locked = read_lock(lock_path(spec))
    assert locked is not None and [p.field for p in check_lock(locked, image_of_spec(spec))] == ["image.base"]
    code, out, _ = lock(str(spec), *insecure(registry))
    assert code == 0 and f"v1@{first} (linux/amd64) → {registry.host}/ns/follow:v2@{second}" in out


def test_damaged_lock_is_a_located_error_in_the_command(registry, tmp_path):
    spec = write_spec(tmp_path, f"{registry.host}/ns/whatever:v1")
    lock_path(spec).write_text(_good_text().replace('"sha256:' + "a" * 64, '"sha256:abc'))
    code, _, err = lock(str(spec), *insecure(registry))
    assert code == 1
    assert f"{lock_path(spec)}:4:11: error: base.digest (sha256:abc) is not a sha256 digest" in err
    assert err.count("\n") == 1


# -- the lock file, without a registry --------------------------------------------------------------


def _lock(built: bool = False) -> Lock:
    base = BaseEntry("nvcr.io/nvidia/pytorch:25.03-py3", "linux/amd64", DIGEST_A, "2026-12-01T09:30:00Z", "skopeo 1.9.3")
    made = BuiltEntry("cr.example.com/ns/megatron-core:t1", DIGEST_B, "2026-12-01T10:00:00Z", "skopeo 1.9.3")
    return Lock(base=base, built=made if built else None)


def _good_text(built: bool = False) -> str:
    return dump_lock(_lock(built))


IMAGE = {"base": "nvcr.io/nvidia/pytorch:25.03-py3", "platform": "linux/amd64", "registry": "cr.example.com",
         "namespace": "ns", "repository": "megatron-core", "tag": "t1"}


def test_dump_is_sorted_quoted_and_round_trips():
    text = _good_text(built=True)
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == [
        "base:",
        f'  digest: "{DIGEST_A}"',
        '  platform: "linux/amd64"',
        '  reference: "nvcr.io/nvidia/pytorch:25.03-py3"',
        '  resolved_at: "2026-12-01T09:30:00Z"',
        '  resolved_with: "skopeo 1.9.3"',
        "built:",
        f'  digest: "{DIGEST_B}"',
        '  recorded_at: "2026-12-01T10:00:00Z"',
        '  recorded_with: "skopeo 1.9.3"',
        '  reference: "cr.example.com/ns/megatron-core:t1"',
        "version: 1",
    ]
    parsed = parse_lock(text, "x.lock")
    assert parsed == _lock(built=True) and dump_lock(parsed) == text
    assert parsed.position("base.digest") == (4, 3) and parsed.position("built.reference") == (13, 3)


def test_hand_written_plain_scalars_parse_too():
    text = _good_text().replace('"', "")
    assert parse_lock(text) == _lock()


@pytest.mark.parametrize(("edit", "where", "message"), [
    (lambda t: t.replace('  platform: "linux/amd64"\n', ""), (3, 1), "base: missing platform"),
    (lambda t: t.replace("version: 1", "version: 2"), (9, 10), "lock version 2 is not supported"),
    (lambda t: t.replace("version: 1", 'version: "1"'), (9, 10), "version must be an integer"),
    (lambda t: t.replace("version: 1\n", ""), (3, 1), "missing version"),
    (lambda t: t.replace("  platform:", "  platfrom:"), (5, 3), "base.platfrom: unknown key in base"),
    (lambda t: t + "extra: 1\n", (10, 1), "extra: unknown key in the lock"),
    (lambda t: t.replace("version: 1\n", '  digest: "x"\nversion: 1\n'), (9, 3), "duplicate key 'digest'"),
    (lambda t: t.replace("09:30:00Z", "25:30:00Z"), (7, 16), "is not a valid date and time"),
    (lambda t: t.replace("09:30:00Z", "09:30"), (7, 16), "is not a UTC time"),
    (lambda t: t.replace('"linux/amd64"', '"linux amd64"'), (5, 13), "is not a platform"),
    (lambda t: t.replace('"skopeo 1.9.3"', "null"), (8, 18), "base.resolved_with must be a non-empty string"),
    (lambda t: t.replace('reference: "nvcr.io', 'reference: "nvcr io'), (6, 14), "is not an image reference"),
    (lambda t: t.replace("base:\n", "base: [\n"), (5, 3), "not valid YAML"),
    (lambda t: "# nothing\n", (1, 1), "the lock file is empty"),
    (lambda t: "- a\n", (1, 1), "the lock must be a mapping"),
])
def test_damaged_lock_is_located(edit, where, message):
    text = edit(_good_text())
    with pytest.raises(LockError) as caught:
        parse_lock(text, "specs/job.lock")
    error = caught.value
    found = [p for p in error.problems if message in p.message]
    assert found, str(error)
    assert (found[0].line, found[0].column) == where, str(error)
    assert f"specs/job.lock:{where[0]}:{where[1]}: error: " in str(error)
    assert "hint: " in str(error)


def test_a_damaged_lock_reports_every_problem_at_once():
    text = (_good_text().replace("  platform:", "  platfrom:").replace("09:30:00Z", "25:30:00Z")
            .replace("version: 1", "version: 2"))
    with pytest.raises(LockError) as caught:
        parse_lock(text, "specs/job.lock")
    messages = [p.message for p in caught.value.problems]
    assert any("unknown key" in m for m in messages) and any("valid date" in m for m in messages)
    assert any("version 2" in m for m in messages) and any("missing platform" in m for m in messages)


def test_an_unknown_key_that_is_not_a_word_is_not_echoed():
    secret = "root:x:0:0:root:/root:/bin/bash"
    with pytest.raises(LockError) as caught:
        parse_lock(_good_text() + f"{secret}: 1\n", "specs/job.lock")
    assert secret not in str(caught.value) and "not a lock field" in str(caught.value)


def test_check_lock_names_the_spec_field_and_the_lock_line():
    locked = parse_lock(_good_text(built=True), "specs/job.lock")
    assert check_lock(locked, IMAGE) == []
    moved = check_lock(locked, {**IMAGE, "base": "nvcr.io/nvidia/pytorch:25.04-py3"}, "specs/job.yaml")
    assert [(p.field, p.lock_key, p.line) for p in moved] == [("image.base", "base.reference", 6)]
    assert moved[0].message == ("image.base is nvcr.io/nvidia/pytorch:25.04-py3 but the lock specs/job.lock:6 pins "
                                "nvcr.io/nvidia/pytorch:25.03-py3")
    assert "megatron-compile lock --update specs/job.yaml" in moved[0].hint
    platform = check_lock(locked, {**IMAGE, "platform": "linux/arm64"})
    assert [(p.field, p.line) for p in platform] == [("image.platform", 5)]
    assert "resolved for linux/amd64" in platform[0].message
    retagged = check_lock(locked, {**IMAGE, "tag": "t2", "namespace": "other"})
    assert [(p.field, p.lock_key, p.line) for p in retagged] == [
        ("image.namespace", "built.reference", 13), ("image.tag", "built.reference", 13)]


def test_image_of_spec_merges_extends(tmp_path):
    spec = write_spec(tmp_path, "nvcr.io/nvidia/pytorch:25.03-py3")
    spec.write_text("extends: base.yaml\nimage:\n  tag: override\n")
    image = image_of_spec(spec)
    assert image["tag"] == "override" and image["base"] == "nvcr.io/nvidia/pytorch:25.03-py3"


def test_seed_specs_have_an_image_section():
    repo = Path(__file__).resolve().parent.parent
    image = image_of_spec(repo / "specs" / "tp2.yaml")
    assert image["base"] == "nvcr.io/nvidia/pytorch:25.03-py3" and image["platform"] == "linux/amd64"
    assert os.path.basename(lock_path(repo / "specs" / "tp2.yaml")) == "tp2.lock"


# -- the lock through a compile -----------------------------------------------------------------


def test_compiled_artifacts_carry_the_locked_digests_without_the_network(registry, tmp_path, monkeypatch):
    """lock, push the built image, lock --record-built; then a compile with no skopeo and no sockets
    pins FROM, job.json and plan.md; a re-push under the same tag makes --check fail until regenerated."""
    import socket

    from helpers import resolved_text

    from compiler.cli import main as compile_main

    base_digest = registry.push("ns/base:v1", "first")
    text = resolved_text("tp2").replace("base: nvcr.io/nvidia/pytorch:25.03-py3", f"base: {registry.host}/ns/base:v1")
    text = text.replace("registry: cr.infini-ai.com", f"registry: {registry.host}").replace(
        "namespace: te-0123456789abcdef", "namespace: ns")
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    assert lock(*insecure(registry), str(spec))[0] == 0
    built_digest = registry.push_derived("ns/base:v1", "ns/megatron-core:0.18.2-cu128", "megatron source")
    assert lock("--record-built", *insecure(registry), str(spec))[0] == 0

    def no_network(*args, **kwargs):
        raise AssertionError("a compile touched the network")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setenv("PATH", "/nonexistent")
    out_dir = tmp_path / "out"
    assert compile_main([str(spec), "-o", str(out_dir)], io.StringIO(), io.StringIO()) == 0
    dockerfile = (out_dir / "job" / "Dockerfile").read_text()
    assert f"FROM {registry.host}/ns/base:v1@{base_digest}\n" in dockerfile
    job = (out_dir / "job" / "job.json").read_text()
    assert f'"image": "{registry.host}/ns/megatron-core:0.18.2-cu128@{built_digest}"' in job
    assert f"pinned to {base_digest} for linux/amd64" in (out_dir / "job" / "plan.md").read_text()
    monkeypatch.undo()

    registry.push("ns/base:v1", "second")
    code, out, _ = lock("--update", *insecure(registry), str(spec))
    assert code == 0 and "→" in out
    err = io.StringIO()
    assert compile_main(["--check", str(spec), "-o", str(out_dir)], io.StringIO(), err) == 1


def test_require_lock_fails_a_spec_without_one(tmp_path, in_repo):
    from compiler.cli import main as compile_main

    out = io.StringIO()
    assert compile_main(["--check", "--require-lock", "specs/tp2.yaml"], out, io.StringIO()) == 1
    assert "[image-unpinned]" in out.getvalue() and "run `megatron-compile lock specs/tp2.yaml`" in out.getvalue()


# -- a built record carries what it was built from (issue 29, item 3) -------------------------------


def _built_spec(tmp_path: Path, commit: str = "571370c829ca768fe37244f4e2e7f28d8accc4ab") -> Path:
    from helpers import REPO

    for name in ("tp2.yaml", "base.yaml"):
        (tmp_path / name).write_text((REPO / "specs" / name).read_text())
    text = (tmp_path / "tp2.yaml").read_text()
    (tmp_path / "tp2.yaml").write_text(text + f"megatron:\n  commit: {commit}\n")
    return tmp_path / "tp2.yaml"


def _record(spec: Path, **changes: str) -> None:
    from compiler.commands.lock import built_from_spec, image_of_spec
    from compiler.load.lockfile import built_reference, write_lock

    image = image_of_spec(spec)
    base = BaseEntry(image["base"], image["platform"], DIGEST_A, "2026-12-01T09:30:00Z", "skopeo 1.9.3")
    sources = {**built_from_spec(spec, DIGEST_A), **changes}
    built = BuiltEntry(built_reference(image), DIGEST_B, "2026-12-01T10:00:00Z", "skopeo 1.9.3", **sources)
    write_lock(Lock(base=base, built=built), lock_path(spec))


def _diagnostics(spec: Path) -> tuple[int, str]:
    from compiler.cli import main as compile_main

    out, err = io.StringIO(), io.StringIO()
    code = compile_main([str(spec), "-o", str(spec.parent / "out")], out, err)
    return code, out.getvalue() + err.getvalue()


def test_a_built_record_of_the_same_sources_pins_the_built_digest(tmp_path):
    spec = _built_spec(tmp_path)
    _record(spec)
    code, text = _diagnostics(spec)
    assert code == 0, text
    assert DIGEST_B in (tmp_path / "out" / "tp2" / "job.json").read_text()


@pytest.mark.parametrize(("changes", "field", "recorded"), [
    ({"from_megatron_commit": "0" * 40}, "megatron.commit", "0" * 40),
    ({"from_base_digest": "sha256:" + "c" * 64}, "image.base", "sha256:" + "c" * 64),
    ({"from_megatron_repo": "https://example.com/fork.git"}, "megatron.repo", "fork.git"),
    ({"from_megatron_root": "/opt/other"}, "megatron.root", "/opt/other"),
    ({"from_packages": "megatron-bridge==0.4.0"}, "init_from", "megatron-bridge==0.4.0"),
])
def test_a_built_record_from_other_sources_is_lock_stale_at_the_spec_field(tmp_path, changes, field, recorded):
    spec = _built_spec(tmp_path)
    _record(spec, **changes)
    code, text = _diagnostics(spec)
    assert code == 1 and "[lock-stale]" in text, text
    assert f"was built from {field} " in text and recorded in text
    line = next(l for l in text.splitlines() if "[lock-stale]" in l)
    assert line.startswith((f"{spec}:", f"{tmp_path}/base.yaml:")) and "--record-built" in text


def test_a_spec_moved_to_another_commit_after_the_record_is_lock_stale(tmp_path):
    spec = _built_spec(tmp_path)
    _record(spec)
    _built_spec(tmp_path, commit="a" * 40)
    code, text = _diagnostics(spec)
    line = next(l for l in text.splitlines() if "[lock-stale]" in l)
    row = spec.read_text().splitlines().index("  commit: " + "a" * 40) + 1
    assert line.startswith(f"{spec}:{row}:11: error: ") and "megatron.commit 571370c8" in line, text


def test_a_built_record_without_its_sources_is_stale(tmp_path):
    spec = _built_spec(tmp_path)
    _record(spec)
    text = lock_path(spec).read_text()
    kept = "\n".join(line for line in text.splitlines() if "from_" not in line) + "\n"
    lock_path(spec).write_text(kept)
    code, out = _diagnostics(spec)
    assert code == 1 and "[lock-stale]" in out and "recorded by an older megatron-compile" in out
