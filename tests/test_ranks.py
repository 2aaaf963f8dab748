"""Many ranks: real `torchrun --nproc_per_node=2` jobs on gloo (CPU), each rank with an agent."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from conftest import WAIT as CONFTEST_WAIT

from stepdbg import client
from stepdbg.client import job
from stepdbg.wire import sessions

FIXTURE = Path(__file__).parent / "fixtures" / "ddp_train.py"
FSDP = Path(__file__).parent / "fixtures" / "fsdp_train.py"
UNTIL = Path(__file__).parent / "fixtures" / "ddp_until.py"
WAIT = CONFTEST_WAIT  # a ceiling only a hang reaches (two ranks start slowly beside other work)
pytestmark = pytest.mark.slow  # real trainers and torchrun end to end (see pyproject: slow)


def start(tmp_path: Path, *stepdbg_args: str, script_args: tuple[str, ...] = (),
          torchrun_args: tuple[str, ...] = (), script: Path = FIXTURE) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "stepdbg", *stepdbg_args, "--report", str(tmp_path / "r.jsonl"), "torchrun",
           "--standalone", "--nproc_per_node=2", *torchrun_args, str(script), *script_args]
    return subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def both_ranks(proc: subprocess.Popen) -> list[client.Client]:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        live = [s for s in sessions.listing() if s.job_id]
        if len(live) == 2:
            return client.connect_job()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("the ranks never announced themselves")


@contextlib.contextmanager
def ranks_of(proc: subprocess.Popen) -> Iterator[list[client.Client]]:
    """Both ranks' clients, closed afterwards; when the test fails in between, the job is
    killed too (a served job paused at a break would wait for a front end forever)."""
    clients: list[client.Client] = []
    try:
        clients = both_ranks(proc)
        yield clients
    except BaseException:
        proc.kill()
        raise
    finally:
        for c in clients:
            c.close()


def run_to_end(*clients: client.Client) -> None:
    """Continue every rank; each exits 0."""
    for c in clients:
        c.cont()
    for c in clients:
        assert c.wait_exited(WAIT)["exit_code"] == 0


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the job hung:\n{err[-3000:]}") from None
    return proc.returncode, out, err


def test_a_nan_on_rank_1_pauses_both_ranks_at_the_same_step(tmp_path, private_runtime_dir):
    proc = start(tmp_path, "serve", "--break", "nan", script_args=("--nan-at", "3"))
    with ranks_of(proc) as (r0, r1):
        assert (r0.session["rank"], r1.session["rank"]) == (0, 1) and r0.session["job_id"] == r1.session["job_id"]
        b0, b1 = r0.wait_paused(WAIT), r1.wait_paused(WAIT)
        assert (b0["step"], b0["phase"]) == (b1["step"], b1["phase"]) == (3, "before_optimizer_step")
        assert b1["condition"] == "nan" and b1["reason"].startswith("this rank broke: loss is nan"), b1
        assert b0["condition"] == "rank 1" and b0["reason"].startswith("paused for rank 1's break at step 3")
        assert r0.evaluate("dist.get_rank()")["value"] == "0" and r1.evaluate("dist.get_rank()")["value"] == "1"
        assert r1.summary("x")["nan"] == 1 and r0.summary("x")["nan"] == 0
        for c in (r0, r1):
            assert c.set_lr(0.001, pin=True)["pinned"] is True  # the same LR on both replicas
            c.remove_break("nan")
        run_to_end(r0, r1)
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]
    reports = {r: [json.loads(line) for line in (tmp_path / f"r.rank{r}.jsonl").read_text().splitlines()]
               for r in (0, 1)}
    assert all(e["rank"] == r for r, evs in reports.items() for e in evs)
    assert [e["condition"] for e in reports[1] if e["event"] == "break"][0] == "nan"


def test_a_pause_longer_than_the_collective_timeout_does_not_kill_the_job(tmp_path, private_runtime_dir):
    """The job's gloo timeout is 2 s; rank 0 is held paused for 3 s while rank 1 waits in
    the all-reduce. Attaching raised every rank's timeout, so the job lives."""
    # The job steps until this test has seen what it needs (ddp_until.py): a job of a fixed
    # length had to be long enough that it could not end, on a busy machine, before the test
    # paused it (with 40 steps it did), and its 400 steps of 0.05 s then ran 20 s for nothing.
    done = tmp_path / "done"
    proc = start(tmp_path, "--break", "step==1000", script=UNTIL, script_args=("--until", str(done), "--timeout", "2"))
    with ranks_of(proc) as (r0, r1):
        deadline = time.monotonic() + WAIT
        while r0.status()["step"] < 1 and r1.status()["step"] < 1:  # the ranks are running
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r0.pause()
        brk = r0.wait_paused(WAIT)
        assert brk is not None
        time.sleep(3)  # past the 2 s timeout
        assert r1.status()["state"] == "running"  # blocked in the all-reduce, still alive
        done.touch()  # the job ends after the step rank 0 is let go on with
        r0.cont()
        assert r0.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]


def test_a_client_that_vanishes_gives_the_ranks_their_timeout_back_and_the_job_goes_on(tmp_path,
                                                                                      private_runtime_dir):
    """A console attached to the whole job (a real `stepdbg attach` process) holds it paused
    at step 2 and is killed without a goodbye. Every rank puts its own 30 s collective
    timeout back (its report says so), and with --detach-timeout the job runs to its end."""
    proc = start(tmp_path, "serve", "--detach-timeout", "1", "--break", "step==2",
                 script_args=("--steps", "5", "--timeout", "30"))
    console = None
    try:
        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:  # serve: a break waits for a front end
            assert time.monotonic() < deadline and proc.poll() is None, "the ranks never announced themselves"
            time.sleep(0.1)
        console = subprocess.Popen([sys.executable, "-m", "stepdbg", "attach"], cwd=ROOT, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert console.stdout is not None
        for line in console.stdout:  # attached to every rank (killed before that, it would never have been there)
            if line.startswith("attached to job"):
                break
        reports = [tmp_path / f"r.rank{r}.jsonl" for r in (0, 1)]
        deadline = time.monotonic() + WAIT
        while not all(f.exists() and '"event": "break"' in f.read_text() for f in reports):
            assert time.monotonic() < deadline and console.poll() is None, "the job never paused"
            time.sleep(0.1)
        console.kill()
    finally:
        if console is not None and console.poll() is None:
            console.kill()
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]
    for f in reports:
        changes = [e for e in map(json.loads, f.read_text().splitlines()) if e["event"] == "collective_timeout"]
        assert changes and changes[-1]["why"] == "no front end is left" and changes[-1]["seconds"] == 30.0, changes


def test_a_rank_that_dies_is_shown_dead_with_its_exit_code_and_last_output(tmp_path, private_runtime_dir):
    """Rank 1 prints a line and os._exit(7)s at step 5. Its client sees it gone and
    nothing hangs. torchrun's output (with --tee 3, as the TUI launcher runs it) gives the
    exit code by pid and each rank's last lines, which the ranks table ties to the rank."""
    proc = start(tmp_path, torchrun_args=("--tee", "3"),
                 script_args=("--die-at", "5", "--sleep", "0.05", "--steps", "200", "--timeout", "20"))
    ranks = job.Job(both_ranks(proc))
    try:
        assert "lost" in ranks.clients[1].wait_exited(WAIT)  # vanished without a goodbye
        assert ranks.clients[0].wait_exited(WAIT) is not None  # torchrun stops the others
        rows = ranks.rank_table()
        assert [r["state"] for r in rows] == ["dead", "dead"]
        assert rows[1]["note"].startswith("no exit code seen: killed by a signal, os._exit or a crash")
    finally:
        ranks.close()
    code, out, err = finish(proc)
    assert code != 0
    assert [p.name for p in private_runtime_dir.glob("*")] == []  # rank 1's os._exit left its files: removed
    log = job.TorchrunLog()
    for line in (out + err).splitlines():
        log.feed(line)
    rows = [job.rank_row(r, c, None, None, log) for r, c in enumerate(ranks.clients)]
    assert rows[1]["note"] == "exit code 7 (from torchrun); last output: rank 1 dies now", rows
    # Rank 0 either ends on its own (the all-reduce fails: exit code 1 and the error) or
    # is stopped by torchrun first; both are said.
    assert rows[0]["note"].startswith(("exit code 1; RuntimeError:", "torchrun sent SIGTERM", "killed by SIGTERM")), rows


def test_attach_to_the_whole_job_from_the_console(tmp_path, private_runtime_dir):
    """`stepdbg attach` with the ranks of one job running: ranks, compare, rank N, and
    stepping and LR that go to every rank."""
    proc = start(tmp_path, "serve", "--break", "nan", script_args=("--nan-at", "2"))
    watchers = both_ranks(proc)
    try:
        for w in watchers:
            paused = w.wait_paused(WAIT)
            assert paused["step"] == 2, paused  # (its reason says which rank's break it is)
        job_id = sessions.listing()[0].job_id
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", job_id],
                             input="ranks\ncompare float(loss)\nrank 1\np x\nlr 0.001 pin\nbreak rm nan\ndetach\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        text = out.stderr
        assert f"the job stays paused: `stepdbg attach {job_id}` comes back" in text  # the job, not rank 1 alone
        again = subprocess.run([sys.executable, "-m", "stepdbg", "attach", job_id], input="c\n",
                               capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert again.returncode == 0, again.stderr
        assert f"attached to job {job_id}: 2 ranks, rank 0 in view" in text
        assert "* rank 0: paused     step 2 before_optimizer_step  — paused for rank 1's break" in text
        assert "  rank 1: paused     step 2 before_optimizer_step  — this rank broke: " in text
        assert "rank 0: " in text and "rank 1: nan   <- differs" in text  # compare: rank 1's loss is the odd one
        assert "rank 1 in view" in text and "x: float32 [8, 4] on cpu" in text
        for w in watchers:
            assert w.wait_exited(WAIT)["exit_code"] == 0
    finally:
        for w in watchers:
            w.close()
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2
    changes = [json.loads(line) for r in (0, 1) for line in (tmp_path / f"r.rank{r}.jsonl").read_text().splitlines()
               if '"change"' in line]
    assert sorted((c["rank"], c["what"]) for c in changes) == [(0, "break_remove"), (0, "lr"), (1, "break_remove"),
                                                               (1, "lr")]


def test_ctrl_c_ends_a_torchrun_job_and_nothing_is_left(tmp_path, private_runtime_dir):
    import signal

    proc = start(tmp_path, "--no-tui", script_args=("--steps", "100000", "--sleep", "0.05"))
    clients = both_ranks(proc)
    for c in clients:
        c.close()
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    # torchrun's own way of saying it was interrupted (its traceback to `got signal: 2`), in one line
    assert code == 130 and "stepdbg: torchrun and its ranks were ended by the Ctrl-C" in err, err[-3000:]
    assert "got signal: 2" not in err, err[-3000:]
    assert [p.name for p in private_runtime_dir.glob("*")] == []  # every rank removed its socket and file


def test_ranks_end_when_torchrun_is_killed_even_while_waiting_in_a_collective(tmp_path, private_runtime_dir):
    """Rank 0 paused (its peers wait in the all-reduce, their timeout raised to days by the
    attach); torchrun is then killed with SIGKILL: every rank ends within seconds."""
    import os
    import signal as sig

    proc = start(tmp_path, "serve", "--break", "step==2", script_args=("--steps", "50", "--sleep", "0.05"))
    with ranks_of(proc) as (r0, r1):
        r0.wait_paused(WAIT)
        pids = [r0.session["pid"], r1.session["pid"]]
        os.kill(proc.pid, sig.SIGKILL)  # stepdbg dies at once; torchrun, its child, with it (PR_SET_PDEATHSIG)
        deadline = time.monotonic() + WAIT  # (dying and being reaped take a while on busy cores)
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [p for p in pids if _alive(p)]
        assert alive == [], f"ranks still alive after torchrun died: {alive}"
        proc.communicate(timeout=WAIT)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"  # a zombie has ended; only its parent has not reaped it


def test_on_break_rewind_rewinds_both_ranks_to_one_snapshot(tmp_path):
    """Rank 0 alone gets a corrupt batch at step 6; DDP's all-reduce ruins both replicas,
    the loss is inf on both at step 8; both rewind to the snapshot of step 6 and end with
    the same finite weights."""
    proc = start(tmp_path, "--break", "nan", "--on-break", "rewind", "--keep-every", "3",
                 script_args=("--corrupt-at", "6", "--steps", "12"))
    code, out, err = finish(proc)
    assert code == 0, err[-3000:]
    assert "stepdbg[rank 0]: change: rewind to the snapshot of step 6" in err and "stepdbg[rank 1]: change: rewind" in err
    finals = sorted(line.split(" last loss ")[1] for line in out.replace("rank", "\nrank").splitlines()
                    if " last loss " in line)
    assert len(finals) == 2 and finals[0] == finals[1] and "nan" not in finals[0], out
    for rank in (0, 1):
        events = [json.loads(line) for line in (tmp_path / f"r.rank{rank}.jsonl").read_text().splitlines()]
        (rewind,) = [e for e in events if e["event"] == "change" and e["what"] == "rewind"]
        assert (rewind["to_step"], rewind["rank"]) == (6, rank), rewind


def test_a_two_node_job_on_this_machine_is_listed_once_and_attached_as_one(tmp_path, private_runtime_dir):
    """Two torchrun launchers (--nnodes=2, --node_rank 0 and 1, one shared rendezvous), as two
    nodes would start a job: `stepdbg ls` names the job once with both nodes, and attaching
    to it reaches both ranks, paused together at step 3."""
    import os

    from test_remote import free_port

    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "stepdbg", "serve", "-q", "--break", "step==3", "torchrun", "--nnodes=2",
         f"--node_rank={i}", "--nproc_per_node=1", "--rdzv-id=twonodes", "--master_addr=127.0.0.1",
         f"--master_port={port}", str(FIXTURE), "--steps", "6"],
        cwd=ROOT, env={**os.environ, "STEPDBG_NODE": f"node{i}"}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    ranks = None
    try:
        ranks = job.Job(both_ranks(procs[0]))
        for c in ranks.clients:
            c.wait_paused(WAIT)
        whole = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # (ls folds at COLUMNS)
        listed = subprocess.run([sys.executable, "-m", "stepdbg", "ls"], cwd=ROOT, capture_output=True, text=True,
                                timeout=WAIT, env=whole).stdout
        assert "job twonodes: 2 of 2 ranks, on node0 (rank 0), node1 (rank 1) · stepdbg attach twonodes" in listed
        assert [(r["rank"], r["state"], r["step"]) for r in ranks.rank_table()] == [(0, "paused", 3), (1, "paused", 3)]
        ranks.cont()
    finally:
        if ranks is not None:
            ranks.close()
        outs = [finish(p) for p in procs]
    assert [code for code, _, _ in outs] == [0, 0], [err[-1500:] for _, _, err in outs]
