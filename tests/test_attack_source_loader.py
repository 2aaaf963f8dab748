"""A view reads a frame's source without running the user's code (issue 43's trust): a
module whose file is not on disk gets its source from its loader's `get_source`, and
`linecache` called it — on stepdbg's own threads — for every frame of that module a view
told (a break's code, every thread's stack, the source view), and for a lazy entry that
someone's traceback left in the cache. A loader of the user's is their code: it may wait,
raise or write. Python's own loaders (a zip's) still give their lines."""

from __future__ import annotations

import zipfile

import pytest
from conftest import WAIT, paused_job

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(600)]

SCRIPT = """\
import importlib.abc, importlib.util, linecache, sys, threading
import torch
import stepdbg

ran = []

class Hooked(importlib.abc.Loader):
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        exec(compile(SOURCE, module.__spec__.origin, "exec"), module.__dict__)
    def get_source(self, name):
        ran.append(threading.current_thread().name)
        return SOURCE

SOURCE = '''
import threading
import stepdbg
gate = threading.Event()

def waiter():
    gate.wait()  # a thread of the hooked module, waiting

def step(model, x):
    loss = model(x).sum()
    stepdbg.breakpoint()  # paused in the hooked module
    return loss
'''

def load(name):
    spec = importlib.util.spec_from_loader(name, Hooked(), origin=f"/no/such/dir/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

hooked, lazy = load("hooked"), load("lazy")
linecache.lazycache(lazy.__spec__.origin, vars(lazy))  # a lazy entry, as traceback leaves one
threading.Thread(target=hooked.waiter, daemon=True).start()
threading.Thread(target=lazy.waiter, daemon=True).start()
sys.path.insert(0, sys.argv[1])
import zipped  # from a zip: Python's own loader
threading.Thread(target=zipped.waiter, daemon=True).start()
model = torch.nn.Linear(4, 1)
for i in range(2):
    loss = hooked.step(model, torch.randn(8, 4))
    loss.backward()
hooked.gate.set(); lazy.gate.set(); zipped.gate.set()
print("ran", ran, flush=True)
"""

ZIPPED = """\
import threading
gate = threading.Event()

def waiter():
    gate.wait()  # zipped's own line
"""


def test_no_view_calls_a_loader_of_the_users_and_a_zips_lines_are_read(start_job, tmp_path):
    archive = tmp_path / "mods.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped.py", ZIPPED)
    with paused_job(start_job, tmp_path, SCRIPT, script_args=(str(archive),)) as (job, c):
        for _ in range(2):  # each view, at each pause
            where = c.status()
            stacks = c.call("stacks")
            source = c.call("source", context=5)
            frames = c.call("frames")
            said = repr((where, stacks, source, frames))
            assert "zipped's own line" in said, said[:3000]  # a zip's source, by Python's loader
            assert "a thread of the hooked module" not in said and "paused in the hooked module" not in said
            c.cont()
            if c.wait_paused(WAIT) is None:
                break
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and "ran []" in out, (out, err)  # no get_source of the user's was called
