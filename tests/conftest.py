import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite generated/ and tests/golden/ from the specs instead of comparing")


@pytest.fixture(scope="session", autouse=True)
def _own_cache_directory(tmp_path_factory):
    """The tests' own $XDG_CACHE_HOME (the validator's schema, kept results): never the user's."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")


@pytest.fixture
def in_repo(monkeypatch):
    """Run with the repository as the working directory (spec paths print as specs/x.yaml)."""
    monkeypatch.chdir(REPO)
    return REPO


# Under CI=true a skipped test is a failure: CI must have installed everything a test needs.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and call.when in ("setup", "call"):
        if not item.get_closest_marker("allow_ci_skip"):
            report.outcome = "failed"
            report.longrepr = f"skipped under CI=true, which must run every test: {report.longrepr}"


def pytest_configure(config):
    config.addinivalue_line("markers", "allow_ci_skip: a skip that CI may take (optional external checkouts)")

from slurm_cluster import slurm_cluster  # noqa: E402,F401  (a session fixture: one Slurm cluster for every test)
