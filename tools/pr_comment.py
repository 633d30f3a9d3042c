#!/usr/bin/env python3
"""The GitHub Action's step (action.yml): run `megatron-compile diff` on a pull request and post its
markdown as one comment, or update the comment an earlier run posted.

    python tools/pr_comment.py [--base SHA] [SPEC...]

Reads what Actions gives a step: GITHUB_EVENT_PATH (the pull_request event: its number and base
commit), GITHUB_REPOSITORY, GITHUB_TOKEN, GITHUB_API_URL (https://api.github.com on github.com, the
server's own on GitHub Enterprise; tests point it at a server on loopback). The comment is found by
the hidden marker the markdown starts with, through the REST API's issue comments, page by page.
Exit status: 1 when the diff failed (an error or a failing guardrail), else 0 (changes are not a
failure here); the diff's own exit code is written to GITHUB_OUTPUT as `exit-code`.
Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

MARKER = "<!-- megatron-compile-diff -->"  # compiler/commands/diff_format.py MARKER
TIMEOUT_S = 30
PER_PAGE = 100
MAX_PAGES = 50  # 5,000 comments: a bound, not a limit any pull request reaches


def api(method: str, url: str, token: str, body: dict | None = None) -> tuple[object, dict]:
    """One REST call: (the decoded JSON, the response headers)."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Accept": "application/vnd.github+json", "Authorization": f"Bearer {token}",
        "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json",
        "User-Agent": "megatron-compile-diff"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        text = response.read().decode("utf-8")
        return (json.loads(text) if text else None), dict(response.headers)


def find_comment(base: str, repo: str, number: int, token: str) -> int | None:
    """The id of the first comment on the pull request that holds the marker."""
    for page in range(1, MAX_PAGES + 1):
        comments, _ = api("GET", f"{base}/repos/{repo}/issues/{number}/comments?per_page={PER_PAGE}&page={page}", token)
        if not isinstance(comments, list):
            return None
        for comment in comments:
            if MARKER in (comment.get("body") or ""):
                return int(comment["id"])
        if len(comments) < PER_PAGE:
            return None
    return None


def post_or_update(body: str, base: str, repo: str, number: int, token: str) -> str:
    """Update the marked comment, or post one; what was done."""
    found = find_comment(base, repo, number, token)
    if found is None:
        api("POST", f"{base}/repos/{repo}/issues/{number}/comments", token, {"body": body})
        return "posted a comment"
    api("PATCH", f"{base}/repos/{repo}/issues/comments/{found}", token, {"body": body})
    return f"updated comment {found}"


def run_diff(base_sha: str | None, specs: list[str]) -> tuple[int, str, str]:
    """megatron-compile diff --format markdown, with the Python this script runs under."""
    argv = [sys.executable, "-m", "compiler", "diff", "--format", "markdown"]
    argv += ["--base", base_sha] if base_sha else []
    done = subprocess.run(argv + specs, capture_output=True, text=True, timeout=1800)
    return done.returncode, done.stdout, done.stderr


def main(argv: list[str]) -> int:
    base_sha = None
    if argv[:1] == ["--base"] and len(argv) > 1:
        base_sha, argv = argv[1] or None, argv[2:]
    event = {}
    if os.environ.get("GITHUB_EVENT_PATH"):
        with open(os.environ["GITHUB_EVENT_PATH"], encoding="utf-8") as handle:
            event = json.load(handle)
    pull = event.get("pull_request") or {}
    base_sha = base_sha or (pull.get("base") or {}).get("sha")
    code, body, err = run_diff(base_sha, argv)
    sys.stderr.write(err)
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as handle:
            handle.write(f"exit-code={code}\n")
    if os.environ.get("GITHUB_STEP_SUMMARY") and body:
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as handle:
            handle.write(body)
    if not body.startswith(MARKER):
        sys.stderr.write("pr_comment: the diff printed no report; nothing posted\n")
        return 1
    number, repo, token = pull.get("number"), os.environ.get("GITHUB_REPOSITORY"), os.environ.get("GITHUB_TOKEN")
    if not number or not repo or not token:
        print("pr_comment: not a pull request event (or no GITHUB_TOKEN): the report is in the step summary only")
    else:
        base = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
        try:
            print(f"pr_comment: {post_or_update(body, base, repo, int(number), token)} on #{number}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            sys.stderr.write(f"pr_comment: the comment could not be posted through {base}: {exc}\n")
            return 1
    return 1 if code == 1 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
