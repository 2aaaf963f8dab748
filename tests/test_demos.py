"""Every failure demo, run through the real CLI: stepdbg stops where it should and says what is true."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import DEMOS, ROOT, WAIT, marked_line, run_stepdbg

FIXTURES = ROOT / "tests" / "fixtures"

pytestmark = pytest.mark.slow  # real processes end to end (see pyproject: slow)


def test_nan_from_log_is_traced_to_the_producing_module_op_and_line(tmp_path):
    """Row 1: the first break is at step 30, before backward; the replay names the log."""
    script = DEMOS / "nan_log.py"
    run = run_stepdbg(tmp_path, "--break", "nan", "--on-break", "replay", "--on-break", "abort",
                      script_args=(str(script),))
    assert run.returncode == 3, run.stderr
    (brk,) = run.of("break")
    assert brk["step"] == 30
    assert brk["phase"] == "before_backward"
    assert brk["condition"] == "nan"
    assert brk["scalars"]["loss"] == "nan"
    assert "born in the forward" in brk["reason"]
    (replay,) = run.of("replay")
    first = replay["first_nonfinite"]
    assert first["module"] == "features"  # the producer, not head.0 which passed it on
    assert first["op"] == "log"
    assert first["line"] == marked_line(script, "nan-here")
    assert first["file"] == str(script)
    assert replay["reproduced"] is True and "reproduced from the same state" in run.stderr
    assert run.of("end")[0]["exit_code"] == 3
    assert "Traceback" not in run.stderr


def test_skip_on_device_skips_the_nan_step_and_the_run_goes_on(tmp_path):
    """Row 1 with fused AdamW and --skip-on-device: step 30's update is skipped by the
    optimizer's own kernel, the break comes at step 31 naming step 30, its replay names the
    log, and the run ends with a finite loss (plain, it is NaN to the end)."""
    script = DEMOS / "nan_log.py"
    run = run_stepdbg(tmp_path, "--skip-on-device", "--on-break", "replay", script_args=(str(script), "--fused"))
    assert run.returncode == 0, run.stderr
    (brk,) = run.of("break")
    assert (brk["step"], brk["details"]["skipped_on_device"]) == (31, 30), brk
    (replay,) = run.of("replay")
    assert (replay["step"], replay["first_nonfinite"]["op"]) == (30, "log"), replay
    last = [line for line in run.stdout.splitlines() if line.startswith("step ")][-1]
    assert last.startswith("step 50 loss ") and last.split()[-1] != "nan", run.stdout


def test_exploding_gradient_breaks_on_grad_norm_and_is_reported_once(tmp_path):
    """Row 2: grad_norm>1000 fires at step 2 and stays true; one break, the rest counted."""
    script = DEMOS / "lr_explode.py"
    run = run_stepdbg(tmp_path, "--break", "grad_norm>1000", script_args=(str(script),))
    assert run.returncode == 0, run.stderr
    (brk,) = run.of("break")
    assert brk["step"] == 2
    assert brk["phase"] == "before_optimizer_step"
    assert brk["scalars"]["grad_norm"] > 1000
    assert brk["where"]["line"] == marked_line(script, "update")
    assert run.of("end")[0]["repeats_not_reported"]["grad_norm>1000"] > 0


def test_lowering_the_lr_live_and_pinned_lets_the_loss_recover(tmp_path):
    """Row 2 at the console: at the break, 'lr 0.01 pin', remove the break, continue.

    The loss falls from its value at the break, and the StepLR scheduler (gamma 0.9
    every 2 epochs) does not undo the pinned LR.
    """
    script = DEMOS / "lr_explode.py"
    run = run_stepdbg(tmp_path, "--break", "grad_norm>200", "--on-break", "pause",
                      script_args=(str(script),), env={"STEPDBG_CONSOLE": "1"},
                      stdin="lr 0.01 pin\nbreak rm grad_norm>200\nc\n")
    assert run.returncode == 0, run.stderr
    (brk,) = run.of("break")
    assert brk["step"] == 1
    lr_change, rm_change = run.of("change")
    assert lr_change["what"] == "lr" and lr_change["pinned"] is True and lr_change["lr"] == 0.01
    assert rm_change == {**rm_change, "what": "break_remove", "spec": "grad_norm>200"}
    epochs = [line.split() for line in run.stdout.splitlines() if line.startswith("epoch")]
    losses = [float(e[5]) for e in epochs]
    assert all(e[7] == "0.01" for e in epochs[1:]), epochs  # the pin held through 3 scheduler steps
    assert losses[-1] < brk["scalars"]["loss"] / 10
    assert losses[-1] < losses[-2] < losses[-3]


def test_missing_zero_grad_is_said_in_plain_words(tmp_path):
    """Row 3: at step 1's backward the gradients of step 0 are still there."""
    script = DEMOS / "no_zero_grad.py"
    run = run_stepdbg(tmp_path, "--break", "stale_grad", script_args=(str(script),))
    assert run.returncode == 0, run.stderr
    (brk,) = run.of("break")
    assert brk["step"] == 1
    assert brk["phase"] == "before_backward"
    assert "zero_grad() was not called" in brk["reason"]
    assert brk["where"]["line"] == marked_line(script, "accumulates")


def test_slow_dataloader_breaks_on_data_wait(tmp_path):
    """Row 5: every 5th batch holds a sample that takes 0.6s; steps 4, 9, 14, 19 break.
    The sample's 0.6 s is 600 s on a moved clock (moved_clock.py), and the break data_wait>300:
    a plain batch of a step a busy machine starves 0.3 s broke data_wait>0.3 too (issue 47)."""
    script = DEMOS / "slow_loader.py"
    run = run_stepdbg(tmp_path, "--break", "data_wait>300",
                      script_args=(str(FIXTURES / "moved_clock.py"), str(script), "--workers", "0"))
    assert run.returncode == 0, run.stderr
    steps = [b["step"] for b in run.of("break")]
    assert steps == [4, 9, 14, 19]
    assert all(b["phase"] == "before_forward" and b["scalars"]["data_wait"] > 300 for b in run.of("break"))


def test_hung_dataloader_is_reported_by_the_watchdog_with_stacks_and_settings(tmp_path):
    """Row 5, hang: a worker never returns; stall>6 records stacks and loader settings, abort ends it.
    (stall>2 fired once on the loaded full suite in a step's opt.step, starved 2 s by the
    machine's load: a true stall of 2 s, not the hang this test is about.)"""
    script = DEMOS / "slow_loader.py"
    run = run_stepdbg(tmp_path, "--break", "stall>6", "--on-break", "abort",
                      script_args=(str(script), "--hang"), timeout=WAIT)
    assert run.returncode == 3, run.stderr
    (brk,) = run.of("break")
    assert brk["condition"] == "stall>6"
    assert brk["where"]["line"] == marked_line(script, "loader-loop")
    # the reason names the script's line, not the innermost frame of torch's DataLoader
    assert f"the training thread waits at {script}:{marked_line(script, 'loader-loop')} (for x, y in loader:" \
        in brk["reason"], brk["reason"]
    loader = brk["details"]["dataloader"]
    assert loader["num_workers"] == 2 and loader["cpu_count"] >= 1
    assert len(loader["workers"]) == 2
    assert any(t["main"] for t in brk["details"]["threads"])
    assert run.of("end")[0]["exit_code"] == 3


def test_shape_error_post_mortem_shows_frame_shapes_and_module(tmp_path):
    """Row 8: the break is at the failing line, with every tensor local's shape and the Linear's."""
    script = DEMOS / "shape_error.py"
    run = run_stepdbg(tmp_path, "--break", "exception", script_args=(str(script),))
    assert run.returncode == 1
    assert "mat1 and mat2 shapes cannot be multiplied" in run.stderr  # the script's own traceback
    (brk,) = run.of("break")
    assert brk["phase"] == "exception"
    assert brk["where"]["line"] == marked_line(script, "shape-crash")
    d = brk["details"]
    assert d["locals"]["flat"]["shape"] == [8, 512]
    assert d["module"]["name"] == "head" and d["module"]["params"]["weight"] == [10, 128]
    assert "inner dimensions" in d["explanation"]


def test_inplace_error_replay_points_at_the_forward_op(tmp_path):
    """Row 10: the backward fails in SigmoidBackward0; the replay names the sigmoid's line and module."""
    script = DEMOS / "inplace_error.py"
    run = run_stepdbg(tmp_path, "--break", "exception", "--on-break", "replay", script_args=(str(script),))
    assert run.returncode == 1
    (brk,) = run.of("break")
    assert "modified by an inplace operation" in brk["reason"]
    assert "changed in place" in brk["details"]["explanation"]
    (replay,) = run.of("replay")
    op = replay["failing_op"]
    assert op["op"] == "SigmoidBackward0"
    assert op["module"] == "1" and op["module_type"] == "Gate"
    assert op["line"] == marked_line(script, "saved")


@pytest.mark.parametrize("demo", ["nan_log.py", "lr_explode.py", "no_zero_grad.py", "inplace_error.py"])
def test_demo_runs_plainly_without_stepdbg(demo):
    """The demos are ordinary scripts: they run (or fail) the same way without the debugger."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(DEMOS / demo)], capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == (1 if demo == "inplace_error.py" else 0), proc.stderr


def test_a_loader_stalled_before_its_first_batch_is_named_with_its_settings(tmp_path):
    """Workers that never deliver the first batch (a hang in the dataset, or a start-up
    slowed by a busy machine): the stall break names the loader's settings all the same (the
    iterator was known only from its first batch on)."""
    script = tmp_path / "first_batch_hangs.py"
    script.write_text(
        "import time, torch\nfrom torch.utils.data import DataLoader, Dataset\n"
        "class Hangs(Dataset):\n    def __len__(self): return 8\n"
        "    def __getitem__(self, i):\n        time.sleep(3600)\n"
        "for x in DataLoader(Hangs(), batch_size=4, num_workers=1):\n    pass\n")
    run = run_stepdbg(tmp_path, "--break", "stall>1", "--on-break", "abort", script_args=(str(script),), timeout=WAIT)
    assert run.returncode == 3, run.stderr
    (brk,) = run.of("break")
    loader = brk["details"]["dataloader"]
    assert loader is not None and loader["num_workers"] == 1 and len(loader["workers"]) == 1, brk["details"]


def test_a_transient_nan_is_not_reproduced_and_the_run_goes_on(tmp_path):
    """Row 14: a NaN the replay does not make again from the same state is transient; no op
    is blamed for it (the loss was, before); --on-break skip and the run ends healthy."""
    script = DEMOS / "transient_fault.py"
    run = run_stepdbg(tmp_path, "--break", "nan", "--on-break", "replay", "--on-break", "skip",
                      script_args=(str(script),))
    assert run.returncode == 0, run.stderr
    (brk,) = run.of("break")
    assert (brk["step"], brk["phase"]) == (20, "before_backward")
    (replay,) = run.of("replay")
    assert replay["reproduced"] is False and replay["first_nonfinite"] is None, replay
    assert "not reproduced from the same state: a transient fault" in run.stderr
    assert "mse_loss" not in run.stderr
    assert run.stdout.splitlines()[-1] == "done" and "step 30 loss nan" not in run.stdout


def test_a_bad_record_in_one_ranks_shard_is_named_there_and_not_blamed_elsewhere(tmp_path):
    """Row 15: 2 DDP ranks on gloo, a NaN in dataset row 201 (rank 1's shard under the
    DistributedSampler, its step 6). Rank 1's replay names the record; rank 0, whose NaN
    gradients came through the all-reduce, is not told its fault is transient."""
    script = DEMOS / "ddp_nan.py"
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--break", "nan", "--on-break", "replay", "torchrun",
                          "--standalone", "--nproc_per_node=2", str(script)], capture_output=True, text=True,
                         timeout=180, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert run.returncode == 0 and script.read_text().count("# @bad-record") == 1, run.stderr[-3000:]
    assert "stepdbg[rank 1]: replay of step 6: the data: xb already holds 1 non-finite value, the first " \
           "at [4, 3] (dataset index 201)" in run.stderr, run.stderr[-3000:]
    assert "stepdbg[rank 0]: replay of step 6: the replay produced no non-finite value\n  not on this rank: its " \
           "own forward and backward, replayed, stay finite" in run.stderr, run.stderr[-3000:]
    assert "transient fault (a flaky device" not in run.stderr
