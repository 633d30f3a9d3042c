"""A non-editable install into a fresh venv compiles specs from any directory."""

import subprocess
import venv

from helpers import REPO


def test_fresh_venv_install_compiles_from_another_directory(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(REPO)],
                   check=True, capture_output=True, timeout=600)
    out = tmp_path / "x"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run([str(env_dir / "bin" / "megatron-compile"), str(REPO / "specs" / "tp2.yaml"), "-o", str(out)],
                          cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (out / "tp2").iterdir())
    assert names == ["Dockerfile", "buildx.sh", "job.json", "launch.sh", "plan.md", "regctl.sh", "verify.sh"]
    # the installed copy renders the same bytes as the committed artifacts
    for name in ("launch.sh", "job.json", "Dockerfile"):
        assert (out / "tp2" / name).read_bytes() == (REPO / "generated" / "tp2" / name).read_bytes()
