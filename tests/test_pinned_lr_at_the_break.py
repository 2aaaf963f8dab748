"""A pinned LR is the LR the whole step shows (issue 45's seventeenth walk, 5): SGD under a
StepLR, `lr 0.001` pinned while it ran, then a NaN at step 12: the break said `lr 0.0005`
(the scheduler's, set after the last update), the Plots `at the break: 0.0005` and the Optim
panel `SGD[0]  0.0005  0.001`, while the update used 0.001: a newcomer who pinned 0.001 thought
the pin had failed. The pin was put back before each update only; it is now put back as the
step begins too, so what every view reads in the step is the LR the update uses."""

from __future__ import annotations

import pytest
from conftest import WAIT

from stepdbg import client

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
for step in range(16):
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    if step == 12:
        loss = loss * float("nan")
    loss.backward()
    opt.step()
    sched.step()
print("lr", opt.param_groups[0]["lr"], flush=True)
"""


def test_the_break_after_a_pin_shows_the_pinned_lr_the_update_uses(start_job, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    job = start_job("--break", "step==3", "--break", "nan", script=script)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        c.set_lr(0.001, pin=True)
        c.remove_break("step==3")
        c.cont()
        brk = c.wait_paused(WAIT)
        assert brk["step"] == 12 and brk["phase"] == "before_backward", brk
        assert brk["scalars"]["lr"] == [0.001], brk["scalars"]
        groups = c.optimizer_info()[0]["groups"]
        assert (groups[0]["lr"], groups[0]["pinned_lr"]) == (0.001, 0.001), groups
        c.end()
