"""The replay on the shapes of public scripts (issue 44 item 10): pytorch/examples' VAE and
DCGAN end in an exception (binary_cross_entropy refuses a NaN input), not a NaN loss; the
replay found the value but gave no verdict. A GAN's two models both keep their layers in
`main`: a module is named from its model (`netD.main.0`), not `main.0`, which both have."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import marked_line, run_stepdbg

from stepdbg.agent.replay.verdict import REPRODUCED, REPRODUCED_AT

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_vae_whose_loss_refuses_a_nan_names_the_data_with_a_verdict(tmp_path):
    script = FIXTURES / "vae_shape.py"
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--break", "exception", "--on-break", "replay",
                      script_args=(str(script),))
    assert run.returncode == 1 and "all elements of input should be between 0 and 1" in run.stderr, run.stderr[-2000:]
    (brk,) = run.of("break")
    (replay,) = run.of("replay")
    first = replay["first_nonfinite"]
    assert brk["phase"] == "exception" and (first["where"], first["sample"]) == ("input", 37), first
    # named by the variable of train(), which called the model with it (not loss_function's x)
    assert (first["tensor"], first["line"]) == ("data", marked_line(script, "enters")), first
    assert (replay["reproduced"], replay["verdict"]) == (True, REPRODUCED_AT["input"]), replay
    assert f"\n  {REPRODUCED_AT['input']}" in run.stderr  # (the data, said: not `the model, the data or the state`)


def test_a_gans_module_is_named_from_its_model(tmp_path):
    script = FIXTURES / "gan_shape.py"
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "exception", "--on-break", "replay",
                      script_args=(str(script),))
    assert run.returncode == 1 and "all elements of input should be between 0 and 1" in run.stderr, run.stderr[-2000:]
    (replay,) = run.of("replay")
    first = replay["first_nonfinite"]
    assert (first["where"], first["tensor"]) == ("parameter", "netD.main.0.weight"), first
    assert (replay["reproduced"], replay["advice"]["cause"]) == (True, "divergence"), replay
    assert "netD.main.0.weight" in run.stderr


def test_a_nanogpt_shaped_script_under_doctor_names_the_op_of_its_poisoned_micro_batch(tmp_path):
    """nanoGPT's shape (top level, get_batch from a memmap, `loss / accum`, the next batch
    fetched between forward and backward, GradScaler, clipping): iteration 5's second
    micro-batch makes a NaN in the model. doctor reports the break as a finding with what the
    replay of that micro-batch found: the log, at its line, reproduced."""
    import json
    import subprocess
    import sys

    import numpy as np
    from conftest import ROOT, WAIT

    rng = np.random.default_rng(0)
    rng.integers(0, 63, size=4000, dtype=np.uint16).tofile(tmp_path / "train.bin")
    rng.integers(0, 63, size=1000, dtype=np.uint16).tofile(tmp_path / "val.bin")
    script = FIXTURES / "nanogpt_shape.py"
    got = subprocess.run([sys.executable, "-m", "stepdbg", "doctor", "--json", "--steps", "8", "--report",
                          str(tmp_path / "report.jsonl"), sys.executable, str(script), str(tmp_path), "0", "5"],
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, stdin=subprocess.DEVNULL)
    out = json.loads(got.stdout)
    (nan,) = [f for f in out["findings"] if f["rule"] == "nonfinite"]
    assert got.returncode == 1 and nan["step"] == 5, out
    first = nan["data"]["replay"]["first_nonfinite"]
    assert (first["where"], first["op"], first["line"]) == ("forward", "log", marked_line(script, "nan-op")), first
    assert nan["data"]["replay"]["verdict"] == REPRODUCED and "log met a value outside its domain" in nan["advice"], nan


@pytest.mark.parametrize("loss", ["BCELoss", "BCEWithLogitsLoss"])
def test_a_nan_born_in_a_gans_generator_names_the_generators_op_not_the_data(tmp_path, loss):
    """DCGAN's shape: the generator's log makes a NaN, `fake` holds it and the discriminator
    is fed `fake.detach()`. Its input is the generator's output, not the data: the replay
    names netG's log at its line (it said 'the data: args[0] already holds 6 non-finite
    values'). BCELoss refuses the NaN (an exception break); BCEWithLogitsLoss makes a NaN loss."""
    script = FIXTURES / "gan_generator_nan.py"
    breaks = ("--break", "exception") if loss == "BCELoss" else ("--break", "nan", "--on-break", "abort")
    run = run_stepdbg(tmp_path, "--no-tui", *breaks[:2], "--on-break", "replay", *breaks[2:],
                      script_args=(str(script), *(["bce"] if loss == "BCEWithLogitsLoss" else [])))
    (replay,) = run.of("replay")
    first = replay["first_nonfinite"]
    assert (first["where"], first["module"], first["module_type"], first["op"], first["line"]) == \
        ("forward", "netG", "Generator", "log", marked_line(script, "nan-op")), first
    assert first["fed"] == {"model": "netG", "into": "netD", "as": "args[0]"}, first
    assert (replay["reproduced"], replay["advice"]["cause"]) == (True, "domain"), replay
    assert "netD's input args[0] is netG's output, not the data" in run.stderr, run.stderr[-2000:]
    if loss == "BCEWithLogitsLoss":  # the break's own line, before any replay: netG's, not the data's
        (brk,) = run.of("break")
        assert "it is netG's output, born in netG's forward" in brk["reason"], brk
        assert "came with the data" not in run.stderr and brk["details"]["fed_by"] == "netG", brk


SAID = {"warmup and clipping": "Lower the learning rate (lr X pin): the loop already warms it up and clips the "
                               "gradients; the damage",
        "clipping": "Lower the learning rate (lr X pin), add warmup (the loop already has gradient clipping);",
        "warmup": "Lower the learning rate (lr X pin), add gradient clipping (the loop already has warmup);"}


@pytest.mark.parametrize(("has", "args"), [("warmup and clipping", ()), ("clipping", ("nowarm",)),
                                           ("warmup", ("measure",)), ("warmup and clipping", ("value",))])
def test_the_divergence_advice_asks_only_for_what_the_loop_lacks(tmp_path, has, args):
    """The replay's advice for a divergence said "add warmup and gradient clipping" to loops
    that had both (nanoGPT's train.py has both). It now reads the loop's steps: the LR rising
    over steps running is a warmup; clip_grad_norm_ to a finite norm or clip_grad_value_ in
    most of the last steps is clipping (to an infinite norm it only reads the norm: none)."""
    script = FIXTURES / "warm_clip_diverges.py"
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", script_args=(str(script), *args))
    (replay,) = run.of("replay")
    assert replay["advice"]["cause"] == "divergence", replay
    if "measure" in args:  # clip_grad_norm_ to inf of finite gradients whose norm overflows makes them NaN (inf/inf)
        assert replay["verdict"].startswith("not a transient fault: the backward's gradients are finite") and \
            replay["reproduced"] is None, replay  # (it said "a transient fault ... run it on other hardware")
    said = SAID[has]
    assert said in replay["advice"]["text"] and said in " ".join(run.stderr.split()), run.stderr[-2000:]
