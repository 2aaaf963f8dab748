"""Following a GAN's generator step's backward on into netG (replay/fed_backward.py) where
that cannot find netG's op: a NaN the program wrote into netG's gradient is not said to
be where the backward was not followed, and a netG whose forward raises when run again
(ValueError, not only RuntimeError) leaves stepdbg's hooks on: it said "internal error in
the optimizer hook, which is now off" and the replay never reported. A compiled netG is run
out of torch.compile's wrapper, as the captured model is: dynamo compiled the replay's own
code, warned of its graph breaks in the job's stderr, and named the module netG._orig_mod."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import WAIT, marked_line

FIXTURE = Path(__file__).parent / "fixtures" / "gan_feeder_tricks.py"


def run(mode: str, tmp_path: Path, debugged: bool = True) -> subprocess.CompletedProcess[str]:
    job = [sys.executable, str(FIXTURE), mode]
    cmd = [sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "replay", *job] if debugged \
        else job
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT)


def test_a_nan_written_into_the_generators_gradient_is_not_blamed_on_a_backward_not_followed(
        tmp_path, private_runtime_dir):
    plain, done = run("poke", tmp_path, debugged=False), run("poke", tmp_path)
    assert plain.returncode == done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == plain.stdout
    assert ("could not tell: the non-finite gradients are netG's, and the replay ran netD's forward and backward "
            "and on into netG's backward from netD's input, which all stay finite: they reached netG's gradients "
            "another way") in done.stderr, done.stderr[-3000:]
    assert "not replayed" not in done.stderr and "transient" not in done.stderr


def test_a_generator_whose_forward_raises_when_run_again_leaves_stepdbg_on(tmp_path, private_runtime_dir):
    plain, done = run("once", tmp_path, debugged=False), run("once", tmp_path)
    assert plain.returncode == done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == plain.stdout
    assert "internal error" not in done.stderr, done.stderr[-3000:]
    assert ("replay of step 7: the replay produced no non-finite value (netG's backward was not replayed: "
            "ValueError: netG ran twice in iteration 3)") in done.stderr, done.stderr[-3000:]


def test_a_compiled_generator_is_replayed_out_of_its_wrapper(tmp_path, private_runtime_dir):
    plain, done = run("compiled", tmp_path, debugged=False), run("compiled", tmp_path)
    assert plain.returncode == done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == plain.stdout
    assert (f"replay of step 7: sqrt (SqrtBackward0) in netG (Generator) produced the first non-finite value "
            f"(backward), at {FIXTURE}:{marked_line(FIXTURE, 'sqrt')}") in done.stderr, done.stderr[-3000:]
    assert "stepdbg/agent" not in done.stderr, done.stderr[-3000:]  # (dynamo's warnings about stepdbg's code)
