"""The GitHub Action's script (tools/pr_comment.py) against a fake REST API on loopback, with a fake
pull_request event: it posts one comment, finds it again by the marker on a later page, updates it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from test_diff import build_repo, git

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "pr_comment.py"
MARKER = "<!-- megatron-compile-diff -->"


class FakeGitHub:
    """Issue comments of one pull request, served as GitHub's REST API serves them (100 a page)."""

    def __init__(self, comments: list[dict]) -> None:
        self.comments = comments
        self.requests: list[tuple[str, str, dict, str]] = []  # method, path, headers, body
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _reply(self, status: int, payload) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self) -> str:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                fake.requests.append((self.command, self.path, dict(self.headers), body))
                return body

            def do_GET(self):
                self._record()
                path, _, query = self.path.partition("?")
                params = dict(p.split("=") for p in query.split("&") if p)
                if path != "/repos/acme/models/issues/7/comments":
                    return self._reply(404, {"message": "Not Found"})
                page, per = int(params.get("page", 1)), int(params.get("per_page", 30))
                self._reply(200, fake.comments[(page - 1) * per: page * per])

            def do_POST(self):
                body = json.loads(self._record())
                fake.comments.append({"id": 1000 + len(fake.comments), "body": body["body"]})
                self._reply(201, fake.comments[-1])

            def do_PATCH(self):
                body = json.loads(self._record())
                wanted = int(self.path.rsplit("/", 1)[1])
                for comment in fake.comments:
                    if comment["id"] == wanted:
                        comment["body"] = body["body"]
                        return self._reply(200, comment)
                self._reply(404, {"message": "Not Found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.timeout = 5
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "FakeGitHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def pull_request(tmp_path):
    """A repository with a TP change on branch `change`, and the pull_request event of it."""
    case = yaml.safe_load((REPO / "tests/diff_cases/tensor-changes-data-parallel.yaml").read_text())
    repo = build_repo(tmp_path, case)
    base_sha = git(repo, "rev-parse", "main").strip()
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "number": 7,
                                 "pull_request": {"number": 7, "base": {"sha": base_sha, "ref": "main"}}}))
    return repo, event


def run_script(repo: Path, event: Path, api: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "acme/models",
           "GITHUB_TOKEN": "test-token", "GITHUB_API_URL": api, "GITHUB_OUTPUT": str(tmp_path / "output"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(SCRIPT), "--base", "", "specs"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_action_posts_one_comment_then_updates_it(pull_request, tmp_path):
    repo, event = pull_request
    others = [{"id": i, "body": f"review comment {i}"} for i in range(1, 151)]  # the marker is past page 1
    with FakeGitHub(others) as github:
        first = run_script(repo, event, github.url, tmp_path)
        assert first.returncode == 0, first.stderr
        assert "posted a comment on #7" in first.stdout
        posted = [c for c in github.comments if MARKER in c["body"]]
        assert len(posted) == 1 and "data parallel" in posted[0]["body"]
        assert (tmp_path / "output").read_text() == "exit-code=2\n"
        posts = [r for r in github.requests if r[0] == "POST"]
        assert posts[0][1] == "/repos/acme/models/issues/7/comments"
        assert posts[0][2]["Authorization"] == "Bearer test-token"
        # a second push: the same comment, updated, none added
        (repo / "specs/jobs/gpt-7b.yaml").write_text(
            (repo / "specs/jobs/gpt-7b.yaml").read_text().replace("tensor: 8", "tensor: 2"))
        second = run_script(repo, event, github.url, tmp_path)
        assert second.returncode == 0, second.stderr
        assert f"updated comment {posted[0]['id']}" in second.stdout
        assert len([c for c in github.comments if MARKER in c["body"]]) == 1
        assert "| 4 | 2 (-50.0 %) |" in posted[0]["body"]  # tensor 4 -> 2 now
        gets = [r[1] for r in github.requests if r[0] == "GET"]
        assert any("page=2" in g for g in gets)
        assert len(github.comments) == 151


def test_the_action_fails_when_the_api_cannot_be_reached(pull_request, tmp_path):
    repo, event = pull_request
    with FakeGitHub([]) as github:
        url = github.url
    done = run_script(repo, event, url, tmp_path)  # the server is gone: connection refused
    assert done.returncode == 1 and "could not be posted" in done.stderr


def test_action_yml_runs_the_script():
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    steps = " ".join(step["run"] for step in action["runs"]["steps"])
    assert "tools/pr_comment.py" in steps
    for step in action["runs"]["steps"]:
        subprocess.run(["bash", "-n"], input=step["run"], text=True, check=True)
        done = subprocess.run(["shellcheck", "-s", "bash", "-"], input=step["run"], text=True, capture_output=True)
        assert done.returncode == 0, done.stdout
