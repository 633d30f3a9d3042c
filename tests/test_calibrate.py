"""`megatron-compile calibrate SPEC LOG` and resources.host_time_factor (compiler/megatron/host_calibration.py):
a cluster's host factor from one run's log, and the step model with it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from compiler.cli import main
from compiler.megatron import timing
from compiler.megatron.host_calibration import calibrate, measured_step, mismatches
from compiler.one_pass import compile_spec
from compiler.schema.record import replace

REPO = Path(__file__).resolve().parent.parent
HOSTS = REPO / "tests" / "fixtures" / "h200-hosts"
TINY = str(REPO / "tests" / "e2e" / "mem-hc-tiny-l8-ga4.yaml")  # the host-bound yardstick of calls 6, 11 and 22


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["calibrate", *argv], out, err)
    return code, out.getvalue(), err.getvalue()


def test_a_fast_and_a_slow_host_get_factors_either_side_of_one() -> None:
    # the same compiled job: 100.7 ms on call 22's host, 197.9 on call 6's
    fast = json.loads(run(TINY, str(HOSTS / "call22/mem-hc-tiny-l8-ga4/train.log"), "--format", "json")[1])
    slow = json.loads(run(TINY, str(HOSTS / "call6/mem-hc-tiny-l8-ga4/train.log"), "--format", "json")[1])
    assert fast["runs"][0]["measured_ms"] == 100.7 and slow["runs"][0]["measured_ms"] == 197.9
    assert fast["host_time_factor"] < 1 < slow["host_time_factor"]
    assert slow["host_time_factor"] / fast["host_time_factor"] == pytest.approx(197.9 / 100.7, rel=0.05)


def test_the_factor_gives_the_measured_step_back() -> None:
    code, out, _ = run(TINY, str(HOSTS / "call6/mem-hc-tiny-l8-ga4/train.log"))
    assert code == 0
    factor = float(out.split("resources.host_time_factor: ")[1].split()[0])
    res = compile_spec(TINY, "tiny.yaml", render_files=False)
    assert res.spec is not None
    spec = replace(res.spec, resources=replace(res.spec.resources, host_time_factor=factor))
    step = timing.spec_step_time(spec)
    assert step is not None and step.seconds * 1e3 == pytest.approx(197.9, rel=0.01)
    # a calibrated host-bound estimate carries the calibrated runs' spread, and its source says the factor
    assert step.bound == "host"
    lo, hi = timing.MEASURED_SPREAD["host-calibrated"]
    assert step.spread_s == pytest.approx((step.seconds * lo, step.seconds * hi))
    assert f"x {factor:.2f} on this cluster" in step.utilisation_source


def test_several_runs_give_their_median_and_one_run_is_warned_about() -> None:
    # call 24: the shipped job three times on one host, 137.3, 171.9 and (with the distributed optimizer) 133.7 ms
    logs = [str(HOSTS / "call24" / n / "train.log") for n in ("calibrate-host", "calibrate-host-b", "calibrate-host-do")]
    spec = str(REPO / "specs" / "calibrate-host.yaml")
    code, out, _ = run(spec, *logs, "--format", "json")
    report = json.loads(out)
    assert code == 0 and [r["measured_ms"] for r in report["runs"]] == [137.3, 171.9, 133.7]
    factors = sorted(r["factor"] for r in report["runs"])
    assert report["host_time_factor"] == factors[1]
    code, out, _ = run(spec, logs[0])
    assert code == 0 and "(one run)" in out and "give 3 runs or more" in out
    assert "give 3" not in run(spec, *logs)[1]


def test_a_gpu_bound_run_is_refused() -> None:
    code, out, err = run(str(REPO / "tests" / "e2e" / "mem-l24.yaml"), str(HOSTS / "call6/mem-l24/train.log"))
    assert code == 1 and "the step is the GPU's" in out and "host_time_factor:" not in out
    assert "no calibration" in err and "no calibration" not in out  # the refusal where the other refusals go


def test_a_gpu_bound_run_slower_than_the_model_is_refused_not_blamed_on_the_host() -> None:
    # call 6's mem-l8-sel ran 121 ms where the model prices 89, GPU-bound: the whole gap is not the host's
    code, out, _ = run(str(REPO / "tests" / "e2e" / "mem-l8-sel.yaml"), str(HOSTS / "call6/mem-l8-sel/train.log"))
    assert code == 1 and "the step is the GPU's" in out and "host_time_factor:" not in out


def test_a_spec_the_step_model_cannot_time_is_refused_without_a_traceback() -> None:
    # the bounded example (no training.model): the message, not an AttributeError
    code, _, err = run(str(REPO / "specs" / "tp2.yaml"), str(HOSTS / "call6/mem-hc-tiny-l8-ga4/train.log"))
    assert code == 1 and "cannot time this spec" in err and "Traceback" not in err


def test_a_log_without_the_argument_dump_is_refused(tmp_path: Path) -> None:
    text = (HOSTS / "call6/mem-hc-tiny-l8-ga4/train.log").read_text(errors="replace")
    head, _, tail = text.partition("------ arguments ------")
    log = tmp_path / "train.log"
    log.write_text(head + tail.split("end of arguments", 1)[1])
    code, _, err = run(TINY, str(log))
    assert code == 1 and "no Megatron argument dump" in err


def test_another_architecture_is_another_job() -> None:
    # the same shape with RoPE (call 22) is not a run of the learned-position spec
    code, _, err = run(TINY, str(HOSTS / "call22/mem-hc-tiny-l8-ga4-rope/train.log"))
    assert code == 1 and "position_embedding_type: log rope, spec learned_absolute" in err


def test_another_jobs_log_is_refused() -> None:
    code, _, err = run(TINY, str(HOSTS / "call6/mem-hc-tiny-l8-ga4/train.log"), str(HOSTS / "call6/mem-l24/train.log"))
    assert code == 1 and "mem-l24/train.log: not a run of" in err and "num_layers: log 24, spec 8" in err
    assert "mem-hc-tiny-l8-ga4/train.log" not in err  # only the log that is another job's


def test_a_log_without_steady_iterations_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(" iteration        1/      60 | elapsed time per iteration (ms): 900.0 |\n")
    code, _, err = run(TINY, str(log))
    assert code == 1 and "fewer than 2 of Megatron's iteration lines" in err
    assert run(TINY, str(tmp_path / "missing.log"))[0] == 2
    assert run(TINY, str(tmp_path))[0] == 2  # a directory
    code, _, err = run(str(REPO / "specs"), str(HOSTS / "call6/mem-hc-tiny-l8-ga4/train.log"))
    assert code == 2 and "is a directory: give the one spec the logs ran" in err  # SPEC a directory
    code, _, err = run(str(tmp_path / "missing.yaml"), str(HOSTS / "call6/mem-hc-tiny-l8-ga4/train.log"))
    assert code == 2 and "is not a file" in err  # SPEC missing: a usage error, as a missing LOG is
    binary = tmp_path / "binary.log"
    binary.write_bytes(bytes(range(256)) * 10)
    assert run(TINY, str(binary))[0] == 1


def test_measured_step_skips_the_warm_up() -> None:
    text = "".join(f" iteration {k:8d}/      60 | consumed samples: 8 | elapsed time per iteration (ms): {t} |\n"
                   for k, t in ((1, 900.0), (2, 50.0), (3, 50.0), (4, 10.0), (5, 12.0), (6, 11.0)))
    m = measured_step(text)
    assert m is not None and m.seconds == pytest.approx(0.011) and m.iterations == 3
    assert mismatches({"num_layers": "8"}, {"num_layers": 8, "hidden_size": 256}) == []
    assert mismatches({"num_layers": "4"}, {"num_layers": 8}) == ["num_layers: log 4, spec 8"]


def test_calibrate_bisects_a_monotone_step() -> None:
    # a step of 10 ms GPU and 20 ms host x factor: a measured 50 ms is factor 2
    cal = calibrate(lambda f: max(0.010, 0.020 * f) + 0.010, 0.050)
    assert cal.factor == 2.0 and cal.host_share > 0.5
    # no factor in range reaches it
    assert calibrate(lambda f: 0.030 + 0.001 * f, 0.010).factor is None


def test_the_factor_is_range_checked_at_its_place(tmp_path: Path) -> None:
    spec = tmp_path / "x.yaml"
    text = Path(TINY).read_text().replace("  worker_flavor: H200\n", "  worker_flavor: H200\n  host_time_factor: 0\n")
    spec.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    assert main([str(spec), "-o", str(tmp_path / "gen")], out, err) == 1
    assert "host_time_factor" in out.getvalue() + err.getvalue()
    assert f"{spec}:" in out.getvalue() + err.getvalue()
