"""A view's source read is bounded by what a path names and a loader holds (issue 43's trust,
3e76797's next): a code whose file name is a FIFO (or a device) is opened by `linecache`, and
the open waits for a writer for good — the break's code, the stacks and the source view hung;
a loader of Python's own class (SourceFileLoader) with the user's `get_source` set on the
instance ran it on stepdbg's thread. Neither is read now; a file on disk still is."""

from __future__ import annotations

import functools
import linecache
import os
import threading
from pathlib import Path

import pytest
from conftest import WAIT

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(600)]

SCRIPT = """\
import sys
from importlib.machinery import SourceFileLoader
import torch
import stepdbg

ran = []
SOURCE = '''
import stepdbg
def step(model, x):
    loss = model(x).sum()
    stepdbg.breakpoint()  # paused in a module of SOURCE
    return loss
'''

def load(name, filename, loader=None):
    module = {"__name__": name, "__loader__": loader}
    exec(compile(SOURCE, filename, "exec"), module)
    return module

patched = SourceFileLoader("patched", "/no/such/dir/patched.py")
patched.get_source = lambda name: ran.append(name) or SOURCE  # the user's, on Python's own class
piped = load("piped", sys.argv[1])  # its file name: a FIFO
hooked = load("hooked", "/no/such/dir/patched.py", patched)
model = torch.nn.Linear(4, 1)
for step in (piped["step"], hooked["step"]):
    step(model, torch.randn(8, 4)).backward()
print("ran", ran, flush=True)
"""


def views(c, fifo: Path) -> str:
    """Every view that reads the paused frame's source, asked in a thread: a hang is said, not waited on."""
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.append(repr(
        (c.status(), c.call("stacks"), c.call("source", context=5), c.call("frames")))), daemon=True)
    reader.start()
    reader.join(WAIT)
    hung = not said
    if hung:
        release(fifo)  # (so that the job and this client end)
        reader.join(WAIT)
    assert not hung, "the views hung reading the paused frame's source"
    return said[0]


def release(fifo: Path) -> None:
    """A reader waiting on the FIFO's open, let go (a writer opened, then closed: it reads
    nothing), and the FIFO taken away, so that no later read waits on it again."""
    if fifo.exists():
        writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        fifo.unlink()
        os.close(writer)


def test_a_fifo_named_as_a_frames_file_and_a_patched_loader_are_not_read(start_job, tmp_path):
    from stepdbg import client

    fifo = tmp_path / "piped.py"
    os.mkfifo(fifo)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    job = start_job(script=script, script_args=(str(fifo),))
    job.info()
    try:
        with client.connect() as c:
            for _ in range(2):  # the FIFO's module's pause, then the patched loader's
                paused = c.wait_paused(WAIT)
                if paused is None:
                    release(fifo)  # (so that the job and this client end)
                assert paused is not None, "the break hung reading its frame's source"
                said = views(c, fifo)
                assert "paused in a module of SOURCE" not in said, said[:3000]
                c.cont()
            assert c.wait_exited(WAIT)["exit_code"] == 0
        code, out, err = job.finish()
        assert code == 0 and "ran []" in out, (out, err)  # the instance's get_source never ran
    finally:
        release(fifo)


class Name(str):
    """A module's name whose comparison is code of the user's."""

    compared: list[str] = []

    def __ne__(self, other: object) -> bool:
        Name.compared.append("!=")
        return False

    __hash__ = str.__hash__


def test_a_loaders_own_attributes_a_lazy_entrys_name_and_a_files_size_are_bounded(tmp_path, monkeypatch):
    from importlib.machinery import SourceFileLoader

    from stepdbg.agent.measure import source_lines

    ran: list[str] = []
    real = tmp_path / "real.py"
    real.write_text("x = 1  # real's own line\n")
    data = SourceFileLoader("data", str(real))
    data.get_data = lambda path: ran.append("get_data") or b"y = 2\n"  # on the instance: the user's
    assert source_lines.lines(str(tmp_path / "gone.py"), {"__name__": "data", "__loader__": data}) == []
    lazy = SourceFileLoader("lazy", str(real))
    monkeypatch.setitem(linecache.cache, str(tmp_path / "lazy.py"), (functools.partial(lazy.get_source, Name("x")),))
    assert source_lines.lines(str(tmp_path / "lazy.py")) == [] and Name.compared == [] and ran == []
    big = tmp_path / "big.py"
    with big.open("wb") as f:
        f.truncate(source_lines.MAX_BYTES + 1)  # (sparse: no disk used)
    assert source_lines.lines(str(big)) == [] and str(big) not in linecache.cache
    plain = SourceFileLoader("plain", str(real))  # Python's own, as it is: still read
    assert source_lines.line(str(tmp_path / "moved.py"), 1, {"__name__": "plain", "__loader__": plain}) \
        == "x = 1  # real's own line\n"
