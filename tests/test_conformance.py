"""tools/megatron_conformance.py against a Megatron-LM checkout, when MEGATRON_LM points at one.

Megatron-LM is never installed or committed; CI runs this only where MEGATRON_LM is set.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

MEGATRON = os.environ.get("MEGATRON_LM")


@pytest.mark.allow_ci_skip
@pytest.mark.skipif(not MEGATRON, reason="MEGATRON_LM does not point at a Megatron-LM checkout")
def test_every_pretrain_spec_conforms():
    specs = [str(p) for p in sorted((REPO / "specs").glob("*.yaml")) if "pretrain_gpt.py" in p.read_text()]
    specs += [str(p) for p in sorted((REPO / "tests" / "conformance_specs").glob("*.yaml"))]
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "megatron_conformance.py"), MEGATRON, *specs],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": conforms") == len(specs)


def test_the_tool_refuses_a_directory_that_is_not_megatron(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "megatron_conformance.py"), str(tmp_path),
                           str(REPO / "specs" / "pretrain-mock.yaml")], capture_output=True, text=True)
    assert proc.returncode == 2 and "is not a Megatron-LM checkout" in proc.stderr
