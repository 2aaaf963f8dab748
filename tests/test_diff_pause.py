"""`diff` at a pause (issue 46): the paused step run twice from the same state names the
first module, op and line where the runs part, and the randomness that moved; the job's
own randomness is as it was. Real torch; the console in a real job (tests/fixtures/diff_pause.py)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import ROOT, WAIT, wait_for
from torch import nn

from stepdbg.agent.diff.twice import step_twice

FIX = ROOT / "tests" / "fixtures"
SCRIPT = FIX / "diff_pause.py"


def marker_line(path: os.PathLike[str], marker: str) -> int:
    return next(i for i, text in enumerate(open(path).read().splitlines(), 1) if marker in text)


def console(*args: str, lines: str = "diff\nc\n") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=lines, capture_output=True, text=True,
                          cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1", "PYTHONPATH": str(ROOT)})


def said(r: subprocess.CompletedProcess[str]) -> str:
    (line,) = [x for x in r.stderr.splitlines() if "stepdbg: diff: " in x]
    return line.split("stepdbg: diff: ", 1)[1]


@pytest.mark.slow
@pytest.mark.parametrize(("noise", "source", "op"), [
    ("numpy", "numpy: numpy's global RNG (np.random.*)", "float"),
    ("numpy-rng", "numpy: an unseeded numpy Generator (fresh OS entropy)", "float"),
    ("python", "python random: random.gauss", "add"),
    ("torch-gen", "torch generator: torch.randn(generator=...)", "randn"),
])
def test_unseeded_noise_deep_in_the_model_is_named_at_the_console(noise, source, op):
    """layers.1.mlp adds noise between fc1 and fc2: the first call that differs is fc2's
    argument, made in layers.1.mlp's own code, by the op at the marked line, drawn there."""
    r = console("--noise", noise)
    assert r.returncode == 0 and r.stdout.count("loss") == 3, r.stderr
    words = said(r)
    line = marker_line(SCRIPT, f"# @{noise}")
    assert words.startswith("step 1 run twice from the same state differs first in module layers.1.mlp's own "
                            "code (the input[0] of layers.1.mlp.fc2): "), words
    assert f"{op} at tests/fixtures/diff_pause.py:{line}" in words, words
    drawn = words.split("; randomness: ")[1]  # one source, drawn at the marked line
    assert drawn.startswith(source) and drawn.endswith(f" at tests/fixtures/diff_pause.py:{line}"), words
    assert ";" not in drawn, words


@pytest.mark.slow
def test_a_seeded_step_with_dropout_gives_no_false_positive():
    words = said(console())
    assert words.startswith("step 1 run twice from the same state gives the same module outputs, bitwise"), words


def test_the_answer_and_the_jobs_randomness_after_it(session_factory):
    """In process, after the backward (the gradient at the output captured): the answer's
    fields; Python's, numpy's and a held generator's states, torch's RNG, the parameters and
    gradients are as before the diff, so the job draws what it would have drawn."""
    s = session_factory("nan")
    s.model.armed = True
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(0)

    class Noisy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.gen = torch.Generator().manual_seed(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x) + float(np.random.rand()) * 1e-3 + random.random() * 1e-3
            return h + torch.rand(h.shape, generator=self.gen) * 1e-3  # @gen

    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), Noisy(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    before = (random.getstate(), repr(np.random.get_state()), model[2].gen.get_state(), torch.get_rng_state(),
              [p.detach().clone() for p in model.parameters()], [p.grad.clone() for p in model.parameters()])
    r = step_twice(s.model)
    after = (random.getstate(), repr(np.random.get_state()), model[2].gen.get_state(), torch.get_rng_state(),
             list(model.parameters()), [p.grad for p in model.parameters()])
    assert before[:2] == after[:2] and torch.equal(before[2], after[2]) and torch.equal(before[3], after[3])
    assert all(torch.equal(a, b) for a, b in zip(before[4] + before[5], after[4] + after[5], strict=True))
    json.dumps(r)  # plain data: what the op sends
    d = r["first_divergence"]
    assert r["checked"] and r["runs"] == 4 and r["gradients"] and d["phase"] == "forward"
    assert (d["module"], d["class"], d["what"], d["op"]["name"]) == ("2", "Noisy", "output", "add"), d
    sources = [c["source"] for c in r["randomness"]]
    assert sources == ["numpy", "python random", "torch generator"], r["randomness"]
    assert {"python random", "numpy", "2.gen (Generator)"} <= set(r["moved"]), r["moved"]
    opt.step()


def test_nothing_captured_and_a_forward_that_fails_say_so(session_factory):
    s = session_factory("nan")
    r = step_twice(s.model)
    assert not r["checked"] and r["summary"] == "nothing to compare: no model forward was seen in this step"
    calls = []

    class Once(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            calls.append(1)
            if len(calls) > 1:
                raise RuntimeError("only once")
            return super().forward(x)

    model = Once(2, 1)
    model(torch.ones(2)).sum().backward()
    r = step_twice(s.model)
    assert not r["checked"] and r["summary"].endswith("(RuntimeError: only once)"), r


@pytest.mark.slow
def test_doctor_names_the_first_module_and_line_of_a_nondeterministic_step():
    demo = ROOT / "demos" / "nondeterministic.py"
    out = subprocess.run([sys.executable, "-m", "stepdbg", "doctor", "--json", "-q", sys.executable, str(demo)],
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT)
    (f,) = [f for f in json.loads(out.stdout)["findings"] if f["rule"] == "nondeterministic"]
    line = marker_line(demo, "# @python-rng")
    assert f"differs first in module 0 (NoisyLinear), output: add at demos/nondeterministic.py:{line}" \
        in f["message"], f["message"]
    assert f"randomness: python random: random.gauss at demos/nondeterministic.py:{line}" in f["message"]
    d = f["data"]["first_divergence"]  # called by nn.Sequential: at the line that called the model
    assert (d["module"], d["op"]["line"], f["data"]["randomness"][0]["source"]) == ("0", line, "python random")
    assert d["file"] == str(demo) and "model(x)" in demo.read_text().splitlines()[d["line"] - 1]


async def test_the_tuis_D_runs_the_diff_and_says_where_the_runs_part():
    from fake_source import DIFF, FakeSource
    from textual.widgets import RichLog

    from stepdbg_tui.app import StepdbgApp

    def toasts() -> list[str]:
        return [str(n.message) for n in app._notifications]

    def log() -> str:
        return " ".join(strip.text for strip in app.query_one("LogPanel RichLog", RichLog).lines)

    def answer() -> str:  # under the REPL line, where it stays (a toast stood 30 s over the Break panel)
        return str(app.query_one("#repl-out").content)

    for paused in (False, True):
        src = FakeSource(paused=paused)
        app = StepdbgApp(src, clock=lambda: 1754.0)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("D")  # the diff runs in a worker: its answer is waited for, not 0.2 s
            if not paused:
                await wait_for(pilot, lambda: "diff needs a paused step: p pauses the job" in toasts(), "the refusal")  # (a key pressed on
                assert "diff needs" not in answer(), answer()  # a panel: its toast alone, the eighteenth walk's leftovers 3)
                assert ("diff", ()) not in src.calls
                continue
            await wait_for(pilot, lambda: DIFF["summary"] in answer(), "the diff's answer")
            assert ("diff", ()) in src.calls  # and in the Log, to read again later:
            await pilot.press("9")  # the Log draws its lines once shown
            await wait_for(pilot, lambda: "diff: step 30 run twice from the same state differs first in module "
                                          "features" in log(), "the diff's line in the Log")


@pytest.mark.slow
def test_diff_compile_names_the_module_that_takes_another_path_under_compile():
    """The block's RMSNorm takes another eps under torch.compile (Sequential index 1, after a
    Linear that agrees): `diff compile` at the console names that module, its forward's line, and how far
    past the tolerance; progress is said; a bad backend is one line. (The same model without
    the other path agrees: the next test.)"""
    script = FIX / "diff_compile.py"
    r = subprocess.run([sys.executable, str(script)], input="diff compile\ndiff compile nope\nc\n",
                       capture_output=True, text=True, cwd=ROOT, timeout=WAIT,
                       env={**os.environ, "STEPDBG_CONSOLE": "1", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.count("loss") == 3, r.stderr
    (words,) = [x.split("stepdbg: diff compile: ", 1)[1] for x in r.stderr.splitlines()
                if "stepdbg: diff compile: step" in x]
    line = marker_line(script, "# @other-path") - 1  # the forward's def
    assert words.startswith("step 1's forward under torch.compile (backend inductor) differs first in module "
                            f"1.norm (RMSNorm, forward at tests/fixtures/diff_compile.py:{line}): in its own code"), words
    assert "x the tolerance" in words
    assert "stepdbg: diff compile: compiling 1 (Block, compile 3)" in r.stderr
    assert "error: backend must be one of inductor, aot_eager, eager, not 'nope'" in r.stderr


@pytest.mark.slow
def test_diff_compile_says_the_same_model_without_the_other_path_agrees():
    """The same model without the other path agrees (dropout draws as eagerly: not a
    difference). A test of its own so that two workers share the two compiles (one test,
    they were among the suite's longest)."""
    script = FIX / "diff_compile.py"
    r = subprocess.run([sys.executable, str(script), "--same"], input="diff compile aot_eager\nc\n",
                       capture_output=True, text=True, cwd=ROOT, timeout=WAIT,
                       env={**os.environ, "STEPDBG_CONSOLE": "1", "PYTHONPATH": str(ROOT)})
    assert "(backend aot_eager) agrees with eager within atol 1e-05, rtol 0.0001" in r.stderr, r.stderr


def test_diff_compile_leaves_buffers_rng_and_the_users_compiled_model_as_they_were(session_factory):
    from stepdbg.agent.diff.compiled import compile_diff

    s = session_factory("nan")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.3), nn.Linear(8, 1))
    compiled = torch.compile(model, backend="eager")
    compiled(torch.randn(16, 4)).sum().backward()
    before = ([b.clone() for b in model.buffers()], torch.get_rng_state(), [m.training for m in model.modules()])
    r = compile_diff(s.model, "eager")
    assert r["checked"] and r["first_divergence"] is None and r["compiles"] == 1, r  # the root agrees: done
    assert all(torch.equal(a, b) for a, b in zip(before[0], model.buffers(), strict=True))
    assert torch.equal(before[1], torch.get_rng_state()) and before[2] == [m.training for m in model.modules()]
    json.dumps(r)


def test_the_doctors_determinism_check_leaves_pythons_and_numpys_rng_as_they_were(session_factory):
    """It replays the step four times, each drawing from numpy's and Python's RNGs, which
    the replay does not restore: the job's later draws were moved by the doctor."""
    from stepdbg.agent.doctor.measurements import determinism_check

    s = session_factory("nan")
    s.model.armed = True
    np.random.seed(3)
    random.seed(3)

    class Noisy(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) + float(np.random.rand()) + random.random()

    model = Noisy(4, 1)
    model(torch.randn(8, 4)).sum().backward()
    before = (repr(np.random.get_state()), random.getstate())
    r = determinism_check(s.model)
    assert r["checked"] and not r["reproducible"] and "Python's or numpy's RNG" in r["cause"]
    assert (repr(np.random.get_state()), random.getstate()) == before
