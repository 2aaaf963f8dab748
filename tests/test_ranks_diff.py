"""`diff ranks` on real `torchrun --nproc_per_node=2` jobs (gloo, CPU): every rank's parameters
and gradients fingerprinted (the `replicas` op) and compared, the first whose replicas differ
named with the ranks; no false positive on a healthy DDP job; FSDP2 shards are not replicas."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from test_ranks import FSDP, WAIT, both_ranks, finish, ranks_of, run_to_end, start

from stepdbg import client
from stepdbg.client import replicas
from stepdbg.client.connection import ClientError
from stepdbg.client.job import Job
from stepdbg.wire import sessions

pytestmark = pytest.mark.slow  # real trainers and torchrun end to end (see pyproject: slow)


def test_diff_ranks_at_the_console_names_the_weight_rank_1_changed_and_rank_1(tmp_path, private_runtime_dir):
    """Rank 1 alone adds 1e-3 to module[-1].weight[0, 0] at step 2 (DDP never syncs
    parameters after it starts). At step 3, `diff ranks` in `stepdbg attach JOB` names that
    weight and rank 1, bitwise; with --atol 0.01 the replicas agree; a bad tolerance is said."""
    proc = start(tmp_path, "serve", "--break", "step==3", script_args=("--nudge-at", "2", "--steps", "5"))
    watchers = both_ranks(proc)
    try:
        for w in watchers:
            assert w.wait_paused(WAIT)["step"] == 3
        job_id = sessions.listing()[0].job_id
        lines = "diff ranks\ndiff ranks --atol 0.01\ndiff ranks --atol -1\ndiff ranks --json\nh\nc\n"
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", job_id], input=lines,
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        text = out.stderr
        found = re.search(r"diff ranks: step 3 \(before_optimizer_step\): module\.2\.weight \(parameter\) is the first whose "
                          r"replicas differ: rank 1 differs from rank 0: the bytes differ; max \|rank 1 - rank 0\| "
                          r"(\S+), ", text)
        assert found, text
        assert abs(float(found.group(1)) - 1e-3) < 1e-5, found.group(0)  # weight[0, 0] is one of its samples
        assert "(no value is held by most ranks: rank 0's is taken as the reference)" in text  # two ranks
        assert ("diff ranks: step 3 (before_optimizer_step): all 2 ranks hold the same parameters and gradients: "
                "8 tensors compared on each, within atol 0.01, rtol 0") in text
        shown = [ln for ln in (ROOT / "docs" / "replay.md").read_text().splitlines() if ln.startswith("diff ranks: ")]
        assert len(shown) == 2 and all(ln in text for ln in shown), shown  # the docs' example is this run's
        assert "error: --atol needs a number >= 0 (e.g. 1e-6), not '-1'" in text
        assert "error: diff ranks [--atol X] [--rtol Y]: '--json'?" in text
        assert "diff ranks [--atol X] [--rtol Y]  (a distributed job)" in text  # the help
        for w in watchers:
            assert w.wait_exited(WAIT)["exit_code"] == 0
    finally:
        for w in watchers:
            w.close()
    code, out_, err = finish(proc)
    assert code == 0 and out_.count("finished") == 2, err[-2000:]


def test_a_healthy_ddp_job_holds_the_same_replicas_at_every_pause_point(tmp_path, private_runtime_dir, monkeypatch):
    """No false positive: from step 2's update (gradients after DDP's all-reduce) through
    step 3's pause points to its after_backward, the parameters agree, and the gradients
    wherever there are any, bitwise, compared a page of 3 fingerprints at a time. The op
    refuses arguments out of its range, and a rank attached alone says where `diff ranks` works."""
    monkeypatch.setattr(replicas, "PAGE", 3)  # 8 tensors: three pages
    proc = start(tmp_path, "serve", "--break", "step==2", script_args=("--steps", "4"))
    with ranks_of(proc) as clients:
        job = Job(clients)
        seen = []
        brk = [c.wait_paused(WAIT) for c in clients][0]
        while True:
            r = replicas.diff_ranks(job)
            grads = brk["phase"] in ("after_backward", "before_optimizer_step", "after_optimizer_step")
            what = "the same parameters and gradients" if grads else "the same parameters (no gradients yet)"
            assert r["first_divergence"] is None and r["summary"] == (
                f"step {brk['step']} ({brk['phase']}): all 2 ranks hold {what}: {8 if grads else 4} tensors compared "
                "on each, bitwise"), r
            seen.append((brk["step"], brk["phase"]))
            if brk["phase"] == "after_backward":
                break
            job.next_phase()
            pauses = [c.wait_paused(WAIT) for c in clients]
            assert len({(b["step"], b["phase"]) for b in pauses}) == 1, pauses
            brk = pauses[0]
        assert list(dict.fromkeys(seen)) == [(2, "before_optimizer_step"), (2, "after_optimizer_step"), (3, "before_forward"),
                        (3, "after_forward"), (3, "before_backward"), (3, "after_backward")], seen
        page = clients[1].replica_fingerprints(6, 3)
        assert (page["rank"], page["total"], page["next"], [e["name"] for e in page["entries"]]) == (
            1, 8, None, ["module.2.weight.grad", "module.2.bias.grad"]), page
        assert set(page["entries"][0]["fp"]) >= {"shape", "dtype", "hash", "stats", "samples"}
        for bad in ({"start": -1}, {"limit": 0}, {"limit": 4097}, {"start": "0"}, {"begin": 0}):
            with pytest.raises(ClientError) as e:
                clients[0].call("replicas", **bad)
            assert e.value.code == "bad_args", (bad, e.value)
        alone = replicas.diff_ranks(clients[1])
        assert alone["summary"] == (f"nothing compared: attached to rank 1 alone: `stepdbg attach {clients[1].session['job_id']}` "
                                    "attaches to all 2 ranks, where diff ranks compares their replicas"), alone
        run_to_end(*clients)
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]


def test_fsdp2_shards_are_not_compared_as_replicas(tmp_path, private_runtime_dir):
    """FSDP2's parameters are DTensors, each rank's a shard: `diff ranks` says so in one
    line and reads nothing (reading a DTensor whole would be a collective)."""
    cmd = [sys.executable, "-m", "stepdbg", "serve", "--report", str(tmp_path / "r.jsonl"), "--break", "step==1",
           "torchrun", "--standalone", "--nproc_per_node=2", str(FSDP), "--steps", "3"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    with ranks_of(proc) as clients:
        for c in clients:
            assert c.wait_paused(WAIT)["step"] == 1
        r = replicas.diff_ranks(Job(clients))
        assert r["first_divergence"] is None and r["compared"] == 0, r
        assert r["summary"] == ("nothing compared: its parameters are sharded DTensors (FSDP2), so each rank holds its "
                                "own shard, not a replica (diff ranks compares the replicas of DDP-style data "
                                "parallelism)"), r
        run_to_end(*clients)
    code, out, err = finish(proc)
    assert code == 0, err[-2000:]


async def test_diff_ranks_on_the_tuis_repl_line_over_the_whole_job(tmp_path, private_runtime_dir):
    """The TUI over both ranks (its JobSource, asyncio): `diff ranks` typed on the REPL line
    names the weight rank 1 changed and rank 1, under the line."""
    from conftest import text_of, wait_for

    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp
    from stepdbg_tui.job_source import JobSource

    proc = start(tmp_path, "serve", "--break", "step==3", script_args=("--nudge-at", "2", "--steps", "5"))
    try:
        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:  # (as test_ranks_tui waits for them)
            assert time.monotonic() < deadline and proc.poll() is None, "the ranks never announced themselves"
            time.sleep(0.1)
        source = JobSource([await AsyncClient.connect(i.address, token=i.token) for i in client.find_job()])
        app = StepdbgApp(source)
        said = ("module.2.weight (parameter) is the first whose replicas differ: rank 1 differs from rank 0: "
                "the bytes differ")
        async with app.run_test(size=(120, 40)) as pilot:

            def no_error(pred):  # (an error under the line fails at once, with its words)
                def holds() -> bool:
                    assert "error" not in text_of(app, "#repl-out").lower(), text_of(app, "#repl-out")
                    return pred()
                return holds

            await wait_for(pilot, no_error(lambda: app.status.get("state") == "paused"), "the pause")
            await pilot.click("#repl")
            await pilot.press(*"diff ranks", "enter")
            await wait_for(pilot, no_error(lambda: said in " ".join(text_of(app, "#repl-out").split())), "the diff")
            assert "diff ranks: step 3 (before_optimizer_step): " in text_of(app, "#repl-out")
            await source.cont()
            await wait_for(pilot, no_error(lambda: "job ended" in app.connection), "the job's end")
            await pilot.press("q")
        await source.close()
    finally:
        code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]


def test_diff_ranks_in_a_job_of_one_process_says_so_in_one_line(tmp_path):
    """At the job's own console of a one-process job there are no replicas: one line says
    so (the console reads on, and `continue` ends the job as usual)."""
    from test_console import LOOP, start_script

    proc = start_script(tmp_path, LOOP)
    out, err = proc.communicate("diff ranks\ncontinue\n", timeout=WAIT)
    assert proc.returncode == 0 and out.strip() == "done", err[-2000:]
    assert ("(stepdbg) diff ranks: nothing compared: this job is one process: diff ranks compares the replicas of a "
            "distributed job's ranks\n") in err, err[-2000:]
