"""A NaN born in one micro-batch's backward alone, under gradient accumulation (issue 44
item 2): the loss stays finite and the gradients go NaN in micro-batch 2 of 4, read once
before the update, when the capture held micro-batch 4. The replay ran micro-batch 4, which
stays finite, and said 'could not tell' of a fault that comes back. Armed, the gradients are
checked after each micro-batch's backward and the first bad one's capture is replayed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import WAIT, host_reads_counted, marked_line, run_stepdbg
from torch import nn

from stepdbg.agent.replay.verdict import REPRODUCED

SCRIPT = Path(__file__).parent / "fixtures" / "accum_backward_nan.py"


@pytest.mark.parametrize("bad", [2, 4])
def test_a_nan_born_in_one_micro_batchs_backward_is_named_there_and_reproduced(tmp_path, bad):
    """`stepdbg --on-break replay python accum_backward_nan.py BAD`: the break says which
    micro-batch's backward made the gradients non-finite, and the replay of that micro-batch
    names sqrt's backward at its line, reproduced (2: it said 'could not tell'; 4, the last:
    it was right, and stays so)."""
    run = run_stepdbg(tmp_path, "--no-tui", "--on-break", "replay", script_args=(str(SCRIPT), str(bad)))
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    (brk,) = run.of("break")
    (replay,) = run.of("replay")
    assert (brk["step"], brk["phase"]) == (3, "before_optimizer_step"), brk
    assert brk["details"]["forward"] == f"{bad} of 4" and f"micro-batch {bad} of 4" in brk["reason"], brk
    first = replay["first_nonfinite"]
    assert (first["where"], first["op"], first["line"]) == ("backward", "sqrt", marked_line(SCRIPT, "nan-op")), first
    assert (replay["reproduced"], replay["verdict"], replay["micro_batches"]) == (True, REPRODUCED, 4), replay
    assert f"micro-batch {bad} of 4" in run.stderr and f"\n  {REPRODUCED}" in run.stderr, run.stderr[-2000:]
    # The job's own numbers are its own: the losses it printed are those of a plain run.
    import subprocess
    import sys

    plain = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True, text=True, timeout=WAIT)
    assert run.stdout == plain.stdout, (run.stdout, plain.stdout)


def _accumulating_loop(micro: int) -> tuple[nn.Module, object]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    def step() -> None:
        for _ in range(micro):
            (model(torch.randn(4, 8)).pow(2).mean() / micro).backward()
        opt.step()
        opt.zero_grad()

    return model, step


@pytest.mark.parametrize("micro", [1, 4])
def test_the_check_after_each_backward_is_paid_only_when_armed(session_factory, monkeypatch, micro):
    """Host reads a step (on a GPU, syncs): not armed, what the watch paid before (on the
    CPU each loss, read before its backward, and the gradient norm); armed, N - 1 more a step
    of N micro-batches once the loop's shape is known (the last backward's is the update's own
    read), none for a step of one."""
    reads = host_reads_counted(monkeypatch)
    _, step = _accumulating_loop(micro)

    def counted() -> int:
        reads.clear()
        step()
        return len(reads)

    plain = counted()
    s = session_factory("nan", "grad_norm>1e9")
    counted()  # (the first step under stepdbg finds the roots)
    watched = [counted() for _ in range(3)]
    s.model.armed = True
    counted()  # (the first armed step learns how many backwards a step has)
    armed = [counted() for _ in range(3)]
    extra = watched[0] - plain
    assert watched == [plain + extra] * 3, (plain, watched)  # (on the CPU: each loss, and the gradient norm)
    assert armed == [plain + extra + micro - 1] * 3, (plain, watched, armed)


class Normed(nn.Module):
    """sqrt of each row's squared norm: finite forward at a zero row, NaN backward there."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return h / (torch.sqrt((h * h).sum(-1, keepdim=True)) + 1e-3)


def test_a_loop_whose_steps_change_shape_still_names_the_micro_batch(session_factory):
    """Steps of one backward and of two, alternating (a GAN's netG and netD steps share this
    shape): a step of two after a step of one reads its first backward before the second
    runs (it was thought the last), so a NaN made there is named as micro-batch 1 of 2."""
    s = session_factory("nan", actions=("replay",))
    model = Normed()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(6):
        for micro in range(1 if step % 2 == 0 else 2):
            x = torch.randn(8, 4)
            if step == 5 and micro == 0:
                x[0] = 0.0
            model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    (brk,) = s.breaks
    (replay,) = s.views.replays
    assert brk.step == 5 and brk.details["forward"] == "1 of 2", brk
    assert (replay["first_nonfinite"]["op"], replay["reproduced"]) == ("sqrt", True), replay
