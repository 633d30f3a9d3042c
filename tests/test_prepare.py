"""The preparation step for real: the generated prepare.sh and verify-prepare.sh on a corpus this
test writes. With MEGATRON_LM pointing at a Megatron-LM checkout (and its dependencies importable)
they run Megatron's own tools/preprocess_data.py; otherwise tests/fixtures/prepare-stub, which
writes the same files in Megatron's format (each test says which in its output)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import FIXTURES, compile_text

STUB = FIXTURES / "prepare-stub"
MEGATRON = os.environ.get("MEGATRON_LM")
ROOT = Path(MEGATRON) if MEGATRON and (Path(MEGATRON) / "tools" / "preprocess_data.py").is_file() else STUB


def _spec(mount: Path, inputs: list[str]) -> str:
    listed = "".join(f"        - {{path: {mount}/corpus/{name}}}\n" for name in inputs)
    return f"""version: 1
name: prep-01
image: {{base: nvcr.io/nvidia/pytorch:25.03-py3, registry: cr.infini-ai.com, namespace: te-0123456789abcdef,
         repository: megatron-core, tag: 0.18.2-cu128}}
megatron: {{commit: 571370c829ca768fe37244f4e2e7f28d8accc4ab, root: {ROOT}}}
resources: {{workers: 1, gpus_per_worker: 1}}
storage: {{mount_path: {mount}}}
training:
  script: pretrain_gpt.py
  model: {{num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 128, max_position_embeddings: 128,
          vocab_size: 50257, transformer_impl: local}}
  batch: {{micro: 1, global: 1}}
  train_iters: 10
  optimizer: {{lr: 0.001}}
  data:
    prepare:
      inputs:
{listed}      json_keys: [text]
      workers: 1
    tokenizer: {{type: GPT2BPETokenizer, vocab_file: {mount}/tok/vocab.json, merge_file: {mount}/tok/merges.txt}}
  checkpoint: {{save_interval: 10}}
  fused_kernels: false
"""


@pytest.fixture
def prepared(tmp_path):
    mount = tmp_path / "mnt"
    (mount / "corpus").mkdir(parents=True)
    for name, n in (("wiki.jsonl", 200), ("code.jsonl", 50)):
        with open(mount / "corpus" / name, "w") as handle:
            for i in range(n):
                handle.write(json.dumps({"text": f"document {i} " + "some words here " * (i % 7 + 1)}) + "\n")
    result = compile_text(_spec(mount, ["wiki.jsonl", "code.jsonl"]), "specs/prep.yaml", tmp=tmp_path)
    assert result.ok, result.diagnostics
    out = tmp_path / "out"
    out.mkdir()
    for name in ("prepare.sh", "verify-prepare.sh", "verify.sh"):
        (out / name).write_text(result.files[name])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"preprocess_data.py: {'Megatron-LM at ' + str(ROOT) if ROOT != STUB else 'the stub (no MEGATRON_LM)'}")
    return mount, out, env


def _run(script: Path, env: dict, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300, **kwargs)


def test_prepare_writes_prefixes_and_manifests_that_verify(prepared):
    mount, out, env = prepared
    run = _run(out / "prepare.sh", env)
    assert run.returncode == 0, run.stdout + run.stderr
    data = mount / "data" / "prep-01"
    for stem in ("wiki", "code"):
        prefix = data / f"{stem}_text_document"
        assert (prefix.with_suffix(".bin")).stat().st_size > 0 and prefix.with_suffix(".idx").stat().st_size > 0
        manifest = dict(line.split(": ", 1) for line in (data / f"{stem}_text_document.manifest").read_text().splitlines())
        assert manifest["input"] == str(mount / "corpus" / f"{stem}.jsonl")
        assert manifest["tokenizer_type"] == "GPT2BPETokenizer"
        assert int(manifest["documents"]) == {"wiki": 200, "code": 50}[stem]
        assert int(manifest["bin_bytes"]) == prefix.with_suffix(".bin").stat().st_size
        assert len(manifest["input_sha256"]) == 64 and len(manifest["vocabulary_sha256"]) == 64
        assert manifest["append_eod"] == "true"
    assert not list(data.glob(".prepare-*")), "the temporary directory is removed"
    check = _run(out / "verify-prepare.sh", env)
    assert check.returncode == 0, check.stdout
    assert "18 of 18 checks passed" in check.stdout


def test_prepare_is_idempotent(prepared):
    mount, out, env = prepared
    assert _run(out / "prepare.sh", env).returncode == 0
    data = mount / "data" / "prep-01"
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in data.iterdir()}
    again = _run(out / "prepare.sh", env)
    assert again.returncode == 0
    assert again.stdout.count("is prepared already from this input and tokenizer; skipping it") == 2
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in data.iterdir()} == before


def _rerun_after(prepared, change) -> tuple[str, dict[str, str]]:
    """prepare.sh, then `change(mount)`, then prepare.sh again: its output and the wiki manifest."""
    mount, out, env = prepared
    assert _run(out / "prepare.sh", env).returncode == 0
    change(mount)
    again = _run(out / "prepare.sh", env)
    assert again.returncode == 0, again.stdout + again.stderr
    manifest = mount / "data" / "prep-01" / "wiki_text_document.manifest"
    return again.stdout, dict(line.split(": ", 1) for line in manifest.read_text().splitlines())


def _append(mount: Path) -> None:
    with open(mount / "corpus" / "wiki.jsonl", "a") as handle:
        handle.write(json.dumps({"text": "one more document"}) + "\n")


def _same_size_other_bytes(mount: Path) -> None:
    path = mount / "corpus" / "wiki.jsonl"
    data = bytearray(path.read_bytes())
    data[-5] = ord("X") if data[-5] != ord("X") else ord("Y")  # inside the last document's text
    path.write_bytes(bytes(data))


def _new_vocabulary(mount: Path) -> None:
    (mount / "tok").mkdir(exist_ok=True)
    (mount / "tok" / "vocab.json").write_text('{"a": 0}')


@pytest.mark.parametrize(("change", "line"), [
    (_append, "input_bytes"), (_same_size_other_bytes, "input_sha256"), (_new_vocabulary, "vocabulary_sha256"),
])
def test_a_prefix_made_from_other_input_or_vocabulary_is_made_again(prepared, change, line):
    out, manifest = _rerun_after(prepared, change)
    assert "wiki_text_document was prepared from something else; preparing it again" in out
    assert f"  {line}: " in out, out
    kept = "code.jsonl is prepared already from this input and tokenizer" in out
    assert kept == (change is not _new_vocabulary), out  # the vocabulary is every prefix's
    mount = prepared[0]
    path = mount / "corpus" / "wiki.jsonl"
    assert int(manifest["input_bytes"]) == path.stat().st_size
    if change is _append:
        assert manifest["documents"] == "201"


def test_a_prefix_made_with_another_tokenizer_is_made_again(prepared, tmp_path):
    mount, out, env = prepared
    assert _run(out / "prepare.sh", env).returncode == 0
    other = compile_text(_spec(mount, ["wiki.jsonl", "code.jsonl"]).replace("GPT2BPETokenizer", "Llama2Tokenizer")
                         .replace(f"vocab_file: {mount}/tok/vocab.json, merge_file: {mount}/tok/merges.txt",
                                  f"model: {mount}/tok/tokenizer.model"), "specs/prep.yaml", tmp=tmp_path)
    assert other.ok, other.diagnostics
    (out / "prepare.sh").write_text(other.files["prepare.sh"])
    again = _run(out / "prepare.sh", env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("was prepared from something else; preparing it again") == 2
    assert "  tokenizer_type: Llama2Tokenizer" in again.stdout


def test_a_killed_run_leaves_nothing_training_would_read_and_the_next_run_recovers(prepared):
    mount, out, env = prepared
    data = mount / "data" / "prep-01"
    proc = subprocess.Popen(["bash", str(out / "prepare.sh")], env={**env, "STUB_SLEEP_AFTER_BIN": "30"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not list(data.glob(".prepare-*/wiki_text_document.bin")):
        time.sleep(0.1)
    assert list(data.glob(".prepare-*/wiki_text_document.bin")), "the run got to writing its first .bin"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not [p for p in data.iterdir() if not p.name.startswith(".prepare-")], \
        "no prefix file is published before its run finished"
    # training's verify.sh refuses the missing data, and the next preparation cleans up and finishes
    assert "FAIL" in _run(out / "verify.sh", env).stdout
    again = _run(out / "prepare.sh", env)
    assert again.returncode == 0, again.stderr
    assert "left by an interrupted run" in again.stdout
    assert not list(data.glob(".prepare-*"))
    assert _run(out / "verify-prepare.sh", env).returncode == 0


def test_an_input_without_the_key_fails_and_publishes_nothing(prepared):
    mount, out, env = prepared
    (mount / "corpus" / "code.jsonl").write_text(json.dumps({"body": "no text key"}) + "\n")
    run = _run(out / "prepare.sh", env)
    assert run.returncode != 0
    assert not (mount / "data" / "prep-01" / "code_text_document.manifest").exists()


def test_the_storage_estimate_is_within_10_percent_of_the_h200_run():
    """docs/e2e.md: the bytes prepare.sh wrote on the H200 (its manifest) against the estimate for
    the input size it recorded; the ratios are stated in compiler/megatron/data.py."""
    from compiler.megatron.data import estimate_prefix

    text = (FIXTURES / "e2e-steps" / "summary-2026-12-01.txt").read_text()
    manifest = dict(line.split(": ", 1) for line in text.splitlines()
                    if line.split(": ", 1)[0] in ("input_bytes", "bin_bytes", "idx_bytes"))
    written = int(manifest["bin_bytes"]) + int(manifest["idx_bytes"])
    est = estimate_prefix(int(manifest["input_bytes"]), 1000, 4)
    assert abs(est.bin_bytes + est.idx_bytes - written) / written < 0.10


THROUGHPUT = FIXTURES / "prepare-throughput"


def test_the_time_model_predicts_each_h200_run_it_was_not_fitted_to():
    """Out of sample: tools/fit_prepare_time.py fits the model to three of the four runs and predicts
    the fourth. The three runs of the 52 MB corpus are predicted within 10 %; the 2 MB run, the only
    one that separates the fixed cost from the tokenizing rate, within 25 % (-21.8 %: without it
    the fixed cost is not determined). compiler/megatron/data.py states these figures."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from fit_prepare_time import leave_one_out, runs

    errors = {held.name: error for held, _, error in leave_one_out(runs())}
    assert all(abs(errors[name]) < 0.10 for name in ("prep-w1", "prep-w4", "prep-w8")), errors
    assert abs(errors["tiny-w4"]) < 0.25, errors


@pytest.mark.parametrize("run", ["prep-w1", "prep-w4", "prep-w8", "tiny-w4"])
def test_the_time_estimate_is_within_10_percent_of_the_h200_runs_in_sample(run):
    """IN SAMPLE: the shipped rates were fitted to these same four runs (the held-out check is the
    test above). tests/fixtures/prepare-throughput: the generated prepare.sh timed on the H200 host
    with 1, 4 and 8 workers on a 52 MB corpus, and with 4 on the 2 MB one, against the estimate for
    each run's input, documents and workers (the wall time of prepare.sh: start, tokenizing, read-back)."""
    from compiler.megatron.data import estimate_prefix

    manifest = dict(line.split(": ", 1) for line in (THROUGHPUT / f"{run}.manifest").read_text().splitlines())
    timing = dict(line.split(" ", 1)[1].split(": ", 1) for line in (THROUGHPUT / "timing.txt").read_text().splitlines()
                  if line.startswith(f"{run} wall_seconds:"))
    wall = float(timing["wall_seconds"])
    workers = 1 if run == "prep-w1" else 8 if run == "prep-w8" else 4
    est = estimate_prefix(int(manifest["input_bytes"]), 1000, workers, int(manifest["documents"]))
    assert abs(est.seconds - wall) / wall < 0.10, (est.seconds, wall)
    assert abs(est.tokens - int(manifest["tokens"])) / int(manifest["tokens"]) < 0.10
