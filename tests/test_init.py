"""`megatron-compile init`: a spec that compiles without diagnostics, or the compiler's refusal."""

import io
import itertools

import pytest

from compiler.cli import main
from compiler.one_pass import compile_spec

GRID = [
    (workers, gpus, tp, pp, cp)
    for workers, gpus in ((1, 1), (1, 2), (1, 8), (2, 8), (4, 8), (3, 4))
    for tp, pp, cp in itertools.product((1, 2, 4, 8), (1, 2, 4), (1, 2))
]


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("workers, gpus, tp, pp, cp", GRID)
def test_init_compiles_cleanly_or_refuses_with_the_compilers_diagnostics(tmp_path, workers, gpus, tp, pp, cp):
    target = tmp_path / "job.yaml"
    code, out, err = run("init", "job", "-o", str(target), "--workers", str(workers), "--gpus-per-worker", str(gpus),
                         "--tp", str(tp), "--pp", str(pp), "--cp", str(cp))
    possible = (workers * gpus) % (tp * pp * cp) == 0
    if possible:
        assert code == 0, out + err
        result = compile_spec(str(target), "job.yaml")
        assert result.ok and result.diagnostics == [], result.diagnostics
        assert result.plan.world_size == workers * gpus
        assert target.read_text().startswith("# yaml-language-server: $schema=")
    else:
        assert code == 1
        assert "[parallel-divisibility]" in out
        assert not target.exists()
        # the diagnostics' lines are of a file never written: the refusal says so, and which option sets each key
        assert "not written" in err and "--tp, --pp and --cp set parallelism.tensor" in err


def test_init_extends_a_base(tmp_path):
    from helpers import REPO

    (tmp_path / "base.yaml").write_text((REPO / "specs" / "base.yaml").read_text())
    code, out, err = run("init", "job", "-o", str(tmp_path / "job.yaml"), "--extends", str(tmp_path / "base.yaml"))
    assert code == 0, out + err
    text = (tmp_path / "job.yaml").read_text()
    assert "extends: base.yaml" in text and "image:" not in text
    assert compile_spec(str(tmp_path / "job.yaml"), "job.yaml").ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml", "job.yaml"]


def test_init_refuses_a_bad_name_and_an_existing_file(tmp_path):
    code, out, _ = run("init", "Bad_Name", "-o", str(tmp_path / "x.yaml"))
    assert code == 1 and "[value]" in out
    (tmp_path / "y.yaml").write_text("mine\n")
    code, _, err = run("init", "y", "-o", str(tmp_path / "y.yaml"))
    assert code == 1 and "not overwriting" in err
