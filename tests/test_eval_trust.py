"""Trust in evals (issue 43, items 5 and 6): code run at a pause changes nothing in the
paused frame that it did not assign, never crashes a job whose threads print, and leaves
stepdbg's own code standing when it closes or replaces sys.stdout."""

from __future__ import annotations

import sys
import textwrap
import threading
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

import pytest
from conftest import ROOT, WAIT, Job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepdbg import client
from stepdbg.agent.views.evaluate import Evaluator

pytestmark = pytest.mark.usefixtures("private_runtime_dir")

# A script's top level (f_locals is f_globals), as nanoGPT's train.py: its own `batch` is a
# dict and its own `output` a string, names the step's objects also have.
TOP_LEVEL = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
somevar = "kept"
for step in range(3):
    batch = {"x": torch.randn(8, 4), "y": torch.randn(8, 1)}
    output = f"text {step}"
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(batch["x"]), batch["y"])
    loss.backward()
    opt.step()
    print(f"step {step} {type(batch).__name__} {output}", flush=True)
print(f"x={globals().get('x')} somevar={'somevar' in globals()} model={type(model).__name__}", flush=True)
"""


def write_script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text))
    return path


def no_stepdbg_traceback(err: str) -> bool:
    """No frame of stepdbg's own code in a traceback on the job's stderr."""
    return f'File "{ROOT / "stepdbg"}' not in err


def test_an_eval_changes_only_what_it_assigns_in_a_top_level_script(start_job, tmp_path):
    """`1+1` turned the script's `batch` (a dict) into the step's Tensor and its `output`
    (a string) into None, and the job crashed; `del somevar` was ignored."""
    job = start_job("--break", "step==1", script=write_script(tmp_path, TOP_LEVEL))
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        assert c.evaluate("1+1")["value"] == "2"
        assert c.evaluate("x = 3")["error"] is None
        assert c.evaluate("del somevar")["error"] is None
        frame = {row["name"]: row for row in c.frame_locals()}
        assert frame["batch"]["type"] == "dict" and frame["output"]["type"] == "str", frame
        assert frame["output"]["value"] == "'text 1'" and frame["model"]["type"] == "Linear", frame
        assert frame["x"]["type"] == "int" and frame["x"]["value"] == "3", frame
        assert "somevar" not in frame and "optimizer" not in frame, frame
        assert c.evaluate("type(batch).__name__, output")["value"] == "('dict', 'text 1')"  # the frame's own win
        assert c.evaluate("type(optimizer).__name__")["value"] == "'SGD'"  # the step's, where the frame has none
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and "Traceback" not in err, err
    assert out.splitlines()[-3:] == ["step 1 dict text 1", "step 2 dict text 2", "x=3 somevar=False model=Linear"], out
    assert job.events()[-1]["event"] == "end" and job.events()[-1]["exit_code"] == 0


# ---------------------------------------------------------------------- the same, in process, by chance

STEP = {"model": "the step's model", "batch": "the step's batch", "loss": "the step's loss",
        "output": "the step's output", "optimizer": "the step's optimizer"}
FRAME = {"batch": {"x": 1}, "output": "text", "somevar": "kept", "a": 1}
NAMES = sorted({*STEP, *FRAME, "x", "y"})


def evaluator_at(frame: FrameType) -> Evaluator:
    model = SimpleNamespace(capture={"batch": STEP["batch"], "loss": STEP["loss"]}, busy=False,
                            root=lambda: STEP["model"], output=lambda: STEP["output"],
                            optimizers=[STEP["optimizer"]])
    controls = SimpleNamespace(on_training_thread=lambda fn: fn(), held_signal=lambda e: False)
    return Evaluator(model, controls, lambda: frame)  # type: ignore[arg-type]


def at_module_level(statements: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run `statements` one eval each in a module-level frame (f_locals is f_globals); the
    frame's names after, and the answers."""
    g: dict[str, Any] = {"__name__": "script", **FRAME}
    answers: list[dict[str, Any]] = []

    def pause() -> None:
        ev = evaluator_at(sys._getframe(1))
        answers.extend(ev.evaluate(s) for s in statements)

    g["pause"] = pause
    exec(compile("pause()", "<script>", "exec"), g)
    return {k: v for k, v in g.items() if k not in ("__name__", "__builtins__", "pause")}, answers


statement = st.one_of(
    st.builds(lambda n, v: f"{n} = {v!r}", st.sampled_from(NAMES), st.integers(-5, 5)),
    st.builds(lambda n, m: f"{n} = {m}", st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.builds(lambda n: f"del {n}", st.sampled_from(NAMES)),
    st.builds(lambda n: f"print({n})", st.sampled_from(NAMES)),
    st.sampled_from(["1+1", "pass", "[batch, output, model]", "import math", "len(dir())"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statement, max_size=8))
def test_evals_change_exactly_the_names_they_assign_or_delete(statements):
    """An oracle of a few lines: a name read is the frame's, else the step's; `n = v`
    sets the frame's n (`loss = loss`, the step's object bound to its own name again, is
    no change); `del n` removes the frame's n (an error where neither has it); anything
    else changes nothing."""
    frame, answers = at_module_level(statements)
    want: dict[str, Any] = dict(FRAME)
    for s, answer in zip(statements, answers, strict=True):
        if s.startswith("del "):
            name = s.removeprefix("del ")
            assert (answer["error"] is None) == (name in want or name in STEP), (s, answer)
            want.pop(name, None)
        elif " = " in s:
            name, _, value = s.partition(" = ")
            if value.isidentifier():
                if value in want or value in STEP:
                    obj = want[value] if value in want else STEP[value]
                    if name in want or STEP.get(name) is not obj:
                        want[name] = obj
                else:
                    assert "NameError" in answer["error"], (s, answer)
            else:
                want[name] = int(value)
        elif s == "import math":
            want["math"] = frame["math"]
    assert frame.keys() == want.keys(), statements
    assert all(frame[k] is want[k] or frame[k] == want[k] for k in want), (statements, frame, want)


def test_in_a_functions_frame_its_own_names_win_and_a_read_changes_none():
    """In a function's frame (f_locals a snapshot in Python 3.11): the function's own `batch`
    and `output` are what an eval sees, the step's `loss` where it has none."""
    def pause() -> list[dict[str, Any]]:
        ev = evaluator_at(sys._getframe(1))
        return [ev.evaluate("1+1"), ev.evaluate("batch, output, loss")]

    def train() -> tuple[Any, Any, list[dict[str, Any]]]:
        batch, output = {"x": 1}, "text"
        answers = pause()
        return batch, output, answers

    batch, output, answers = train()
    assert batch == {"x": 1} and output == "text"
    assert answers[0]["value"] == "2" and answers[1]["value"] == "({'x': 1}, 'text', \"the step's loss\")", answers


# Python 3.11: a function's local is deleted through f_locals; 3.12 would set it to None and
# 3.13's write-through f_locals refuses, and the answer says it was not deleted.
DELETES = sys.version_info < (3, 12)


def test_in_a_functions_frame_an_assignment_and_a_del_reach_the_function():
    """In a function's frame, `a = 5`, a closure's variable assigned and `del secret` went into
    a copy of its locals only (f_locals, Python < 3.13): each answer said no error and the
    function went on with a == 1, its closure reading 'c' and secret still bound."""
    def pause() -> list[dict[str, Any]]:
        ev = evaluator_at(sys._getframe(1))
        return [ev.evaluate(s) for s in ("a = 5", "cell = 'changed'", "del secret", "a, cell", "1+1")]

    def train() -> tuple[Any, ...]:
        a, secret, cell, same = 1, "keep", "c", "same"
        read = lambda: cell  # noqa: E731 - a closure: `cell` lives in a cell
        answers = pause()
        return a, read(), "secret" in locals(), secret if "secret" in locals() else None, same, answers

    a, cell, bound, secret, same, answers = train()
    assert (a, cell, same) == (5, "changed", "same"), answers
    assert answers[0]["error"] is None and answers[1]["error"] is None, answers
    assert answers[3]["value"] == "(5, 'changed')" and answers[4]["value"] == "2", answers
    if DELETES:
        assert answers[2]["error"] is None and not bound, answers
    else:
        assert bound and secret == "keep" and "not deleted: secret" in answers[2]["error"], answers


FUNCTION = """\
import torch
from torch import nn


def train():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scale, secret, other = 1.0, "keep", "same"
    for step in range(3):
        opt.zero_grad()
        loss = model(torch.randn(8, 4)).pow(2).mean() * scale
        loss.backward()
        opt.step()
        print(f"step {step} scale={scale} secret={'secret' in locals()} other={other}", flush=True)


train()
"""


def test_an_eval_at_a_pause_in_a_function_assigns_and_deletes_its_locals(start_job, tmp_path):
    """A job paused in train(): `scale = 5.0` answered no error, then `scale` read 1.0 and the
    job's next line used 1.0; `del secret` answered no error and secret stayed 'keep'."""
    job = start_job("--break", "step==1", script=write_script(tmp_path, FUNCTION))
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        assert [f["function"] for f in c.frames() if f["selected"]] == ["train"], c.frames()
        assert c.evaluate("scale = 5.0")["error"] is None
        assert c.evaluate("scale")["value"] == "5.0"
        deleted = c.evaluate("del secret")
        assert c.evaluate("other, 1+1")["value"] == "('same', 2)"
        if DELETES:
            assert deleted["error"] is None, deleted
            assert "NameError" in c.evaluate("secret")["error"]
        else:
            assert "not deleted: secret" in deleted["error"], deleted
            assert c.evaluate("secret")["value"] == "'keep'"
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and "Traceback" not in err, err
    assert out.splitlines()[-3:] == ["step 0 scale=1.0 secret=True other=same",
                                     f"step 1 scale=5.0 secret={not DELETES} other=same",
                                     f"step 2 scale=5.0 secret={not DELETES} other=same"], out


# ---------------------------------------------------------------------- sys.stdout during an eval

CHATTY = """\
import threading
import time

import torch
from torch import nn

stop = threading.Event()


def chatter():
    n = 0
    while not stop.is_set():
        print(f"tick {n}", flush=True)
        n += 1
        time.sleep(0.001)


chatty = threading.Thread(target=chatter, name="chatter", daemon=True)
chatty.start()
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
stop.set()
chatty.join()  # (else its last 'tick N' and this line can share a line: print writes the end apart)
print("finished", flush=True)
"""
EVALS = 3000


def drained(job: Job) -> tuple[list[str], threading.Thread]:
    """The job's stdout read as it comes (its thread prints a line a millisecond), and the
    reader: joined, every line is in (the job's exit comes before its pipe's last lines are
    read, on a busy machine: the suite's one failure of the day)."""
    lines: list[str] = []
    assert job.proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(job.proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    return lines, reader


@pytest.mark.slow
def test_thousands_of_evals_beside_a_thread_that_prints_never_crash_the_job(start_job, tmp_path):
    """Each eval put a new router object in sys.stdout and freed it when done, while the
    job's thread could be inside print() with a borrowed reference to it: SIGSEGV after
    40 to 200 evals."""
    job = start_job("--break", "step==1", script=write_script(tmp_path, CHATTY))
    out, reader = drained(job)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        for i in range(EVALS):
            try:
                answer = c.evaluate("print(1)")
            except ConnectionError:
                pytest.fail(f"the job died at eval {i}: exit code {job.proc.wait(WAIT)}")
            assert answer == {"output": "1\n", "value": None, "error": None}, (i, answer)
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    assert job.proc.wait(WAIT) == 0
    assert job.proc.stderr is not None and "Traceback" not in job.proc.stderr.read()
    reader.join(WAIT)
    assert "finished\n" in out and "1\n" not in out  # the evals' prints went to their answers only
    assert job.events()[-1]["event"] == "end" and job.events()[-1]["exit_code"] == 0


STDOUT_GONE = ["sys.stdout.close()", "sys.stdout = None",
               "f = open(os.devnull, 'w'); sys.stdout = f; f.close()"]


@pytest.mark.slow
@pytest.mark.parametrize("then", ["end", "cont"])
@pytest.mark.parametrize("code", STDOUT_GONE)
def test_an_eval_that_closes_or_replaces_stdout_leaves_stepdbg_standing(start_job, tmp_path, code, then):
    """After `sys.stdout.close()` at a pause, the end of the job raised from stepdbg's own
    flush (ValueError: I/O operation on closed file) and wrote no end record. The job's
    own print fails as it would without stepdbg."""
    job = start_job("--break", "step==1", script=ROOT / "tests" / "fixtures" / "train_loop.py",
                    script_args=("--steps", "3"))
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        assert c.evaluate(f"import os, sys; {code}")["error"] is None
        getattr(c, then)()
        c.wait_exited(WAIT)
    code_, out, err = job.finish()
    assert no_stepdbg_traceback(err), err
    if then == "end":
        want = 3
    elif code == "sys.stdout = None":  # print() with no sys.stdout prints nothing, as in Python
        want = 0
    else:  # the job's own print at the end of step 1 fails, as in Python
        want = 1
        assert 'train_loop.py", line' in err and "ValueError: I/O operation on closed file" in err, err
    assert code_ == want, err
    assert job.events()[-1]["event"] == "end" and job.events()[-1]["exit_code"] == want
