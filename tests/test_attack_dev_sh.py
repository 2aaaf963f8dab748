"""scripts/dev.sh, attacked (issue 43): a TORCH_INDEX that is not a URL, a venv whose Python
does not run, a path with spaces, a second run. dev.sh runs here in a copy of the repository
whose .venv/bin/python is a stand-in that writes down what it is asked and installs nothing;
what a person reads is dev.sh's stderr and exit code."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import ROOT

STAND_IN = """\
#!/bin/sh
echo "$*" >> "$DEV_LOG"
case "$*" in
  "-c import torch") [ -e "$DEV_TORCH" ] ;;
  "-m pip install --quiet torch==2.13.0"*) touch "$DEV_TORCH" ;;
esac
"""


def repo_copy(where: Path, python: str | None = STAND_IN) -> Path:
    """scripts/dev.sh in a repository of its own at `where`, its .venv's python a stand-in."""
    (where / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "dev.sh", where / "scripts" / "dev.sh")
    (where / ".venv" / "bin").mkdir(parents=True)
    if python is not None:
        (where / ".venv" / "bin" / "python").write_text(python)
        (where / ".venv" / "bin" / "python").chmod(0o755)
    return where


def dev_sh(repo: Path, **env: str) -> tuple[int, str, list[str]]:
    """`bash scripts/dev.sh` in `repo`, no argument (its usage ends it, exit 2, once set up):
    the exit code, stderr and the stand-in's calls. PYTHON is `true`: as `python -m venv` over a
    venv with dangling links (they are kept), it succeeds and makes nothing."""
    log = repo / "calls.log"
    log.touch()
    full = {k: v for k, v in os.environ.items() if k != "TORCH_INDEX"}
    full.update(PYTHON="true", DEV_LOG=str(log), DEV_TORCH=str(repo / "torch-installed"), **env)
    r = subprocess.run(["bash", str(repo / "scripts" / "dev.sh")], env=full, capture_output=True, text=True,
                       timeout=120, cwd="/")
    return r.returncode, r.stderr, log.read_text().splitlines()


def test_a_torch_index_that_is_not_a_url_is_said_not_installed_from_pypi(tmp_path):
    """pip ignored TORCH_INDEX=garbage with a warning and installed PyPI's torch 2.13.0: on Linux
    the CUDA build, GBs, the download dev.sh's CPU index was there to spare."""
    code, err, calls = dev_sh(repo_copy(tmp_path / "repo"), TORCH_INDEX="garbage")
    assert code == 1 and err.strip() == ("dev.sh: TORCH_INDEX='garbage' is not an index's URL "
                                         "(as https://download.pytorch.org/whl/cu128)"), err
    assert not any("install" in c for c in calls), calls


def test_a_venv_whose_python_does_not_run_is_said(tmp_path):
    """A venv made from a Python since upgraded or removed (its bin/python a dangling link):
    'python -m venv' keeps the dangling links, and dev.sh said forever that the venv had no
    pip ('apt-get install python3-venv'), though its Python was gone."""
    repo = repo_copy(tmp_path / "repo", python=None)
    (repo / ".venv" / "bin" / "python").symlink_to(tmp_path / "gone" / "python3.11")
    code, err, calls = dev_sh(repo)
    assert code == 1 and err.strip() == ("dev.sh: .venv/bin/python does not run (the Python it was made from "
                                         "moved or is gone?): rm -r .venv, then run this again"), err
    assert (repo / ".venv" / "bin" / "python").is_symlink()  # (the person's venv: said, never removed)


def test_a_path_with_spaces_twice_and_a_torch_index(tmp_path):
    """What held: a repository path with spaces, a second run (torch there: not installed
    again), a TORCH_INDEX URL given to pip as it is."""
    repo = repo_copy(tmp_path / "a dir with spaces" / "repo")
    index = "https://download.pytorch.org/whl/cu128"
    code, err, calls = dev_sh(repo, TORCH_INDEX=index)
    assert code == 2 and err.startswith("usage: bash scripts/dev.sh"), err
    assert f"-m pip install --quiet torch==2.13.0 --extra-index-url {index}" in calls, calls
    assert calls[-1] == "-m pip install --quiet -e .", calls
    code, err, again = dev_sh(repo, TORCH_INDEX=index)
    assert code == 2 and not any("torch==" in c for c in again[len(calls):]), again
