"""DDP, Lightning's DDP and FSDP2 models under many ranks (real torchrun on gloo, CPU): what
stepdbg runs on one paused rank never starts a collective the others are not in, and an
FSDP2 job pauses, summarizes and rewinds its shards as one job."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, marked_line
from test_ranks import FSDP, WAIT, finish, ranks_of, run_to_end, start

from stepdbg.client.tensor_text import format_summary

pytestmark = pytest.mark.slow  # real trainers and torchrun end to end (see pyproject: slow)


def test_a_replay_on_one_ddp_rank_leaves_the_job_unharmed(tmp_path, private_runtime_dir):
    """Rank 1's replica gets an inf weight at step 3. The replay on rank 1 alone runs the
    model inside DDP, not DDP itself (whose forward readies its reducer for a backward the
    replay never finishes, and may broadcast buffers to ranks that are not listening): it
    names the parameter, and the job then runs to its end on both ranks."""
    proc = start(tmp_path, "serve", "--break", "nan", script_args=("--inf-weight-at", "3", "--steps", "6", "--batchnorm"))
    with ranks_of(proc) as (r0, r1):
        assert r0.wait_paused(WAIT)["step"] == r1.wait_paused(WAIT)["step"] == 3
        rows = {r["name"]: r for r in r1.call("module_tree", timeout=WAIT)}  # the Model panel, on one rank
        assert rows["module.1"]["type"] == "BatchNorm1d" and rows["module.1"]["output_shape"] == [8, 8], rows
        replay = r1.call("replay", timeout=WAIT)
        first = replay["first_nonfinite"]
        assert (first["where"], first["tensor"]) == ("parameter", "3.weight"), replay["summary"]  # as DDP's module names it
        for c in (r0, r1):
            c.remove_break("nan")
        run_to_end(r0, r1)
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]


def test_a_ddp_rank_that_paused_for_anothers_nan_is_not_called_a_transient_fault(tmp_path, private_runtime_dir):
    """A NaN in rank 1's batch reaches rank 0's gradients through DDP's all-reduce. Rank 0's
    replay finds its own step finite: that is not "a transient fault" (a newcomer's walk),
    it is rank 1's break; rank 1's replay names the input, its advice said once."""
    proc = start(tmp_path, "serve", "--break", "nan", script_args=("--nan-at", "3", "--steps", "6"))
    with ranks_of(proc) as (r0, r1):
        assert r0.wait_paused(WAIT)["step"] == r1.wait_paused(WAIT)["step"] == 3
        mine = r0.call("replay", timeout=WAIT)
        assert (mine["first_nonfinite"], mine["reproduced"]) == (None, None), mine
        assert mine["verdict"].startswith("this rank's own step made no non-finite value: the break is rank 1's"), mine
        theirs = r1.call("replay", timeout=WAIT)
        assert (theirs["first_nonfinite"]["where"], theirs["reproduced"]) == ("input", True), theirs
        assert "data: the data" not in theirs["summary"] and theirs["advice"]["cause"] == "data", theirs
        for c in (r0, r1):
            c.end()
    code, _, err = finish(proc)
    assert code == 3, err[-2000:]


def test_lightning_ddp_pauses_both_ranks_before_the_update_and_ends_cleanly(tmp_path, private_runtime_dir):
    """Lightning runs forward and backward (with DDP's all-reduce) inside optimizer.step(closure):
    the coordinated pause must land after that backward, outside any collective."""
    pytest.importorskip("lightning")
    script = Path(__file__).parent / "fixtures" / "lightning_ddp.py"
    cmd = [sys.executable, "-m", "stepdbg", "serve", "-q", "--break", "step==2", "--report", str(tmp_path / "r.jsonl"),
           "torchrun", "--standalone", "--nproc_per_node=2", str(script)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    with ranks_of(proc) as (r0, r1):
        b0, b1 = r0.wait_paused(WAIT), r1.wait_paused(WAIT)
        assert b0 is not None and b1 is not None
        assert (b0["step"], b0["phase"]) == (b1["step"], b1["phase"]) == (2, "before_optimizer_step")
        run_to_end(r0, r1)
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished at global step 5") >= 1, err[-2000:]


def test_fsdp2_on_4_ranks_rewinds_its_sharded_state(tmp_path):
    """FSDP2 on 4 ranks: each rank's snapshot holds its shards of the parameters and of
    AdamW's state. A NaN in rank 1's batch at step 3; every rank rewinds to step 2's
    snapshot, and step 4 then starts from exactly step 2's state (RNG included): its global
    grad norm, computed by the script from the full gradients, equals step 2's."""
    cmd = [sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "rewind", "--keep-every", "2",
           "--report", str(tmp_path / "r.jsonl"), "torchrun", "--standalone", "--nproc_per_node=4", str(FSDP),
           "--nan-at", "3", "--steps", "6"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 4, err[-3000:]
    norms = {int(m.group(1)): m.group(2) for m in re.finditer(r"step (\d+) true grad norm (\S+)", out)}
    assert norms[3] == "nan" and norms[4] == norms[2] and norms[5] != "nan", norms
    for rank in range(4):
        events = [json.loads(line) for line in (tmp_path / f"r.rank{rank}.jsonl").read_text().splitlines()]
        (rewind,) = [e for e in events if e["event"] == "change" and e["what"] == "rewind"]
        assert (rewind["step"], rewind["to_step"]) == (3, 2), rewind


def test_fsdp2_pauses_as_one_at_a_nan_in_one_ranks_data_and_its_grad_norm_is_the_global_one(tmp_path,
                                                                                          private_runtime_dir):
    """FSDP2 (fully_shard, DTensor parameters), 2 ranks: a NaN in rank 1's batch at step 3
    pauses both ranks at the same step, outside any collective; the grad norm stepdbg
    records for each step is the true global norm (the script computes it from the full
    gradients and prints it)."""
    cmd = [sys.executable, "-m", "stepdbg", "serve", "--break", "nan", "--bundle-dir", str(tmp_path), "torchrun",
           "--standalone", "--nproc_per_node=2", str(FSDP), "--nan-at", "3", "--steps", "6"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    with ranks_of(proc) as (r0, r1):
        b0, b1 = r0.wait_paused(WAIT), r1.wait_paused(WAIT)
        assert (b0["step"], b0["phase"]) == (b1["step"], b1["phase"]) == (3, "before_optimizer_step"), (b0, b1)
        assert "rank 1's break at step 3" in b0["reason"] and b1["condition"] == "nan", (b0, b1)
        norms = {h["step"]: h["grad_norm"] for h in r0.get_history(10)}
        assert r1.evaluate("type(next(model.parameters())).__name__")["value"] == "'DTensor'"
        w = r1.call("summary", name="model[0].weight")  # Linear(8, 32) sharded on dim 0: rank 1 holds rows 16..31
        assert (w["shape"], w["shard"]["shape"], w["shard"]["stats_over"]) == ([32, 8], [16, 8], "this rank's shard"), w
        assert "(DTensor; this rank holds [16, 8], Shard(dim=0); statistics of that shard)" in format_summary(w)
        assert len(r1.call("slice", name="model[0].weight", index="0, :4", timeout=WAIT)) == 4  # of the shard
        replay = r1.call("replay", timeout=WAIT)  # the NaN is in its batch: named with no forward
        first = replay["first_nonfinite"]
        assert (first["where"], first["index"], replay["reproduced"]) == ("input", [0, 0], True), replay
        assert first.get("as", first["tensor"]) in ("batch", "args[0]") and first["count"] == 1, first  # (x: the loop's name)
        saved = r1.call("save", timeout=WAIT)  # the inputs, not the shards: offline, the input is named too
        assert saved["path"] == str(tmp_path / "stepdbg-step3-rank1"), saved
        offline = json.loads(subprocess.run([sys.executable, "-m", "stepdbg", "replay", "--json", saved["path"]],
                                            capture_output=True, text=True, timeout=WAIT, check=True).stdout)
        assert offline["first_nonfinite"]["index"] == [0, 0] and offline["reproduced"] is True, offline
        replay = r0.call("replay", timeout=WAIT)  # alone, its forward would wait for rank 1's shards forever
        assert replay["first_nonfinite"] is None and replay["summary"].startswith(
            "not replayed: its parameters are sharded DTensors (FSDP2)"), replay
        for c in (r0, r1):
            c.end()
    code, out, err = finish(proc)
    assert code == 3, err[-2000:]
    true = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"step (\d+) true grad norm ([\d.]+)", out)}
    assert sorted(norms) == [0, 1, 2] and all(abs(norms[s] - true[s]) < 1e-5 for s in norms), (norms, true)


def test_an_fsdp2_rank_that_aborts_ends_the_job_and_no_rank_prints_a_traceback(tmp_path, private_runtime_dir):
    """Rank 1 aborts at its NaN (--on-break abort); rank 0, waiting in an all-gather, had
    died with gloo's "Connection closed by peer" traceback. It is told through the job's
    store and ends with one line and the same exit code."""
    cmd = [sys.executable, "-m", "stepdbg", "--break", "nan", "--on-break", "abort", "--report",
           str(tmp_path / "r.jsonl"), "torchrun", "--standalone", "--nproc_per_node=2", str(FSDP), "--nan-at", "3",
           "--steps", "6"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    code, _, err = finish(proc)
    assert code == 3 and "Traceback" not in err, err[-3000:]
    assert "stepdbg[rank 1]: aborting (exit code 3) as asked by --on-break abort" in err, err[-3000:]
    if "stepdbg[rank 0]: rank 1 ended the job (its break at step 3 [nan] aborted it); this rank ends with it " \
            "(exit code 3)" in err:  # (else torchrun's SIGTERM reached rank 0 before its all-gather failed)
        ends = [json.loads(line) for line in (tmp_path / "r.rank0.jsonl").read_text().splitlines()]
        assert ends[-1]["event"] == "end" and ends[-1]["exit_code"] == 3, ends[-1]


def test_a_nan_born_in_an_fsdp2_forward_is_named_by_a_replay_every_rank_runs_together(tmp_path, private_runtime_dir):
    """Rank 1's batch holds a finite -1 that the model's first module takes the log of: the
    producer is an op in the forward. Alone, a rank's sharded forward would wait forever
    for the others' all-gathers; the job's replay asks every rank at once, each runs its own
    step's forward, and the rank that broke names the module, op and line."""
    from stepdbg.client.job import Job

    cmd = [sys.executable, "-m", "stepdbg", "serve", "--break", "nan", "torchrun", "--standalone",
           "--nproc_per_node=2", str(FSDP), "--nan-at", "3", "--steps", "6", "--log-input"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    with ranks_of(proc) as (r0, r1):
        b0, b1 = r0.wait_paused(WAIT), r1.wait_paused(WAIT)
        assert b0["step"] == b1["step"] == 3, (b0, b1)
        grads = "[p.grad.to_local().sum().item() for p in model.parameters()]"
        before = r1.evaluate(grads)["value"]
        replay = Job([r0, r1]).replay()
        first = replay["first_nonfinite"]
        assert (replay["rank"], first["op"], first["module"], first["where"]) == (1, "log", "0", "forward"), replay
        assert first["line"] == marked_line(FSDP, "log-here") and replay["reproduced"] is True, replay
        assert "every rank ran its forward together" in replay["ranks"][0], replay["ranks"]
        assert r1.evaluate(grads)["value"] == before  # the real gradients untouched
        for c in (r0, r1):
            c.cont()
        for c in (r0, r1):
            assert c.wait_exited(WAIT)["exit_code"] == 0
    code, _, err = finish(proc)
    assert code == 0, err[-2000:]


def test_a_headless_fsdp2_replay_is_run_by_every_rank_together_and_names_the_op(tmp_path, private_runtime_dir):
    """torchrun gives every rank `--on-break replay`; the rank that broke had said "not
    replayed: its parameters are sharded" (no console to ask every rank at once). It asks
    them through the job's store, as a pause does: each rank runs its step's forward."""
    cmd = [sys.executable, "-m", "stepdbg", "--break", "nan", "--on-break", "replay", "torchrun", "--standalone",
           "--nproc_per_node=2", str(FSDP), "--nan-at", "3", "--steps", "6", "--log-input"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    code, _, err = finish(proc)
    assert code == 0 and "not replayed: its parameters are sharded" not in err, err[-3000:]
    assert (f"stepdbg[rank 1]: replay of step 3: log in 0 (Log) produced the first non-finite value (forward), "
            f"at {FSDP}:{marked_line(FSDP, 'log-here')}") in err, err[-3000:]
    assert "stepdbg[rank 0]: replay of step 3: the replay produced no non-finite value" in err, err[-3000:]
