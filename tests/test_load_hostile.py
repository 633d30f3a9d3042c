"""Hostile inputs found by a fuzzing pass over the CLI (this round): a --set value, a spec's file name, an `extends`
entry, a hex integer, a price row and a spec directory each give a located diagnostic, never a traceback or a hang."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from compiler.cli import main
from helpers import REPO

TP2 = str(REPO / "specs" / "tp2.yaml")


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue() + err.getvalue()


_BOMB = ("[&a [x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], "
         "&d [*c,*c,*c,*c,*c,*c,*c,*c,*c], &e [*d,*d,*d,*d,*d,*d,*d,*d,*d], &f [*e,*e,*e,*e,*e,*e,*e,*e,*e], "
         "[*f,*f,*f,*f,*f,*f,*f,*f,*f]]")


@pytest.mark.parametrize(("setting", "message"), [
    ("parallelism.tensor=" + "9" * 5000, "cannot read"),  # past Python's 4300-digit int conversion
    ("parallelism.tensor=0x" + "f" * 4000, "too large an integer"),  # a hex int has no such limit, printing does
    ("training.args=" + "[" * 2000, "nesting depth"),  # a RecursionError in yaml.safe_load
    ("training.args=&r [*r]", "expands past"),  # a recursive alias
    ("training.args=" + _BOMB, "expands past"),  # 9^7 values from a short line: yaml.safe_load took minutes
    ("training.args=!!python/object:os.system x", "unsupported YAML tag"),
])
def test_a_set_value_is_read_under_the_spec_loaders_limits(setting: str, message: str) -> None:
    start = time.monotonic()
    code, text = _run(TP2, "--explain", "--set", setting)
    assert code == 1 and "Traceback" not in text and message in text and "[set-value]" in text, text[-500:]
    assert time.monotonic() - start < 20


def test_a_newline_in_a_set_line_is_escaped_in_the_header(tmp_path: Path) -> None:
    code, text = _run(TP2, "-q", "-o", str(tmp_path), "--set", "parallelism.tensor=2\n")
    assert code == 0, text
    launch = (tmp_path / "tp2" / "launch.sh").read_text().splitlines()
    assert all(not line or line.startswith("#") or not line.startswith("tensor=") for line in launch[:6])


def test_a_spec_file_name_with_a_control_character_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "a\nb.yaml"
    spec.write_text((REPO / "specs" / "tp2.yaml").read_text())
    code, text = _run(str(spec), "-o", str(tmp_path / "out"))
    assert code == 1 and "control character" in text and "[file-unreadable]" in text and "Traceback" not in text
    assert not (tmp_path / "out").exists()


def test_an_extends_entry_with_a_nul_is_refused_located(tmp_path: Path) -> None:
    spec = tmp_path / "nul.yaml"
    spec.write_text('extends: "base.yaml\\0x"\nversion: 1\n')
    code, text = _run(str(spec), "--explain")
    assert code == 1 and f"{spec}:1:10: error:" in text and "[extends-not-spec]" in text


def test_an_extends_diamond_is_composed_once_per_base(tmp_path: Path) -> None:
    # 20 levels of three bases each extending the next level's three: 3^20 paths to the last level when each base
    # was composed once per path (minutes and gigabytes), 60 files when once per spec
    for level in range(20, -1, -1):
        for name in "abc":
            path = tmp_path / f"{name}{level}.yaml"
            if level == 20:
                path.write_text((REPO / "specs" / "tp2.yaml").read_text())
            else:
                path.write_text(f"extends: [a{level + 1}.yaml, b{level + 1}.yaml, c{level + 1}.yaml]\n")
    start = time.monotonic()
    code, text = _run(str(tmp_path / "a0.yaml"), "--explain")
    assert code == 1 and "extends nests deeper than 16 levels" in text
    assert text.count("[extends-cycle]") < 10 and time.monotonic() - start < 20


def test_a_link_that_loops_in_a_spec_directory_is_one_located_error(tmp_path: Path) -> None:
    os.symlink("loop.yaml", tmp_path / "loop.yaml")
    code, text = _run(str(tmp_path))
    assert code == 1 and "cannot read the spec" in text and "Traceback" not in text


def test_a_denormal_write_rate_is_out_of_range() -> None:
    code, text = _run(str(REPO / "specs" / "gpt-7b.yaml"), "--explain", "--set", "stop.write_gb_s=5.0e-324")
    assert code == 1 and "stop.write_gb_s must be at least 0.001" in text


@pytest.mark.parametrize(("field", "value", "message"), [
    ("per_gpu_hour", "0x" + "f" * 4000, "too large an integer"),  # float() of it overflowed
    ("per_gpu_hour", ".nan", "per_gpu_hour must be a number from 0"),
    ("source", '"a\\nb"', "source holds a control character"),  # plan.md's one-line cost
])
def test_a_price_row_that_cannot_print_is_refused(field: str, value: str, message: str) -> None:
    from compiler.load.source import load_text
    from compiler.platform.prices import PRICES, price_table

    row = {"gpu": "h200", "engine": "any", "per_gpu_hour": "5.4", "currency": "USD", "date": "2024-12-01",
           "source": "a quote"}
    row[field] = value
    doc, diags = load_text("prices.yaml", "prices:\n  - " + "\n    ".join(f"{k}: {v}" for k, v in row.items()) + "\n")
    if doc is not None:
        rows, more = price_table(doc)
        diags += more
        assert rows == PRICES
    assert any(message in d.message for d in diags), [d.message for d in diags]
