"""The replay's verdict: did the break's non-finite value come back from the same state?
reproduced true (persistent: model, data or state), false (transient: a flaky device, a
race), or null (the replay could not tell), and never an op blamed for what the replay
did not see."""

from __future__ import annotations

import torch
from torch import nn

from stepdbg.agent.replay.verdict import REPRODUCED, TRANSIENT


class Flaky(nn.Module):
    """The identity, except that one call puts a NaN in its output (a bit flip)."""

    def __init__(self, bad_call: int) -> None:
        super().__init__()
        self.calls, self.bad_call = 0, bad_call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.bad_call:
            x = x.clone()
            x[0, 0] = float("nan")
        return x


class Log(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


class FlakyGrad(torch.autograd.Function):
    """The identity forward; its first backward alone is NaN (a race in a kernel)."""

    calls = 0

    @staticmethod
    def forward(ctx, x):  # noqa: ANN001, ANN205
        return x.clone()

    @staticmethod
    def backward(ctx, g):  # noqa: ANN001, ANN205
        FlakyGrad.calls += 1
        return g * float("nan") if FlakyGrad.calls == 1 else g


class FlakyBackward(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return FlakyGrad.apply(x)


class FailsWhenReplayed(nn.Module):
    """NaN in the step; its second call (the replay's) runs out of memory."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return x * float("nan")


def step(model: nn.Module, x: torch.Tensor) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), torch.zeros(x.shape[0], 1)).backward()
    opt.step()


def test_a_nan_made_by_an_op_comes_back(session_factory):
    s = session_factory("nan", actions=("replay",))
    x = torch.rand(8, 4) + 0.1
    x[2, 1] = 0.0
    step(nn.Sequential(Log(), nn.Linear(4, 8), nn.Linear(8, 1)), x)
    (replay,) = s.views.replays
    assert replay["reproduced"] is True and replay["verdict"] == REPRODUCED, replay


def test_a_nan_the_forward_does_not_make_again_is_transient_and_nothing_is_blamed(session_factory):
    s = session_factory("nan", actions=("replay",))
    torch.manual_seed(0)
    step(nn.Sequential(nn.Linear(4, 8), Flaky(bad_call=1), nn.Linear(8, 1)), torch.randn(8, 4))
    (brk,) = s.breaks
    assert "born in the forward" in brk.reason
    (replay,) = s.views.replays
    assert replay["first_nonfinite"] is None and replay["reproduced"] is False, replay
    assert replay["verdict"] == TRANSIENT
    assert "overflowed" not in replay["summary"] and "mse_loss" not in replay["summary"]  # (it blamed the loss)


def test_a_nan_the_backward_does_not_make_again_is_transient(session_factory):
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True  # the gradient at the output is captured for the backward's replay
    FlakyGrad.calls = 0
    torch.manual_seed(0)
    step(nn.Sequential(nn.Linear(4, 8), FlakyBackward(), nn.Linear(8, 1)), torch.randn(8, 4))
    (brk,) = s.breaks
    assert brk.phase == "before_optimizer_step"
    (replay,) = s.views.replays
    assert replay["backward_replayed"] and replay["reproduced"] is False, replay


def test_a_replay_whose_own_forward_fails_blames_nothing(session_factory):
    s = session_factory("nan", actions=("replay",))
    step(nn.Sequential(nn.Linear(4, 1), FailsWhenReplayed()), torch.randn(8, 4))
    (replay,) = s.views.replays
    assert replay["first_nonfinite"] is None and replay["reproduced"] is None, replay
    assert replay["summary"].startswith("the replay's own forward failed (RuntimeError: CUDA out of memory")
    assert "nothing is blamed" in replay["summary"] and "nothing is blamed" in replay["verdict"]


def test_no_verdict_where_the_break_held_no_nonfinite_value(session_factory):
    s = session_factory("every=1", actions=("replay",))
    step(nn.Sequential(nn.Linear(4, 1)), torch.randn(8, 4))
    replay = s.views.replays[0]
    assert replay["reproduced"] is None and replay["verdict"] is None and replay["exact"] is True


class NaNGradOfOneSample(torch.autograd.Function):
    """The identity on `h`; its backward is NaN when `bad` (a bad sample whose forward and
    loss are finite): persistent, in the data."""

    @staticmethod
    def forward(ctx, h, bad):  # noqa: ANN001, ANN205
        ctx.bad = bool(bad)
        return h.clone()

    @staticmethod
    def backward(ctx, g):  # noqa: ANN001, ANN205
        return (g * float("nan") if ctx.bad else g), None


class BadGradOnSeven(nn.Module):
    """A Linear whose gradient is NaN for a batch holding a sample whose first value is 7."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return NaNGradOfOneSample.apply(self.fc(x), (x[:, 0] == 7.0).any())


def _accumulate(s, model: nn.Module, opt: torch.optim.Optimizer, arm_from: int = 0) -> None:
    """One step of 4 micro-batches; micro-batch 2 holds the sample whose gradient is NaN;
    replay armed from micro-batch `arm_from` + 1 on (a front end attaching mid-step)."""
    opt.zero_grad()
    for micro in range(4):
        s.model.armed = micro >= arm_from
        x = torch.randn(8, 4)
        if micro == 1:
            x[3, 0] = 7.0
        (nn.functional.mse_loss(model(x), torch.zeros(8, 1)) / 4).backward()
    opt.step()


def test_a_nan_only_in_an_earlier_micro_batchs_backward_is_replayed_in_that_micro_batch(session_factory):
    """Gradient accumulation, 4 micro-batches; micro-batch 2's backward alone makes the NaN.
    The replay ran the last micro-batch, which stays finite, and said 'a transient fault,
    skip the step' of a fault that comes back (then 'could not tell'). Armed, the gradients
    are read after each backward: the break names micro-batch 2 and the replay runs it."""
    s = session_factory("nan", actions=("replay",))
    model = nn.Sequential(BadGradOnSeven(), nn.Linear(8, 1))
    _accumulate(s, model, torch.optim.SGD(model.parameters(), lr=0.01))
    (brk,) = s.breaks
    (replay,) = s.views.replays
    assert brk.details["forward"] == "2 of 4" and "micro-batch 2 of 4" in brk.reason, brk
    assert (replay["first_nonfinite"]["where"], replay["first_nonfinite"]["op"]) == \
        ("backward", "NaNGradOfOneSample"), replay  # (a custom Function: named by its class, as .apply calls it)
    assert replay["reproduced"] is True and replay["micro_batches"] == 4, replay


def test_a_nan_in_a_micro_batchs_backward_not_watched_is_not_called_transient(session_factory):
    """Armed only from micro-batch 3 on, the gradients were not read after micro-batch 2's
    backward: which one made them is not known, the replay runs the last, which stays
    finite, and the verdict says it cannot tell (not 'transient': it may come back)."""
    s = session_factory("nan", actions=("replay",))
    model = nn.Sequential(BadGradOnSeven(), nn.Linear(8, 1))
    _accumulate(s, model, torch.optim.SGD(model.parameters(), lr=0.01), arm_from=2)
    (brk,) = s.breaks
    (replay,) = s.views.replays
    assert "forward" not in brk.details and "micro-batch" not in brk.reason, brk
    assert replay["reproduced"] is None and replay["micro_batches"] == 4, replay
    assert replay["verdict"].startswith("could not tell: the step ran 4 micro-batches"), replay


def test_a_nan_norm_from_clip_grad_norm_is_not_called_its_overflow():
    """clip_grad_norm_ of finite gradients whose squares overflow returns +inf, and to an
    infinite max_norm makes them NaN: not a transient fault. A NaN norm means a gradient was
    NaN already: that verdict must not be given (the re-attack's one-off NaN was called a
    divergence)."""
    import math
    from types import SimpleNamespace

    from stepdbg.agent.replay.verdict import CLIP_OVERFLOWED, TRANSIENT, _replayed_finite

    brk = SimpleNamespace(phase="before_optimizer_step", details={}, condition="nan", conditions=["nan"])
    base = {"backward_replayed": True, "replayed_output_finite": True, "micro_batches": 1}
    assert _replayed_finite({**base, "clip_norm": math.inf}, brk, True)[1] == CLIP_OVERFLOWED.format(norm=math.inf)
    assert _replayed_finite({**base, "clip_norm": math.nan}, brk, True)[1] == TRANSIENT
    assert _replayed_finite({**base, "clip_norm": 3.0}, brk, True)[1] == TRANSIENT
