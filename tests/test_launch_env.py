"""compiler/megatron/launch_env.py: what a pretraining launch exports beside the spec's training.env (issue 26,
device calls 50 and 51: cuBLASLt's heuristics cache for the local experts)."""

from __future__ import annotations

from pathlib import Path

from compiler.load.override import Override
from compiler.one_pass import compile_spec

E2E = Path(__file__).parent / "e2e"
CACHE = "export CUBLASLT_HEURISTICS_CACHE_CAPACITY=1048576"


def _launch(spec: str, *sets: str) -> str:
    res = compile_spec(str(E2E / spec), spec, overrides=tuple(Override(s) for s in sets))
    assert res.ok and res.files is not None
    return next(text for name, text in res.files.items() if str(name).endswith("launch.sh"))


def test_local_experts_get_the_large_heuristics_cache_with_its_reason() -> None:
    launch = _launch("fam-olmoe-l4.yaml")
    assert CACHE in launch.splitlines()
    assert "# CUBLASLT_HEURISTICS_CACHE_CAPACITY: the local experts' token counts outgrow cuBLASLt's default 8192 plans" \
        in launch


def test_dense_and_transformer_engine_experts_do_not() -> None:
    assert "CUBLASLT_HEURISTICS_CACHE_CAPACITY" not in _launch("mem-l4.yaml")
    te = _launch("fam-olmoe-l4.yaml", "training.model.transformer_impl=transformer_engine",
                 "image.base=nvcr.io/nvidia/pytorch:25.03-py3")
    assert "CUBLASLT_HEURISTICS_CACHE_CAPACITY" not in te


def test_the_spec_s_own_value_wins() -> None:
    launch = _launch("fam-olmoe-l4.yaml", "training.env.CUBLASLT_HEURISTICS_CACHE_CAPACITY=4096")
    assert "export CUBLASLT_HEURISTICS_CACHE_CAPACITY=4096" in launch and CACHE not in launch
    assert "outgrow cuBLASLt" not in launch
