"""The eval's echo of a last expression's value (evaluate.py's _run) is user code too: the
value's __repr__. Attacked with reprs that raise KeyboardInterrupt or SystemExit, sleep, print,
are huge, or lie about their length; each line has one bounded answer, the job goes on unharmed,
and the frame keeps what the line did not assign. A KeyboardInterrupt raised in a repr ended the
pause and the job; a sleeping repr held the training thread past the time limit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import WAIT

from stepdbg import client

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import threading, time
import torch
from torch import nn

class Interrupts:
    def __repr__(self):
        raise KeyboardInterrupt("raised in a repr")

class Exits:
    def __repr__(self):
        raise SystemExit(3)

class Sleeps:
    def __repr__(self):
        threading.Event().wait()
        return "never"

class Prints:
    def __repr__(self):
        print("printed by a repr")
        return "P"

class Huge:
    def __repr__(self):
        return "x" * 10**8

class Liar(str):
    def __len__(self):
        return 0

class Lies:
    def __repr__(self):
        return Liar("y" * 100_000)

class Unsayable(Exception):
    def __str__(self):
        raise RuntimeError("no words")

class RaisesUnsayable:
    def __repr__(self):
        raise Unsayable()

# reprlib calls a type named int's repr bare (not as an instance's, whose failure it says itself)
RaisesUnsayableInt = type("int", (), {"__repr__": RaisesUnsayable.__repr__})

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
somevar = "kept"
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    print(f"step {step} {loss.item():.6f}", flush=True)
print(f"end somevar={somevar} w={globals().get('w')} q={globals().get('q')}", flush=True)
"""


def test_a_last_expressions_repr_is_run_as_the_line_is(start_job, tmp_path, monkeypatch):
    monkeypatch.setenv("STEPDBG_EVAL_TIMEOUT", "3")  # (the sleeping repr's stop; no time is asserted)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    plain_out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT).stdout
    job = start_job("--break", "step==1", script=script)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        r = c.evaluate("Interrupts()")
        assert r["value"] is None and "KeyboardInterrupt: raised in a repr" in r["error"], r
        r = c.evaluate("Exits()")
        assert r["value"] is None and "SystemExit: 3" in r["error"], r
        r = c.evaluate("Prints()")
        assert r == {"output": "printed by a repr\n", "value": "P", "error": None}, r
        r = c.evaluate("q = 1; Sleeps()")
        assert r["value"] is None and "time limit" in r["error"], r
        assert "the line ran; showing its value did not finish; the job is still paused" in r["error"], r
        assert len(c.evaluate("Huge()")["value"]) == 2000
        assert len(c.evaluate("Lies()")["value"]) == 2000
        assert c.evaluate("RaisesUnsayable()")["value"].startswith("<RaisesUnsayable instance at 0x")
        r = c.evaluate("RaisesUnsayableInt()")
        assert r["value"] == "<repr failed: Unsayable: its message could not be read>", r
        r = c.evaluate("(w := 5)")
        assert r == {"output": "", "value": "5", "error": None}, r
        assert c.evaluate("x = 1; y = 2")["value"] is None
        assert c.evaluate("x + y; x * 10")["value"] == "10"
        assert c.evaluate("somevar")["value"] == "'kept'"
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0, err
    assert "printed by a repr" not in out  # (in the answer, not the job's output)
    want = plain_out.splitlines()[:-1] + ["end somevar=kept w=5 q=1"]
    assert out.splitlines() == want, out  # the job's numbers are those of a run without stepdbg


def test_the_echo_is_bounded_in_process() -> None:
    """A repr's own str subclass whose __len__ says 0 was returned whole (100,000 characters)."""
    from stepdbg.agent.measure.tensors import short_repr

    class Liar(str):
        def __len__(self) -> int:
            return 0

    class Lies:
        def __repr__(self) -> str:
            return Liar("y" * 100_000)

    r = short_repr(Lies(), 2000)
    assert type(r) is str and len(r) == 2000


LOCALS = """\
import torch
from torch import nn

class Interrupts:
    def __repr__(self):
        raise KeyboardInterrupt("raised in a repr")

class Exits:
    def __repr__(self):
        raise SystemExit(3)

ki, se = Interrupts(), Exits()
model = nn.Linear(4, 1)
for step in range(3):
    model(torch.randn(8, 4)).sum().backward()
print("end", flush=True)
"""


def test_a_locals_view_says_a_repr_that_raises_keyboard_interrupt(start_job, tmp_path):
    """The locals view runs reprs on the client's own thread: a repr's KeyboardInterrupt (or
    SystemExit) failed the whole listing (`KeyboardInterrupt: raised in a repr`); each row
    says its own failure, the others stand, the job goes on."""
    script = tmp_path / "train.py"
    script.write_text(LOCALS)
    job = start_job("--break", "step==1", script=script)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        rows = {r["name"]: r["value"] for r in c.frame_locals()}
        assert rows["ki"].startswith("<repr failed: KeyboardInterrupt"), rows
        assert rows["se"].startswith("<repr failed: SystemExit"), rows
        assert "parameters" in rows["model"], rows
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and out.strip() == "end", (out, err)
