"""STEPDBG_AUTOSTART and a runtime directory of the user's own that is open to other users
(issue 45, a newcomer's walk): the job's agent made the folder 0700 without a word
(sessions.ensure_private_dir chmod'ed it), where `stepdbg ls`, the launcher and serve
refuse it and leave it as the user made it. Now the agent refuses it too, in one line on
stderr that names the folder and what to do, and the job runs on without stepdbg, its
output and exit code its own.

The hook's own line (stepdbg.cli.hook.HOOK_LINE, what `stepdbg hook install` puts in a .pth
file) runs from a sitecustomize of this test's, so the shared environment is not touched."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from conftest import ROOT, WAIT

from stepdbg.cli.hook import HOOK_LINE

SCRIPT = """\
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("finished", flush=True)
"""


def test_autostart_refuses_an_open_runtime_dir_of_yours_in_one_line_and_leaves_it(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    d.chmod(0o755)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK_LINE)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "STEPDBG_AUTOSTART": "1", "STEPDBG_RUNTIME_DIR": str(d),
           "PYTHONPATH": os.pathsep.join([str(hook), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=WAIT)
    assert out.returncode == 0 and out.stdout == "finished\n", out
    assert stat.S_IMODE(d.stat().st_mode) == 0o755 and not list(d.iterdir())  # left as the user made it
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr  # said once, in one line
    assert lines[0].startswith(f"stepdbg: STEPDBG_RUNTIME_DIR={d} is open to other users (mode 0755)"), out.stderr
    assert f"chmod 700 {d}" in lines[0] and "the job runs without stepdbg" in lines[0], out.stderr
    assert "Traceback" not in out.stderr and "autostart failed" not in out.stderr, out.stderr
