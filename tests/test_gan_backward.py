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

import pytest
from conftest import WAIT, marked_line
from test_bundle_trust import copy_of, replay_here, saved  # noqa: F401 - the module's fixture

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


def test_its_bundle_replayed_elsewhere_says_it_cannot_tell_and_why(tmp_path, private_runtime_dir):
    """A bundle holds netD, the captured model, not netG: its replay cannot follow the backward
    into netG, and said 'a transient fault: skip this step' (the live replay named sqrt)."""
    job = run("--no-tui", "--break", "nan", "--on-break", "save", tmp_path=tmp_path)
    assert job.returncode == 0, job.stderr[-3000:]
    replay = subprocess.run([sys.executable, "-m", "stepdbg", "replay", str(tmp_path / "stepdbg-step7")],
                            capture_output=True, text=True, timeout=WAIT, cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr[-3000:]
    assert ("could not tell: the non-finite gradients are netG's, and the replay ran netD's forward and backward, "
            "which stay finite; netG's backward was not replayed") in replay.stdout, replay.stdout
    assert "transient" not in replay.stdout


@pytest.mark.parametrize("name", ["../x", "net D", "netD\x1b[2J", "a" * 101, "1net", ".netD", 5, ["netD"]])
def test_a_bundles_model_name_that_is_no_name_is_one_line_and_exit_1(saved, tmp_path, capsys, name):  # noqa: F811
    code, out, err = replay_here(copy_of(saved, tmp_path, model_name=name), capsys)
    assert code == 1 and "name is not" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_a_bundle_of_one_model_keeps_its_unnamed_modules(saved, tmp_path, capsys):  # noqa: F811
    code, out, err = replay_here(copy_of(saved, tmp_path, model_name=""), capsys)
    assert code == 0 and "replay of step 2" in out, err
