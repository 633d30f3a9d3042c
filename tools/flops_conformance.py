"""Megatron-LM's own num_floating_point_operations on the cases of tests/fixtures/flops_cases.json.

    python tools/flops_conformance.py PATH-TO-MEGATRON-LM [--write tests/fixtures/flops_megatron.json]

Imports megatron.training.training from the checkout (it needs torch, numpy and triton; on Python
3.11 typing.override is aliased to typing_extensions') and prints {case: FLOPs} as JSON: the
figures tests/test_timing.py compares compiler/megatron/timing.py's port with. Nothing of Megatron
is copied; only the numbers its function returns are recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "fixtures" / "flops_cases.json"
# Every attribute the function reads, with FlopsArgs' defaults (compiler/megatron/timing.py).
sys.path.insert(0, str(REPO))


def megatron_flops(root: Path) -> dict[str, float]:
    """{case name: Megatron's FLOPs for the case's global batch}."""
    if not hasattr(typing, "override"):
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]
    sys.path.insert(0, str(root))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.training.training import num_floating_point_operations  # type: ignore[import-not-found]
    from compiler.megatron.flops import FlopsArgs

    out: dict[str, float] = {}
    for case in json.loads(CASES.read_text()):
        args = types.SimpleNamespace(**FlopsArgs(**case["args"])._asdict())
        out[case["name"]] = float(num_floating_point_operations(args, case["batch_size"]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("megatron", type=Path, help="a Megatron-LM checkout (its megatron/ package)")
    parser.add_argument("--write", type=Path, help="also write the JSON to this file")
    args = parser.parse_args(argv)
    result = megatron_flops(args.megatron)
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    if args.write:
        args.write.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
