"""The console (`stepdbg attach`, the fourth newcomer's walk's item 11, issue 45): its real
output, attached to a real served job; each failed before its fix."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

from stepdbg import client

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def console(start_job, lines: str, *breaks: str) -> str:
    """What `stepdbg attach` says (its stderr) to `lines`, at the job's pause at step 0."""
    info = start_job(*(breaks or ("--break", "step==0")), script_args=("--steps", "3")).info()
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", info.id], input=lines + "detach end\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_p_of_a_gradient_that_is_none_says_why_in_words(start_job):
    """`p x.grad` printed `x.grad: NoneType None`: it says why there is no gradient."""
    said = console(start_job, "p model[0].weight.grad\np x.grad\np model[1]\n")
    assert "model[0].weight.grad is None: no gradient yet" in said, said
    assert "x.grad is None: x does not require grad" in said, said
    assert "model[1] is a module (ReLU) with no parameters" in said, said
    assert "NoneType" not in said and ": None" not in said, said


def test_info_breaks_lists_the_breakpoints_as_the_tui_line_takes_it(start_job):
    """`info breaks` was unknown to the console ('info what? model, torchinfo, ...') though
    the TUI's line takes it: one vocabulary, it lists the job's breakpoints."""
    said = console(start_job, "info breaks\n", "--break", "step==0", "--break", "grad_norm>1e9")
    assert "info what?" not in said and "error" not in said, said
    assert "  step==0" in said and "  grad_norm>1e9" in said, said
