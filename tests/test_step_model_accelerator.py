"""The step model as it runs on an accelerator, on the CPU: STEPDBG_DEFER_READS-style
deferred reads (the loss and the grad norm in one host read a step), the activation watch,
micro-batches. Real torch; the reads are counted (conftest.host_reads_counted)."""

from __future__ import annotations

import math
import sys

import pytest
import torch
from conftest import host_reads_counted
from test_step_model import mlp
from torch import nn


@pytest.mark.parametrize(("actions", "skip_on_device", "read_early"), [
    (("report",), False, False), (("pause",), False, True), (("replay",), False, True), (("replay",), True, False)])
def test_c_on_a_gpu_the_loss_is_read_before_backward_when_someone_will_look(session_factory, actions, skip_on_device,
                                                                             read_early):
    """Reports alone keep one read a step; a break someone will look at (a pause, a replay,
    a front end) has the loss read before the backward frees its graph; --skip-on-device
    keeps its one late read (the step model asks only where the loss is on an accelerator)."""
    s = session_factory("nan", actions=actions, skip_on_device=skip_on_device)
    assert s.reads_loss_at_backward() is read_early
    if not skip_on_device:
        s.controls.attached()
        assert s.reads_loss_at_backward() is True


def test_on_an_accelerator_the_loss_and_the_grad_norm_come_back_in_one_read(session_factory, monkeypatch):
    """The default watch on a GPU, forced here on the CPU (defer_reads): the loss stays on
    the device until the gradient norm is measured and both are copied back together, one
    host read a step beyond the loop's own (two while a front end is attached). A NaN loss
    then breaks before the update, named as the loss, and says where it was born (the
    output's sum comes back in the same read); the recorded losses are the loop's own."""
    reads = host_reads_counted(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    losses: list[float] = []

    def step(x: torch.Tensor) -> int:
        reads.clear()
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        n = len(reads)
        losses.append(loss.item())
        return n

    plain = step(torch.randn(4, 8))
    s = session_factory("nan", "grad_norm>1e9", "data_wait>60")
    s.model.defer_reads = True
    watched = [step(torch.randn(4, 8)) for _ in range(4)]
    assert watched[1:] == [plain + 1] * 3, (plain, watched)  # the first step under stepdbg finds the roots
    s.controls.attached()  # someone will look at a break: the loss is read before backward frees its graph
    assert step(torch.randn(4, 8)) == plain + 2
    s.controls.detached()
    x = torch.randn(4, 8)
    x[0, 0] = float("nan")
    step(x)
    (brk,) = s.breaks
    assert (brk.step, brk.phase) == (5, "before_optimizer_step") and brk.reason.startswith("loss is nan"), brk
    # The output was released before the backward; its sum, read with the loss, still tells
    # (and the input, read at the break, says the data brought it).
    assert brk.details["model_output"] == "nonfinite" and "input is already non-finite" in brk.reason, brk
    recorded = [h["loss"] for h in s.model.history]
    assert recorded[:5] == losses[1:6] and math.isnan(recorded[5])


def test_on_an_accelerator_a_break_between_micro_batches_keeps_the_count_of_forwards(session_factory):
    """As on a GPU, reports only, three micro-batches: a breakpoint() after the first reads
    what waits on the device; the sums read later still count from the step's first
    forward, so the NaN made by the third micro-batch is named as the third."""
    s = session_factory("nan", "activations")
    s.model.defer_reads = True
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    for step in range(2):
        for k in range(3):
            x = torch.randn(2, 4)
            if step == 1 and k == 2:
                x[0, 0] = float("nan")
            model(x).sum().backward()
            if step == 1 and k == 0:
                s.breaker.breakpoint(sys._getframe())
        opt.step()
        opt.zero_grad()
    assert [(b.step, b.condition, b.details.get("forward")) for b in s.breaks] == [
        (1, "breakpoint()", None), (1, "activations", "3 of 3"), (1, "nan", "3 of 3")], s.breaks


def test_on_an_accelerator_the_activation_watch_reads_the_output_with_the_step_s_one_read(session_factory,
                                                                                          monkeypatch):
    """The activation watch on a GPU, forced here on the CPU (defer_reads): the output's sum
    stays on the device and comes back with the loss and the gradient norm, so the watch
    adds no read of its own. An inf made by a module is told before the update, where the
    module is named as after the forward on the CPU."""
    reads = host_reads_counted(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    def step() -> int:
        reads.clear()
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return len(reads)

    plain = step()
    s = session_factory("nan", "activations")
    s.model.defer_reads = True
    watched = [step() for _ in range(3)]
    assert watched[1:] == [plain + 1] * 2, (plain, watched)
    with torch.no_grad():
        model[2].weight[0, 0] = float("inf")
    step()
    watch = s.breaks[0]
    assert (watch.condition, watch.phase, watch.details["module"]) == ("activations", "forward", "2"), watch


def test_on_an_accelerator_the_activation_watch_names_the_micro_batch_that_made_the_inf(session_factory):
    """Gradient accumulation on a GPU (forced here on the CPU): three forwards a step, their
    outputs' sums read once before the update. The inf comes from the first micro-batch
    (finite inputs that overflow the first Linear); the module is found by running that
    micro-batch's forward again, not the last one's (which is finite)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    with torch.no_grad():
        model[0].weight.fill_(0.5)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    s = session_factory("activations")
    s.model.defer_reads = True

    def step(first: torch.Tensor) -> None:
        opt.zero_grad()
        for x in (first, torch.randn(4, 8), torch.randn(4, 8)):
            (model(x).pow(2).mean() / 3).backward()
        opt.step()

    for _ in range(2):
        step(torch.randn(4, 8))
    big = torch.randn(4, 8)
    big[1] = 3e38  # finite, but 8 * 0.5 * 3e38 is not
    step(big)
    (brk,) = s.breaks
    assert (brk.condition, brk.phase, brk.details["module"]) == ("activations", "forward", "0"), brk
    assert brk.details["forward"] == "1 of 3" and "micro-batch 1 of 3" in brk.reason, brk
    assert torch.equal(s.model.capture["args"][0], big)  # the replay and the views see that micro-batch
