"""`info opt` after an LR change, read on the job's own console (issue 45, the tenth
newcomer walk's item 3).

`lr 0.001` (unpinned) then `info opt` said `scheduler StepLR: last_epoch 23, base [0.004],
last [0.0025]`: the scheduler's base LR had changed with no word (an LR change scales
base_lrs alike, so that a scheduler computing from them, LambdaLR or cosine, goes on from
the LR set instead of putting the old one back), and `last` read as the LR in force where
it is what the scheduler last computed. The words now say both.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]

DEMO = ROOT / "demos" / "lr_explode.py"  # SGD at 0.6 under StepLR(step_size=2, gamma=0.9)


def test_info_opt_says_the_schedulers_base_changed_and_why():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "step==5", "--on-break", "pause",
                          sys.executable, str(DEMO)], input="info opt\nlr 0.3\ninfo opt\nlr 0.15\ninfo opt\nc\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert run.returncode == 0, run.stderr
    said = run.stderr.split("(stepdbg) ")[1:]
    last = "last computed [0.6] (at its last step; the LR in force is the group's lr)"
    assert f"SGD scheduler StepLR: last_epoch 0, base [0.6], {last}\n" in said[0], said[0]
    assert "base was" not in said[0], said[0]
    assert f"SGD scheduler StepLR: last_epoch 0, base [0.3], {last}\n" in said[2], said[2]
    assert ("SGD scheduler StepLR: base was [0.6]: the LR change 0.6 -> 0.3 scaled it alike, so the schedule goes "
            "on from the LR set\n") in said[2], said[2]
    assert "base was [0.6]: 2 LR changes (the last 0.3 -> 0.15) scaled it alike" in said[4], said[4]


def test_one_lr_change_of_two_param_groups_says_each_groups_change_once(tmp_path):
    """Two param groups (0.1 and 0.01) under StepLR: `lr 0.05` scales both bases in one change.
    `info opt` said '2 LR changes (the last 0.01 -> 0.05)': one count per group, and the last
    group's words for both."""
    script = tmp_path / "two_groups.py"
    script.write_text(
        "import torch\n"
        "a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)\n"
        "opt = torch.optim.SGD([{'params': a.parameters(), 'lr': 0.1}, {'params': b.parameters()}], lr=0.01)\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)\n"
        "for step in range(4):\n"
        "    opt.zero_grad()\n"
        "    b(a(torch.ones(4, 2))).sum().backward()\n"
        "    opt.step()\n"
        "    sched.step()\n")
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "step==2", "--on-break", "pause",
                          sys.executable, str(script)], input="lr 0.05\ninfo opt\nc\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert run.returncode == 0, run.stderr
    said = run.stderr.split("(stepdbg) ")[1:]
    assert ("scheduler StepLR: base was [0.1, 0.01]: the LR change 0.1 -> 0.05 in group 0 and 0.01 -> 0.05 in group 1 "
            "scaled it alike") in said[1], said[1]
