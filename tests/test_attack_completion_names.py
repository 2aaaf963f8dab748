"""Tab after a dot completes a name of the paused frame as Python spells names (attacking
b3a8d34's `complete` op over the wire): a unicode identifier, `été.w<Tab>`, was refused by the
job ('complete takes a dotted name and the start of an attribute, not 'été' and 'w'') and never
found by the REPL line's or the console prompt's pattern ([A-Za-z_] first), though `été` is a
name Python takes. The job's answer to odd names stays one line, and a running job says so."""

from __future__ import annotations

import pytest
from conftest import WAIT, paused_job, run_past

from tui.repl_complete import AFTER_DOT, attribute_names_now

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import os, sys, threading
import torch
from torch import nn

été = nn.Linear(2, 2)
model = nn.Linear(4, 1)
for step in range(3):
    model(torch.randn(8, 4)).sum().backward()
while not os.path.exists(sys.argv[1]):  # (running until the test has asked)
    threading.Event().wait(0.05)
print("end", flush=True)
"""


def test_a_unicode_name_completes_and_odd_names_are_one_line(start_job, tmp_path):
    with paused_job(start_job, tmp_path, SCRIPT, "--break", "step==1", script_args=(str(tmp_path / "asked"),)) as (job, c):
        typed = AFTER_DOT.search("x = été.w")
        assert typed is not None and typed.groups() == ("été", "w")
        assert attribute_names_now(c, *typed.groups()) == ["weight"]
        for name, prefix in [("1x", ""), ("model..x", ""), ("__class__.__mro__", ""), ("a" * 499, "")]:
            words = attribute_names_now(c, name, prefix)
            assert isinstance(words, str) and "\n" not in words and len(words) < 700, (name, words)
        assert attribute_names_now(c, "model.__class__.__mro__", "") == []  # (a descriptor: not followed)
        c.cont()
        run_past(c, 3)
        words = attribute_names_now(c, "model", "w")
        assert words == "attributes complete at a pause (the job is running; pause it first)", words
        (tmp_path / "asked").touch()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and out.strip() == "end", (out, err)
