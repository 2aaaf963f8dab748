"""The paused frame's names are read running none of the user's code (issue 43's trust): the
TUI, at every break, and `stepdbg attach --repl`, at every pause, asked for them unbidden with
an evaluated line, `sorted(vars())`, and the console decided whether `n` was a variable with
`'n' in vars()`: each name looked up in the paused frame first, so a script's own `vars` or
`sorted` ran (and, returning something else, Tab completed nothing and `n` stepped the job).
Now the `complete` op with no dotted name: the frame's own names, by plain-str lookups."""

from __future__ import annotations

import pytest
from conftest import WAIT, paused_job, wait_for
from textual.widgets import Input

from stepdbg.client.commands import is_python

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import sys
import torch
from torch import nn

def vars(*args):  # a script's own: each call is written down
    open(sys.argv[1], "a").write("vars\\n")
    return {}

def sorted(*args, **kwargs):
    open(sys.argv[1], "a").write("sorted\\n")
    return []

model = nn.Linear(4, 1)
n = 5
for step in range(3):
    model(torch.randn(8, 4)).sum().backward()
print("end", flush=True)
"""


def test_the_console_tells_a_variable_from_a_command_running_none_of_the_scripts_code(start_job, tmp_path):
    ran = tmp_path / "ran"
    with paused_job(start_job, tmp_path, SCRIPT, "--break", "step==1", script_args=(str(ran),)) as (job, c):
        assert is_python(c, "n") and not is_python(c, "c"), "n is the script's variable; c a command"
        assert c.attribute_names("", "mo") == ["model"] and "__name__" not in c.attribute_names("", "")
        assert "__name__" in c.attribute_names("", "__")
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and out.strip() == "end", (out, err)
    assert not ran.exists(), ran.read_text()


async def test_the_tuis_tab_completes_the_frames_names_running_none_of_the_scripts_code(tui_at_break, tmp_path):
    ran = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    async with tui_at_break("--break", "step==1", script=script, script_args=(str(ran),)) as (app, pilot):
        line = app.query_one("#repl", Input)
        await wait_for(pilot, lambda: "model" in getattr(line, "names", []), "the frame's names, for Tab")
        await pilot.press("e", *"mod", "tab")
        await wait_for(pilot, lambda: line.value == "model", f"model completed (the line: {line.value!r})")
    assert not ran.exists(), ran.read_text()
