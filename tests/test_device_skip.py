"""--skip-on-device (agent/step/device_skip.py), run on the CPU as on a GPU (defer_reads):
torch's fused optimizers take found_inf on the CPU too, so the skip itself is real here;
the sync count is checked on a GPU in test_cuda_step."""

from __future__ import annotations

import copy
import math

import torch
from conftest import host_reads_counted
from torch import nn

from stepdbg.agent.step.device_skip import Deferred


def make(fused: bool) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2, fused=fused)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def batches(n: int, nan_at: int | None = None) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(4, 8, generator=g) for _ in range(n)]
    if nan_at is not None:
        xs[nan_at][0, 0] = float("nan")
    return xs


def test_a_nan_step_is_skipped_on_the_device_and_told_one_step_late(session_factory, monkeypatch):
    """Fused AdamW: the NaN step's update never happens (parameters, moments and step count
    as before it), no value of the step is read in the step itself, and the break comes
    before the next update, naming the step; its replay runs the skipped step. The clean
    steps' numbers are those of a plain run."""
    model, opt = make(fused=True)
    plain_model, plain_opt = copy.deepcopy(model), None
    plain_opt = torch.optim.AdamW(plain_model.parameters(), lr=1e-2, fused=True)
    xs = batches(6, nan_at=4)
    for x in xs[:4]:
        train_step(plain_model, plain_opt, x)

    reads, verdicts = host_reads_counted(monkeypatch), []
    verdict = Deferred.verdict
    monkeypatch.setattr(Deferred, "verdict", lambda self, h: (verdicts.append(1), verdict(self, h))[1])
    s = session_factory("nan", "grad_norm>1e9", actions=("replay",), skip_on_device=True)
    s.model.defer_reads = True
    own = []
    for x in xs[:4]:
        reads.clear(), verdicts.clear()
        train_step(model, opt, x)
        own.append(len(reads) - len(verdicts))  # what the step read of its own values
    assert own[1:] == [0, 0, 0], own  # (the first step under stepdbg finds the roots)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), plain_model.parameters(), strict=True))

    before = {k: v.clone() for k, v in model.state_dict().items()}
    steps_before = opt.state[model[0].weight]["step"].item()
    train_step(model, opt, xs[4])  # the NaN step: skipped on the device, not told yet
    assert not s.breaks and not hasattr(opt, "found_inf")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert opt.state[model[0].weight]["step"].item() == steps_before

    train_step(model, opt, xs[5])
    (brk,) = s.breaks
    assert (brk.condition, brk.phase, brk.details["skipped_on_device"]) == ("nan", "before_optimizer_step", 4), brk
    assert brk.reason.startswith("step 4: loss is nan; the model output was already non-finite: it was born in "
                                 "the forward; its update was skipped on the device"), brk.reason
    record = s.model.history[4]
    assert math.isnan(record["loss"]) and record["skipped"], record
    assert s.views.replays[0]["step"] == 4 and s.model.capture["args"][0] is xs[4], s.views.replays[0]


def test_a_nan_in_the_last_step_is_told_when_the_job_ends(session_factory):
    model, opt = make(fused=True)
    s = session_factory("nan", skip_on_device=True)
    s.model.defer_reads = True
    for x in batches(3, nan_at=2):
        train_step(model, opt, x)
    assert not s.breaks
    s.stop()
    (brk,) = s.breaks
    assert brk.reason.startswith("step 2: loss is nan"), brk.reason


def test_an_optimizer_without_found_inf_keeps_the_step_s_one_read(session_factory):
    """foreach AdamW has no found_inf: the mode leaves it to the usual read, and the NaN
    breaks in its own step, before its update."""
    model, opt = make(fused=False)
    s = session_factory("nan", skip_on_device=True)
    s.model.defer_reads = True
    for x in batches(4, nan_at=3):
        train_step(model, opt, x)
    (brk,) = s.breaks
    assert (brk.step, brk.phase) == (3, "before_optimizer_step") and "skipped_on_device" not in brk.details, brk


def test_a_gradient_norm_over_the_limit_is_decided_on_the_device_too(session_factory):
    model, opt = make(fused=True)
    s = session_factory("nan", "grad_norm>50", skip_on_device=True)
    s.model.defer_reads = True
    xs = batches(4)
    xs[2] = xs[2] * 1e4  # a finite step with a huge gradient
    before = None
    for i, x in enumerate(xs):
        if i == 2:
            before = [p.detach().clone() for p in model.parameters()]
        train_step(model, opt, x)
        if i == 2:
            assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    (brk,) = s.breaks
    assert brk.condition == "grad_norm>50" and brk.reason.startswith("step 2: gradient norm "), brk.reason
    assert "> 50; its update was skipped on the device" in brk.reason, brk.reason


def test_the_activation_watch_names_the_module_of_the_skipped_step(session_factory):
    """An overflow in the first Linear (finite inputs) at step 2: skipped on the device, and
    the break a step later names the module, found by running step 2's forward again."""
    model, opt = make(fused=True)
    with torch.no_grad():
        model[0].weight.fill_(0.5)
    s = session_factory("activations", skip_on_device=True)
    xs = batches(4)
    xs[2][1] = 3e38  # finite, but 8 * 0.5 * 3e38 is not
    for x in xs:
        train_step(model, opt, x)
    (brk,) = s.breaks
    assert (brk.details["skipped_on_device"], brk.details["module"]) == (2, "0"), brk
    assert brk.reason.startswith("step 2: module 0 (Linear) produced a non-finite output from finite inputs"), brk


def test_with_gradient_accumulation_the_break_names_the_micro_batch(session_factory):
    """Three micro-batches a step, a NaN in the first of step 2: skipped on the device, and
    the break names that micro-batch and captures its inputs (the replay runs it)."""
    model, opt = make(fused=True)
    s = session_factory("nan", skip_on_device=True)
    xs = batches(12, nan_at=6)  # step 2's first micro-batch
    for i in range(0, 12, 3):
        opt.zero_grad()
        for x in xs[i:i + 3]:
            (model(x).pow(2).mean() / 3).backward()
        opt.step()
    (brk,) = s.breaks
    assert (brk.details["skipped_on_device"], brk.details["forward"]) == (2, "1 of 3"), brk
    assert brk.reason.startswith("step 2, micro-batch 1 of 3: loss is nan"), brk.reason
    assert s.model.capture["args"][0] is xs[6]


def test_a_half_precision_norm_is_compared_with_its_limit_exactly():
    """A bf16 loss and a bf16 norm (clip_grad_norm_'s, of bf16 gradients) go to the device's
    decision in float32: stacked as bf16, `norm > 1003` compared 1004 with bf16(1003), which
    is 1004, and an update over its limit was not skipped (the attacker's finding on fe38ce5)."""
    from stepdbg.agent.step import host_reads
    from stepdbg.agent.step.step_state import StepState

    st = StepState(index=0, started=0.0)
    st.pending_losses = [torch.tensor(2.0, dtype=torch.bfloat16)]
    values = host_reads.on_device(st, torch.tensor(1004.0, dtype=torch.bfloat16))
    assert values is not None and values.dtype == torch.float32
    assert bool(values[-1] > 1003.0) and values.tolist() == [2.0, 1004.0]
