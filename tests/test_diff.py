"""`megatron-compile diff`: the corpus of pull requests in tests/diff_cases/, every number against a
separate compile of each side, the git reading, the output formats and their bounds."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from compiler import cli
from compiler.commands.diff_model import flatten

REPO = Path(__file__).resolve().parent.parent
CASES = sorted((Path(__file__).resolve().parent / "diff_cases").glob("*.yaml"))


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def build_repo(tmp: Path, case: dict) -> Path:
    """The case's base revision committed on main, then its change applied in the work tree."""
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for rel in case["base"]:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, repo / rel)
    for rel, text in (case.get("base_write") or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "change")
    for rel, pairs in (case.get("edit") or {}).items():
        text = (repo / rel).read_text()
        for old, new in pairs:
            assert old in text, (rel, old)
            text = text.replace(old, new)
        (repo / rel).write_text(text)
    for rel, text in (case.get("write") or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for old, new in (case.get("move") or {}).items():
        (repo / old).rename(repo / new)
    for rel in case.get("remove") or ():
        (repo / rel).unlink()
    for rel in case.get("copy") or ():
        shutil.copyfile(REPO / rel, repo / rel)
    return repo


def run(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = cli.main(argv, out, err)
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


def explain_values(cwd: Path, spec: str) -> dict:
    """What a separate `--explain --format json` compile of one spec prints, flattened like diff's keys."""
    code, out, err = run(["--explain", "--format", "json", "--no-cache", spec], cwd)
    document = json.loads(out)
    assert document["specs"], (code, out, err)
    found: dict = {}
    data = document["specs"][0]
    data.pop("spec")
    flatten(data, "explain", found)
    return found


@pytest.mark.parametrize("case_file", CASES, ids=lambda p: p.stem)
def test_diff_case(case_file, tmp_path):
    case = yaml.safe_load(case_file.read_text())
    expect = case["expect"]
    repo = build_repo(tmp_path, case)
    code, out, err = run(["diff", "--format", "json"], repo)
    report = json.loads(out)
    specs = {s["path"]: s for s in report["specs"]}
    assert {p: s["status"] for p, s in specs.items() if s["status"] != "unchanged" or p in expect["status"]} \
        == expect["status"], out
    assert code == expect["exit"] == report["exit_code"], out
    for path, keys in (expect.get("changed") or {}).items():
        changed = {c["key"] for c in specs[path]["changes"]}
        assert set(keys) <= changed, sorted(changed)
    for path, kinds in (expect.get("unchanged_kinds") or {}).items():
        assert not [c for c in specs[path]["changes"] if c["kind"] in kinds], specs[path]["changes"]
    for path, codes in (expect.get("guardrails") or {}).items():
        assert sorted(d["code"] for d in specs[path]["guardrails"]) == sorted(codes), specs[path]["guardrails"]
    # every derived number equals what a separate compile of that side prints
    base_checkout = tmp_path / "base"
    git(repo, "worktree", "add", "-q", str(base_checkout), "main")
    for path, spec in specs.items():
        derived = [c for c in spec["changes"] if c["kind"] == "derived"]
        if not derived or spec["status"] == "error":
            continue
        head = explain_values(repo, path)
        base = explain_values(base_checkout, path) if spec["status"] == "changed" else {}
        for change in derived:
            assert change["head"] == head.get(change["key"]), change
            assert change["base"] == base.get(change["key"]), change
    # the Steps section's values are plan.md's text, of a separate compile of each side
    for path, spec in specs.items():
        steps = [c for c in spec["changes"] if c["kind"] == "step"]
        if not steps:
            continue
        head_md = plan_md(repo, path, tmp_path / "head-out")
        base_md = plan_md(base_checkout, path, tmp_path / "base-out") if spec["status"] == "changed" else ""
        for change in steps:
            assert change["head"] is None or md_escaped(change["head"]) in head_md, change
            assert change["base"] is None or md_escaped(change["base"]) in base_md, change


def plan_md(cwd: Path, spec: str, out: Path) -> str:
    code, _, err = run([spec, "--no-cache", "-o", str(out)], cwd)
    assert code == 0, err
    return (out / Path(spec).stem / "plan.md").read_text()


def md_escaped(text: str) -> str:
    return text.replace("|", "\\|")


def _many_specs(tmp_path: Path, count: int) -> Path:
    """`count` specs sharing one job file, all committed; then the job file's iterations doubled."""
    repo = tmp_path / "many"
    (repo / "specs" / "jobs").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shutil.copyfile(REPO / "specs/base.yaml", repo / "specs/base.yaml")
    job = (REPO / "specs/pretrain-mock.yaml").read_text().replace("extends: base.yaml\n", "")
    job = "\n".join(line for line in job.splitlines() if not line.startswith(("name:", "  run_root:", "storage:")))
    (repo / "specs/jobs/mock.yaml").write_text(job + "\n")
    for i in range(count):
        (repo / f"specs/job-{i:03d}.yaml").write_text(f"extends: [base.yaml, jobs/mock.yaml]\nname: job-{i:03d}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    text = (repo / "specs/jobs/mock.yaml").read_text()
    (repo / "specs/jobs/mock.yaml").write_text(text.replace("train_iters: 20", "train_iters: 40"))
    return repo


def test_a_pull_request_touching_500_specs_gives_one_comment_under_the_limit(tmp_path):
    repo = _many_specs(tmp_path, 500)
    code, out, err = run(["diff", "--base", "main", "--format", "markdown"], repo)
    assert code == 2, err
    assert out.startswith("<!-- megatron-compile-diff -->\n")
    assert len(out) <= 65_535
    assert out.count("<!-- megatron-compile-diff -->") == 1
    assert "**500 of 500 specs change**" in out
    assert "more specs change" in out or "more specs left out" in out
    assert "| `specs/job-000.yaml` | changed |" in out


def test_markdown_puts_one_summary_row_per_job_before_the_details(tmp_path):
    repo = _many_specs(tmp_path, 3)
    code, out, _ = run(["diff", "--format", "markdown"], repo)
    assert code == 2
    rows = [line for line in out.splitlines() if line.startswith("| `specs/job-")]
    assert len(rows) == 3
    assert out.index(rows[-1]) < out.index("<details>")
    assert out.count("<details>") == out.count("</details>") == 3
    assert "GPU-hours" in rows[0] and "+100.0 %" in rows[0]


def test_exit_codes_and_errors(tmp_path):
    repo = _many_specs(tmp_path, 1)
    assert run(["diff", "--base", "HEAD", "specs/job-000.yaml"], repo)[0] == 2
    git(repo, "stash", "-q")
    code, out, _ = run(["diff", "--base", "HEAD"], repo)
    assert code == 0 and "1 no change" in out
    (repo / "specs/job-000.yaml").write_text("extends: [base.yaml, jobs/mock.yaml]\nname: Bad_Name\n")
    code, out, _ = run(["diff"], repo)
    assert code == 1 and "error" in out
    code, _, err = run(["diff", "--base", "no-such-ref"], repo)
    assert code == 1 and "diff-git" in err and "no-such-ref" in err


def test_check_applies_the_absolute_guardrails(tmp_path):
    repo = _many_specs(tmp_path, 1)
    (repo / ".megatron-compile").mkdir()
    (repo / ".megatron-compile/guardrails.yaml").write_text("memory_fraction: {fail: 0.0001}\n")
    code, out, err = run(["--check", "--no-cache", "specs/job-000.yaml"], repo)
    assert code == 1
    assert "guardrail-memory" in out + err and ".megatron-compile/guardrails.yaml:1" in out + err
    (repo / ".megatron-compile/guardrails.yaml").write_text("memory_fraction: {fial: 0.5}\n")
    code, out, err = run(["--check", "--no-cache", "specs/job-000.yaml"], repo)
    assert code == 1 and ".megatron-compile/guardrails.yaml:1:" in out + err and "guardrails-file" in out + err


def test_a_price_table_in_the_repository_replaces_the_committed_rate(tmp_path):
    repo = _many_specs(tmp_path, 1)
    (repo / ".megatron-compile").mkdir()
    (repo / ".megatron-compile/prices.yaml").write_text(
        "prices:\n  - {gpu: h200, engine: aistudio, per_gpu_hour: 2.0, currency: EUR, date: 2026-12-01, "
        "source: our contract}\n")
    code, out, err = run(["--explain", "--format", "json", "--no-cache", "specs/job-000.yaml"], repo)
    cost = json.loads(out)["specs"][0]["cost"]
    hours = json.loads(out)["specs"][0]["timing"]["gpu_hours"]
    assert cost["currency"] == "EUR" and cost["amount"] == hours * 2.0
    assert cost["where"] == ".megatron-compile/prices.yaml:2"
