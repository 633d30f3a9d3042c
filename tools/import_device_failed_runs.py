"""Turn tools/failed_runs_device.sh's tarball into tests/fixtures/failed-runs/gpu-*/.

    PYTHONPATH=$PWD python tools/import_device_failed_runs.py failed-runs.tar.gz
    PYTHONPATH=$PWD python tools/import_device_failed_runs.py causes-runs.tar.gz causes-keep gpu-causes-summary.txt

(the second: tools/failed_runs_causes_device.sh's tarball, whose consoles are <name>.txt, worker 0)

For each run root in the tarball: run/ (its logs and records; the tarball holds no checkpoint),
run/ckpt/latest_checkpointed_iteration.txt when the run saved one, ckpt-files.txt (the checkpoint's
file names and sizes, from which tests rebuild it), console-<worker>.txt, spec.yaml (the spec of
tests/e2e/failed/<name>.yaml with its bases merged, so that it stands alone) and scenario.json (what
was broken, and the exit statuses summary.txt reports). expected.json is written by hand, not here.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.one_pass import compile_spec  # noqa: E402
from compiler.commands.resolved import resolved_yaml  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "failed-runs"
SPECS = REPO / "tests" / "e2e" / "failed"


def _spec(name: str) -> str:
    display = f"tests/e2e/failed/{name}.yaml"
    result = compile_spec(str(SPECS / f"{name}.yaml"), display)
    assert result.ok and result.spec is not None, result.diagnostics
    return resolved_yaml(result.spec, display)


def _broken(name: str) -> str:
    """The spec's own comment line: what the scenario broke."""
    said = []
    for line in (SPECS / f"{name}.yaml").read_text().splitlines():
        if line.startswith("# ") and "schema" not in line:
            said.append(line[2:])
        elif said:
            break  # the comment's first paragraph
    return " ".join(said)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(argv[0]) as tar:
            tar.extractall(tmp, filter="data")
        runs = Path(tmp) / "mnt" / "megatron" / "runs"
        keep = Path(tmp) / (argv[1] if len(argv) > 1 else "failed-keep")
        summary_name = argv[2] if len(argv) > 2 else "gpu-summary.txt"
        script = "tools/failed_runs_causes_device.sh" if len(argv) > 1 else "tools/failed_runs_device.sh"
        summary = (keep / "summary.txt").read_text()
        for run in sorted(runs.iterdir()):
            name = run.name
            dest = FIXTURES / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(run, dest / "run")
            latest = keep / "listings" / f"{name}-latest.txt"
            if latest.exists():
                (dest / "run" / "ckpt").mkdir(parents=True, exist_ok=True)
                shutil.copy(latest, dest / "run" / "ckpt" / "latest_checkpointed_iteration.txt")
            listing = keep / "listings" / f"{name}-ckpt.txt"
            if listing.exists():
                shutil.copy(listing, dest / "ckpt-files.txt")
            for console in sorted((keep / "consoles").glob(f"{name}-*.txt")):
                worker = console.stem.rsplit("-", 1)[1]
                if worker.isdigit():
                    shutil.copy(console, dest / f"console-{worker}.txt")
            if (keep / "consoles" / f"{name}.txt").exists():
                shutil.copy(keep / "consoles" / f"{name}.txt", dest / "console-0.txt")
            (dest / "spec.yaml").write_text(_spec(name))
            statuses = re.findall(rf"end {re.escape(name)} worker (\d+): exit status (\d+)", summary) or \
                [("0", c) for c in re.findall(rf"end {re.escape(name)}: exit status (\d+)", summary)[-1:]]
            (dest / "scenario.json").write_text(json.dumps({
                "name": name, "broken": _broken(name), "machine": f"nvidia-h200 ({script})",
                "exit_statuses": {w: int(c) for w, c in statuses},
            }, indent=2) + "\n")
            print(f"{name}: {sorted(p.name for p in (dest / 'run').rglob('*') if p.is_file())}")
        shutil.copy(keep / "summary.txt", FIXTURES / summary_name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
