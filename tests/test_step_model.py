"""The step model on the loop styles people write, with real torch on CPU.

The step index is 0-based: the step being executed is the number of optimizer steps
completed before it. Each test runs a real loop under a session and compares what the
session measured with what the loop itself computed.
"""

from __future__ import annotations

import math
import sys
import time

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))


def test_a_dataloader_optimizer_zero_grad(session_factory):
    s = session_factory("nan", "grad_norm>1e9")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(TensorDataset(torch.randn(40, 4), torch.randn(40, 1)), batch_size=8)
    losses, norms = [], []
    for x, y in loader:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        norms.append(float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])))
        losses.append(loss.item())
        opt.step()
    assert s.step == 5
    assert [h["step"] for h in s.model.history] == [0, 1, 2, 3, 4]
    assert [h["loss"] for h in s.model.history] == pytest.approx(losses)
    assert [h["grad_norm"] for h in s.model.history] == pytest.approx(norms, rel=1e-5)
    assert all(h["data_wait"] is not None and h["data_wait"] >= 0 for h in s.model.history)
    assert s.breaks == []


def test_b_get_batch_accumulation_hand_set_lr_and_clipping(session_factory):
    s = session_factory("nan", "grad_norm>1e9")
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    accum, clip_norms, lrs = 4, [], []

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.02)  # the host time the data wait must see
        return torch.randn(8, 4), torch.randn(8, 1)

    x, y = get_batch()
    for it in range(6):
        lr = 1e-3 * (it + 1) / 6  # nanoGPT: set by hand every iteration
        for g in opt.param_groups:
            g["lr"] = lr
        lrs.append(lr)
        for _ in range(accum):
            loss = nn.functional.mse_loss(model(x), y) / accum
            x, y = get_batch()  # prefetch the next micro-batch, as nanoGPT does
            loss.backward()
        clip_norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)))
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert s.step == 6  # one step per optimizer step, not per micro-batch
    assert [h["grad_norm"] for h in s.model.history] == pytest.approx(clip_norms)  # the pre-clip norm
    assert [h["lr"][0] for h in s.model.history] == pytest.approx(lrs)
    waits = [h["data_wait"] for h in list(s.model.history)[1:]]
    # Prefetched between forward and backward (four 20 ms fetches a step): that host time is
    # data wait, charged to the step whose batches they are (a lower bound: it cannot be less).
    assert all(w is not None and w >= accum * 0.02 for w in waits), waits


@pytest.mark.parametrize("device", ["cpu", "as-on-a-gpu"])
def test_c_grad_scaler_inf_in_scaled_grads_is_not_a_nan(session_factory, device):
    s = session_factory("nan", "activations")
    s.model.defer_reads = device != "cpu"  # on a GPU the loss waits for the read before the update
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127, growth_interval=1000)
    for _ in range(12):
        x, y = torch.randn(8, 4), 10 * torch.randn(8, 1)  # loss * 2**127 overflows
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
    assert s.breaks == []  # the scaler handled the infs: nothing to report
    assert s.step == 12  # a step the scaler skipped is still a step of the loop
    skipped = [h["skipped_by_scaler"] for h in s.model.history]
    assert skipped[0] is True and skipped[-1] is False
    assert all(math.isfinite(h["loss"]) and h["loss"] < 1e4 for h in s.model.history)  # unscaled loss


@pytest.mark.parametrize("device", ["cpu", "as-on-a-gpu"])
def test_c_a_real_nan_under_grad_scaler_is_still_reported(session_factory, device):
    """A NaN from the data makes the scaled gradients NaN too, and the scaler skips the
    update. On the CPU the loss is read before backward, where it breaks; on a GPU it waited
    for the read before the update, which the skip took away: it is read after the
    scaler's step and breaks there (it went unreported before)."""
    s = session_factory("nan")
    s.model.defer_reads = device != "cpu"
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        if step == 1:
            x[0, 0] = float("nan")
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    (brk,) = s.breaks
    assert brk.step == 1 and brk.phase == ("before_backward" if device == "cpu" else "before_optimizer_step")
    assert brk.scalars["loss"] != brk.scalars["loss"] and "loss is nan" in brk.reason  # nan
    assert [h["skipped_by_scaler"] for h in s.model.history] == [False, True, False]


def test_c_a_break_before_the_update_shows_the_loss_kept_on_the_device(session_factory):
    """As on a GPU with reports only: the loss waits on the device for the read before the
    update. A break before then (a breakpoint() after the backward) reads it, so the break
    shows the loss (it showed None), and the step's record and checks still have it."""
    s = session_factory("nan")
    s.model.defer_reads = True
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for step in range(3):
        loss = nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        if step == 1:
            s.breaker.breakpoint(sys._getframe())
        opt.step()
    (brk,) = s.breaks
    assert brk.step == 1 and brk.scalars["loss"] == pytest.approx(losses[1])
    assert [h["loss"] for h in s.model.history] == pytest.approx(losses)


def test_d_manual_sgd_counts_one_step_per_backward(session_factory):
    s = session_factory("nan", "grad_norm>1e9")
    model = mlp()
    for _ in range(7):
        loss = nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
                p.grad = None
    assert s.step == 7
    assert all(h["grad_norm"] > 0 for h in s.model.history)


def test_e_lr_scheduler_is_seen_and_a_pinned_lr_scales_its_base(session_factory):
    s = session_factory("nan")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step() -> None:
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
        opt.step()
        sched.step()

    for _ in range(3):
        step()
    assert [h["lr"][0] for h in s.model.history] == pytest.approx([0.1, 0.05, 0.025])
    s.changer.set_lr(0.001, pin=True)
    assert sched.base_lrs[0] == pytest.approx(0.1 * 0.001 / 0.0125)
    for _ in range(2):
        step()
    assert [h["lr"][0] for h in s.model.history][-2:] == pytest.approx([0.001, 0.001])
    assert s.views.optimizer_info()[0]["schedulers"][0]["type"] == "StepLR"
    assert [c["what"] for c in s.bus.changes] == ["lr"]


def test_closure_optimizer_counts_one_step_per_step_call(session_factory):
    s = session_factory("nan")
    model = mlp()
    opt = torch.optim.LBFGS(model.parameters(), max_iter=5)
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    assert s.step == 3
    assert s.breaks == []


def test_eval_forward_under_no_grad_is_not_a_step(session_factory):
    s = session_factory("nan")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        with torch.no_grad():
            model(torch.randn(8, 4))
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
        opt.step()
    assert s.step == 2 and len(s.model.history) == 2


def test_step_and_every_conditions_break_at_the_right_steps(session_factory):
    s = session_factory("step==3", "every=4", "expr:step == 5 and loss > 0")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(9):
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
        opt.step()
    assert [(b.step, b.condition, b.phase) for b in s.breaks] == [
        (0, "every=4", "before_forward"),
        (3, "step==3", "before_forward"),
        (4, "every=4", "before_forward"),
        (5, "expr:step == 5 and loss > 0", "before_backward"),
        (8, "every=4", "before_forward"),
    ]


def test_loss_spike_against_the_running_median(session_factory):
    s = session_factory("loss_spike>5")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    for i in range(12):
        y = torch.full((8, 1), 30.0) if i == 9 else torch.zeros(8, 1)
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.zeros(8, 4)), y).backward()
        opt.step()
    assert [(b.step, b.condition) for b in s.breaks] == [(9, "loss_spike>5")]


def test_mem_condition_uses_host_rss_without_cuda(session_factory):
    s = session_factory("mem>1KB")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    opt.step()
    assert s.breaks[0].reason.startswith("memory ") and s.model.history[0]["mem"] > 1000


def test_every_condition_that_holds_is_named_in_one_break(session_factory):
    s = session_factory("every=1", "step==3")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(5):
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
        opt.step()
    assert [b.step for b in s.breaks] == [0, 1, 2, 3, 4]  # every=1 fires at step 0 too
    (at3,) = [b for b in s.breaks if b.step == 3]
    assert at3.conditions == ["every=1", "step==3"] and "reached step 3" in at3.reason


def test_the_watch_keeps_no_model_output_alive_through_the_backward(session_factory):
    """A GPT's logits are the largest tensor of a step: as in a plain run, the model's
    output is freed when the backward has used it, not held by stepdbg through the update
    (on a GPU that was the step's peak). Before the backward it is kept for the pause."""
    import weakref

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    s = session_factory("nan", "activations")
    seen = []
    for _ in range(3):
        out = model(torch.randn(2, 8))
        kept_before = s.model.output() is out
        alive = weakref.ref(out)
        loss = out.pow(2).mean()
        del out
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.append((kept_before, alive() is None))
    assert seen[1:] == [(True, True)] * 2, seen
