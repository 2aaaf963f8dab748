"""A NaN born in the generator's backward, at the generator's step (pytorch/examples' DCGAN
shape, a top-level script): the step model captured netD's forward (`netD(fake)`), whose
backward, replayed, is finite; the gradients that are not are netG's. The replay goes on
into netG's backward from the gradient netD's input took (replay/fed_backward.py) and names
the op, module and line; it said "not reproduced: a transient fault, skip this step"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import WAIT, marked_line

FIXTURE = Path(__file__).parent / "fixtures" / "gan_backward_nan.py"


def run(*stepdbg_args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "stepdbg", *stepdbg_args, sys.executable, str(FIXTURE)] if stepdbg_args \
        else [sys.executable, str(FIXTURE)]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT)


def test_the_replay_names_the_generators_backward_op_and_changes_nothing(tmp_path, private_runtime_dir):
    report = tmp_path / "r.jsonl"
    plain = run(tmp_path=tmp_path)
    debugged = run("--no-tui", "--break", "nan", "--on-break", "replay", "--report", str(report), tmp_path=tmp_path)
    assert plain.returncode == debugged.returncode == 0, debugged.stderr[-3000:]
    assert debugged.stdout == plain.stdout  # the replay ran netG's forward and backward again: no number moved
    line = marked_line(FIXTURE, "sqrt")
    assert (f"replay of step 7: sqrt (SqrtBackward0) in netG (Generator) produced the first non-finite value "
            f"(backward), at {FIXTURE}:{line}") in debugged.stderr, debugged.stderr[-3000:]
    assert "transient" not in debugged.stderr
    (replay,) = [json.loads(ln) for ln in report.read_text().splitlines() if '"event": "replay"' in ln]
    first = replay["first_nonfinite"]
    assert (first["where"], first["op"], first["module"], first["line"]) == ("backward", "sqrt", "netG", line), first
    assert first["through"] == {"model": "netG", "into": "netD", "as": "fake"}, first
    assert replay["reproduced"] is True and replay["advice"]["cause"] == "domain", replay
    assert any("replayed on into netG's" in n for n in replay.get("notes", [])), replay
