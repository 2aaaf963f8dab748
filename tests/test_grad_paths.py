"""A NaN gradient the model's own backward does not make is not called transient where the
program's code made it (grad_paths.py): a penalty on the weights whose sqrt met 0, or a
division of the gradients by a count of 0. Both said "a transient fault ... run the step
on other hardware" before; both come back with every such step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from stepdbg.agent.replay.verdict import TRANSIENT
from tests.conftest import ROOT, WAIT, marked_line, run_stepdbg

FIXTURES = ROOT / "tests" / "fixtures"


def _replay(tmp_path, script):
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", "--on-break", "skip",
                      script_args=(str(script),))
    assert run.returncode == 0, run.stderr
    (replay,) = run.of("replay")
    return run, replay


def test_a_penalty_whose_sqrt_met_zero_is_named_at_its_line_not_called_transient(tmp_path):
    script = FIXTURES / "grad_penalty.py"
    run, replay = _replay(tmp_path, script)
    origin = replay["grad_origin"]
    assert origin["kind"] == "other_path" and origin["params"] == ["2.weight"] and origin["op"] == "sqrt", origin
    assert origin["line"] == marked_line(script, "penalty")
    assert replay["reproduced"] is None and replay["verdict"] != TRANSIENT
    assert replay["advice"]["cause"] == "domain" and "eps" in replay["advice"]["text"]
    # Where the person looks: the job's stderr.
    assert f"another path of the loss into the parameters, pow -> sum -> sqrt at {script}:{origin['line']}" in run.stderr
    assert "transient fault (a flaky device" not in run.stderr


def test_gradients_divided_by_a_count_of_zero_are_named_at_the_division(tmp_path):
    script = FIXTURES / "grad_divided.py"
    run, replay = _replay(tmp_path, script)
    origin = replay["grad_origin"]
    assert origin["kind"] == "changed_after_backward" and origin["line"] == marked_line(script, "divide"), origin
    assert replay["reproduced"] is None and "as a division by 0 makes them" in replay["verdict"]
    assert f"the program divided every gradient by 0 after the backward, at {script}:{origin['line']}" in run.stderr
    assert "transient fault (a flaky device" not in run.stderr


class FlakyGrad(torch.autograd.Function):
    """The identity; its backward makes one NaN, once: a flaky kernel."""
    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        FlakyGrad.calls += 1
        if FlakyGrad.calls == 1:
            g = g.clone()
            g[0, 0] = float("nan")
        return g


@pytest.mark.parametrize("penalty", [False, True])
def test_a_nan_in_part_of_the_gradients_no_penalty_reaches_is_still_transient(session_factory, penalty):
    """A penalty on a layer the NaN did not reach explains nothing: still transient."""
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    FlakyGrad.calls = 0

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 1)

        def forward(self, x):
            return self.b(FlakyGrad.apply(self.a(x)))

    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    out = net(torch.randn(8, 4))
    loss = out.pow(2).mean() + (1e-3 * net.b.weight.pow(2).sum() if penalty else 0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    (replay,) = s.views.replays
    assert replay["backward_replayed"] and "grad_origin" not in replay, replay
    assert replay["verdict"] == TRANSIENT, replay
    assert replay["reproduced"] is False and replay["verdict"] == TRANSIENT


def test_a_clip_that_refuses_nonfinite_gradients_breaks_on_them_first(tmp_path):
    """clip_grad_norm_(error_if_nonfinite=True) raised before any update, so `--break nan`
    never broke: the program stopped with torch's error and no replay. The update's checks
    now run as the clip raises; the exception still reaches the program, as plain."""
    script = FIXTURES / "clip_refuses.py"
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", script_args=(str(script),))
    assert run.returncode == 1 and "error_if_nonfinite" in run.stderr.splitlines()[-1], run.stderr
    (brk,) = run.of("break")
    assert brk["phase"] == "before_optimizer_step" and brk["where"]["line"] == marked_line(script, "clip"), brk
    (replay,) = run.of("replay")
    assert replay["first_nonfinite"]["op"] == "sqrt" and replay["first_nonfinite"]["line"] == \
        marked_line(script, "sqrt"), replay


class Net(nn.Module):
    def __init__(self, flaky: bool = True, act: Any = torch.relu, width: int = 8):
        super().__init__()
        self.a, self.b, self.flaky, self.act = nn.Linear(4, width), nn.Linear(width, 1), flaky, act

    def forward(self, x):
        h = self.b(self.act(self.a(x)))
        return FlakyGrad.apply(h) if self.flaky else h


def _one_step(s, net, loss_of, clip=None):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    out = net(torch.randn(8, 4))
    loss = loss_of(out)
    opt.zero_grad()
    loss.backward()
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
    opt.step()
    (replay,) = s.views.replays
    return replay


def test_an_l2_term_over_every_parameter_does_not_make_a_transient_nan_the_programs(session_factory):
    """The attack's a1: a hand-written L2 reaches every parameter by another path, but holds
    no op whose gradient can be infinite (a square): no evidence it made the NaN."""
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    FlakyGrad.calls = 0
    net = Net()
    replay = _one_step(s, net, lambda out: out.pow(2).mean() + 1e-4 * sum(p.pow(2).sum() for p in net.parameters()))
    assert "grad_origin" not in replay and replay["verdict"] == TRANSIENT, replay


def test_a_transient_nan_spread_to_every_element_is_no_division(session_factory):
    """The attack's a6: one NaN at a width-1 output's gradient, through a GELU, fills every
    element of every gradient; no line divides .grad, and no element is infinite."""
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    FlakyGrad.calls = 0
    g = torch.ones(1)
    g /= 1  # (a division of something else: not a gradient's)
    replay = _one_step(s, Net(act=nn.functional.gelu), lambda out: out.pow(2).mean())
    assert "grad_origin" not in replay and replay["verdict"] == TRANSIENT, replay


def test_a_penalty_nan_that_clip_grad_norm_spread_is_still_the_penaltys(session_factory):
    """The attack's k2: the clip's NaN norm scaled every gradient by NaN, so not only the
    penalty's parameters were non-finite; it was called transient."""
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    net = Net(flaky=False)
    with torch.no_grad():
        net.b.weight.zero_()
    replay = _one_step(s, net, lambda out: out.pow(2).mean() + 1e-3 * (net.b.weight ** 2).sum().sqrt(), clip=1.0)
    origin = replay["grad_origin"]
    assert (origin["kind"], origin["op"]) == ("other_path", "sqrt") and "spread the NaN" in origin["summary"], replay


def test_the_line_of_a_penalty_is_not_a_comment_a_math_call_or_missed_in_place(session_factory):
    """The attack's b2 and p3: a math module's square root is no tensor's, a comment
    calls nothing, and an in-place square root (the trailing underscore) is one."""
    import math

    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    net = Net(flaky=False)
    with torch.no_grad():
        net.b.weight.zero_()
    scale = 1 / math.sqrt(4)  # a scalar's sqrt(
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    out = net(torch.randn(8, 4)) * scale
    pen = (net.b.weight ** 2).sum()
    pen = pen.sqrt_() if False else pen.sqrt()  # @pen
    loss = out.pow(2).mean() + 1e-3 * pen
    opt.zero_grad()
    loss.backward()
    opt.step()
    (replay,) = s.views.replays
    assert replay["grad_origin"]["line"] == marked_line(Path(__file__), "pen"), replay["grad_origin"]


@pytest.mark.parametrize("action", ["report", "skip"])
def test_a_refused_clip_that_the_program_goes_past_ends_its_step(tmp_path, action):
    """The attack's c2s and c5: a program that catches the clip's refusal and goes on never
    called opt.step() in that step, so stepdbg's step ran on into the next iteration: its
    numbers drifted by one, and a skip asked at the refusal dropped the next, good update."""
    script = FIXTURES / "clip_caught.py"
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", action, script_args=(str(script),))
    assert run.returncode == plain.returncode == 0 and run.stdout == plain.stdout, (run.stdout, plain.stdout)
    (brk,) = run.of("break")
    assert brk["step"] == 3, brk
    (end,) = run.of("end")
    assert end["steps"] == 7, end


def test_a_sqrt_term_beside_an_l2_term_on_the_same_weights_is_found(session_factory):
    """The re-attack's W4: a group lasso's sqrt at a zeroed row plus an L2 of the same
    weights; only the first path from the loss was read (the L2's), so it said transient."""
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    net = Net(flaky=False)
    with torch.no_grad():
        net.a.weight[3].zero_()
    w = net.a.weight
    replay = _one_step(s, net, lambda out: out.pow(2).mean() + 1e-3 * (w ** 2).sum(1).sqrt().sum()
                       + 1e-4 * (w ** 2).sum())
    assert replay["grad_origin"]["op"] == "sqrt" and replay["grad_origin"]["params"] == ["a.weight"], replay


class AuxNet(Net):
    """The re-attack's W5: an auxiliary loss of the activations through F.normalize (a div)."""

    def forward(self, x):
        h = torch.relu(FlakyGrad.apply(self.a(x)))
        z = nn.functional.normalize(h, dim=-1)
        return self.b(h), (z @ z.T).pow(2).mean()


def test_a_transient_under_an_auxiliary_loss_of_the_activations_is_not_the_programs(session_factory):
    """Not blamed on the program's own ops (grad_origin). The loss reaches both of the
    model's outputs, and the replay's backward runs from one's gradient: a value born on
    the other's path would not be made again, so the verdict is 'could not tell', not
    'transient' (the tuple attacker's auxonly2 was called a flaky device's)."""
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    FlakyGrad.calls = 0
    replay = _one_step(s, AuxNet(), lambda out: out[0].pow(2).mean() + 1e-2 * out[1])
    assert "grad_origin" not in replay and replay["reproduced"] is None, replay
    assert replay["verdict"].startswith("could not tell: the loss reached several of the model's outputs"), replay


def _masked_step(s):
    """A step whose loss is masked to nothing (a batch of padding only): its gradients are 0."""
    s.model.armed = True
    net = Net(flaky=False)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    out = net(torch.randn(8, 4))
    opt.zero_grad()
    (out.pow(2).mean() * 0).backward()
    return net, opt, torch.tensor(0.0)


def test_gradients_reassigned_divided_by_zero_are_named(session_factory):
    """The re-attack's W6: only an augmented division of a gradient, its in-place div and
    torch's foreach div were seen; a reassignment divided by the count was not."""
    s = session_factory("nan", actions=("replay",))
    net, opt, n = _masked_step(s)
    for p in net.parameters():
        p.grad = p.grad / n  # @reassigned
    opt.step()
    (replay,) = s.views.replays
    assert replay["grad_origin"]["line"] == marked_line(Path(__file__), "reassigned"), replay


def test_gradients_of_a_list_divided_or_scaled_by_one_over_zero_are_named(session_factory):
    s = session_factory("nan", actions=("replay",))
    net, opt, n = _masked_step(s)
    grads = [p.grad for p in net.parameters()]
    for g in grads[:2]:
        g.div_(n)  # @div
    for g in grads[2:]:
        g.mul_(1.0 / n)
    opt.step()
    (replay,) = s.views.replays
    # (two lines divide: no line is guessed between them, and the cause is still said)
    assert replay["grad_origin"]["kind"] == "changed_after_backward" and replay["grad_origin"]["line"] is None, replay
