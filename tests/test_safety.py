"""The job comes first: stepdbg never raises into the loop, and its public API from code."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import ROOT, WAIT
from torch import nn

from stepdbg.agent.report import read


def test_a_failing_hook_logs_once_turns_itself_off_and_the_loop_goes_on(session_factory, tmp_path, capsys):
    s = session_factory("nan", report=str(tmp_path / "r.jsonl"))
    s.bus.quiet = False

    def broken(*args):
        raise RuntimeError("bug in stepdbg")

    s.model.on_backward_pre = broken  # a bug in one of our hooks
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    s.stop()
    assert s.step == 3  # the other hooks still count steps
    err = capsys.readouterr().err
    assert err.count("internal error in the backward hook, which is now off") == 1
    errors = [e for e in read(str(tmp_path / "r.jsonl")) if e["event"] == "error"]
    assert len(errors) == 1 and errors[0]["hook"] == "backward" and "bug in stepdbg" in errors[0]["error"]
    assert s.guard.disabled == {"backward"}
    s.guard.disabled.clear()  # expected here; the fixture fails any other test that has one


def test_user_errors_pass_through_unchanged(session_factory):
    session_factory("nan")
    model = nn.Linear(4, 1)
    try:
        model(torch.randn(2, 5))
    except RuntimeError as e:
        assert "shapes cannot be multiplied" in str(e)
    else:
        raise AssertionError("the user's error was swallowed")


def test_stop_removes_every_hook_and_patch(session_factory):
    import torch.nn.modules.module as nn_module
    from torch.utils.data import dataloader

    originals = (torch.autograd.backward, dataloader._BaseDataLoaderIter.__next__,
                 torch.nn.utils.clip_grad_norm_, torch.optim.Optimizer.zero_grad)
    n_pre, n_post = len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)
    s = session_factory("nan", "activations")
    assert torch.autograd.backward is not originals[0]
    s.stop()
    s.stop()  # idempotent
    assert (torch.autograd.backward, dataloader._BaseDataLoaderIter.__next__,
            torch.nn.utils.clip_grad_norm_, torch.optim.Optimizer.zero_grad) == originals
    assert (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)) == (n_pre, n_post)


def run_script(tmp_path, body: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    p = tmp_path / "train.py"
    p.write_text(textwrap.dedent(body))
    import os

    return subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=WAIT, cwd=ROOT,
                          input=stdin, stdin=None if stdin else subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_watch_from_code_in_a_plain_python_script(tmp_path):
    """stepdbg.watch() in the script itself, after the optimizer exists; exception post-mortem too."""
    report = tmp_path / "r.jsonl"
    out = run_script(tmp_path, f"""
        import torch, stepdbg
        from torch import nn
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        stepdbg.watch("nan", "exception", "grad_norm>1e9", report={str(report)!r})
        for step in range(4):
            x = torch.randn(8, 4)
            if step == 2:
                x[0, 0] = float("inf")
            opt.zero_grad()
            model(x).mean().backward()
            opt.step()
        raise KeyError("the end")
    """)
    assert out.returncode == 1 and "KeyError: 'the end'" in out.stderr
    events = read(str(report))
    breaks = [e for e in events if e["event"] == "break"]
    # Step 2's inf gradient also holds grad_norm>1e9 at the optimizer step: reported, not dropped.
    assert [(b["step"], b["condition"]) for b in breaks] == [(2, "nan"), (2, "grad_norm>1e9"), (4, "exception")]


def test_breakpoint_in_code_opens_the_console(tmp_path):
    """stepdbg.breakpoint() pauses at the terminal; p shows a tensor, c continues."""
    out = run_script(tmp_path, """
        import torch, stepdbg
        w = torch.ones(3, 2)
        stepdbg.breakpoint()
        print("after", float(w.sum()))
    """, stdin="p w\nw.mul_(2)\nc\n", env={"STEPDBG_CONSOLE": "1"})
    assert out.returncode == 0, out.stderr
    assert "w: float32 [3, 2] on cpu" in out.stderr and "max 1 mean 1" in out.stderr  # p w
    assert "stepdbg.breakpoint()" in out.stderr  # the source around the pause
    assert out.stdout.strip() == "after 12.0"  # the statement ran in the paused frame


def test_pause_without_a_terminal_or_front_end_does_not_hang(tmp_path):
    out = run_script(tmp_path, """
        import stepdbg
        stepdbg.breakpoint()
        print("went on")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "went on"
    assert "not pausing: no front end is attached and stdin is not a terminal" in out.stderr


@pytest.mark.slow
def test_enter_repeats_the_last_stepping_command_as_in_pdb(tmp_path):
    """At a break at step 1: `s` goes to the same point of step 2, Enter to step 3's, then
    `c` and Enter (continue) run to the end."""
    out = run_script(tmp_path, """
        import torch, stepdbg
        from torch import nn
        stepdbg.watch("step==1", on_break="pause")
        model = nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(6):
            model(torch.randn(4, 2)).sum().backward()
            opt.step()
            opt.zero_grad()
        print("done")
    """, stdin="s\n\nc\n\n", env={"STEPDBG_CONSOLE": "1"})
    assert out.returncode == 0, out.stderr
    pauses = [line for line in out.stderr.splitlines() if line.startswith("stepdbg paused")]
    assert pauses == ["stepdbg paused; Enter: c, h for help", "stepdbg paused; Enter: s, h for help",
                      "stepdbg paused; Enter: s, h for help"], out.stderr
    assert out.stdout.strip() == "done"


def test_w_u_d_walk_the_paused_stack_and_eval_runs_in_the_selected_frame(tmp_path):
    """pdb's w, u and d: the user's frames only (forward() included, none of torch's), and
    p, eval and locals look at the frame selected."""
    out = run_script(tmp_path, """
        import torch, stepdbg
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

            def forward(self, x):
                hidden = self.fc(x)
                stepdbg.breakpoint()
                return hidden

        def train():
            scale = 7
            net = Net()
            net(torch.ones(3, 2)).sum().backward()

        train()
    """, stdin="w\nscale * 2\nu\nscale * 2\nlocals\nu 5\nd 9\nhidden.shape\nc\n",
        env={"STEPDBG_CONSOLE": "1"})
    assert out.returncode == 0, out.stderr
    err = out.stderr
    lines = [ln.removeprefix("(stepdbg) ") for ln in err.splitlines()]
    stack = [ln for ln in lines if " in " in ln and ln[:2] in ("> ", "  ") and "train.py:" in ln]
    # w: <module>, train(), forward(), outermost first, the innermost selected; no torch frames
    assert [ln.split(" in ")[1] for ln in stack[:3]] == ["<module>()", "train()", "forward()"], err
    assert stack[2].startswith(">") and not stack[1].startswith(">")
    assert "NameError: name 'scale' is not defined" in err  # forward() has no `scale`
    after_u = lines[lines.index("14"):]  # after u, train()'s local
    assert after_u[1].split()[:3] == ["scale", "int", "7"]  # locals of train()
    assert "torch.Size([3, 2])" in lines  # d 9 stops at the innermost frame, forward()


@pytest.mark.slow
def test_locals_shows_the_paused_frames_variables(tmp_path):
    """`locals` at a pause: tensors with dtype, shape and device, modules with their size,
    anything else as a short repr; a __repr__ that raises is shown, not raised."""
    out = run_script(tmp_path, """
        import torch, stepdbg
        from torch import nn

        class Odd:
            def __repr__(self):
                raise ValueError("no")

        w = torch.ones(3, 2)
        net = nn.Linear(2, 1)
        note = "x" * 500
        odd = Odd()
        stepdbg.breakpoint()
        print("after")
    """, stdin="locals\nc\n", env={"STEPDBG_CONSOLE": "1"})
    assert out.returncode == 0, out.stderr
    shown = out.stderr.replace("(stepdbg) ", "\n").splitlines()  # the first row follows the prompt
    lines = {ln.split()[0]: ln for ln in shown if ln.startswith("  ") and len(ln.split()) > 2}
    assert [n for n in lines if n in ("w", "net", "note", "odd")] == ["w", "net", "note", "odd"]
    assert "__name__" not in lines and "Odd" not in lines  # the module's plumbing and classes hidden
    assert lines["w"].split()[1:] == ["Tensor", "float32", "[3,", "2]", "on", "cpu"]
    assert lines["net"].split()[1:] == ["Linear", "3", "parameters"]
    assert lines["note"].split()[1] == "str" and len(lines["note"]) < 120
    assert lines["odd"].split()[1:3] == ["Odd", "<Odd"]  # reprlib's fallback: the type and address
