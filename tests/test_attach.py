"""Two real processes: a served job and clients, over real sockets (STYLE.md example 12)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from conftest import DEMOS, FIXTURE, ROOT, WAIT, Job

from stepdbg import client
from stepdbg.client import ClientError, TargetError
from stepdbg.wire import protocol, sessions
from stepdbg.wire.address import unix_name

pytestmark = pytest.mark.usefixtures("private_runtime_dir")


@pytest.mark.slow
def test_launch_attach_pause_at_nan_eval_set_lr_continue_to_the_end(start_job):
    job = start_job("--break", "nan", script=DEMOS / "nan_log.py")
    info = job.info()
    with client.connect() as c:
        brk = c.wait_paused(WAIT)
        assert (brk["step"], brk["phase"], brk["condition"]) == (30, "before_backward", "nan")
        assert c.evaluate("loss.item()")["value"] == "nan"
        assert c.evaluate("print(step)")["output"] == "30\n"
        assert c.summary("x")["zeros"] == 1
        assert c.replay()["first_nonfinite"]["module"] == "features"
        assert c.set_lr(1e-3, pin=True)["pinned"] is True
        c.remove_break("nan")
        c.cont()
        done = c.wait_exited(WAIT)
    assert done["exit_code"] == 0 and done["steps"] == 60
    code, out, err = job.finish()
    assert code == 0 and "done" in out and "Traceback" not in err
    assert not os.path.exists(info.path) and not os.path.exists(info.address)  # cleaned up
    kinds = [e["event"] for e in job.events()]
    assert kinds[0] == "start" and kinds[-1] == "end" and "replay" in kinds and kinds.count("change") == 2


def test_os_exit_in_code_run_at_a_pause_still_ends_the_session(start_job):
    """os._exit(7) typed at a pause skipped atexit: the session's files stayed and the report
    had no end record. The session ends first now, then the process exits with 7."""
    job = start_job("--break", "step==3")
    info = job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        with contextlib.suppress(Exception):  # the job is gone before it can answer
            c.evaluate("import os; os._exit(7)")
        done = c.wait_exited(WAIT)
    assert done is not None and done["exit_code"] == 7
    code, _, _ = job.finish()
    assert code == 7
    assert not os.path.exists(info.path) and not os.path.exists(info.address)
    assert job.events()[-1]["event"] == "end" and job.events()[-1]["exit_code"] == 7


def test_silent_tcp_connections_cannot_lock_the_owner_out(start_job):
    """Another user on the machine can reach a --listen port; holding its pre-auth slots
    with silent connections keeps nobody out who comes in through the session's socket."""
    job = start_job("--break", "step==2", "--listen", "127.0.0.1:0", script_args=("--steps", "4"))
    info = job.info()
    host, _, port = info.address.rpartition(":")
    squatters = [socket.create_connection((host, int(port))) for _ in range(40)]
    try:
        for _ in range(10):
            with client.connect(info.id) as c:
                assert c.status()["pid"] == info.pid
        with client.connect() as c:
            assert c.wait_paused(WAIT)["step"] == 2
            c.close(then="continue")
    finally:
        for s in squatters:
            s.close()
    code, out, err = job.finish()
    assert code == 0 and "Traceback" not in err


@pytest.mark.slow
def test_attach_by_every_local_target_form(start_job):
    job = start_job("--break", "step==2", "--listen", "127.0.0.1:0", script_args=("--steps", "4"))
    info = job.info()
    tcp = next(s for s in [info]).address if ":" in info.address else None
    local = sessions.listing()[0]
    assert local.address.startswith("127.0.0.1:")  # --listen: TCP
    for target, token in ((info.id, None), (str(info.pid), None), (local.address, local.token)):
        with client.connect(target, token=token) as c:
            assert c.status()["pid"] == info.pid
    with pytest.raises(TargetError, match="pass its token"):
        client.connect(local.address)
    with pytest.raises(TargetError, match="no session '999999'"):
        client.connect("999999")
    with pytest.raises(TargetError, match=r"no session 'nonsense' \(running: \d+\): TARGET is a session id or pid"):
        client.connect("nonsense")  # (not "the job may have ended": it never was one)
    with client.connect() as c:
        c.wait_paused(WAIT)
        c.cont()
    assert tcp is not None
    assert job.finish()[0] == 0


@pytest.mark.slow
def test_unix_socket_path_target_and_file_modes(start_job):
    job = start_job("--break", "step==1", script_args=("--steps", "3"))
    info = job.info()
    assert os.stat(info.address).st_mode & 0o777 == 0o600
    assert os.stat(info.path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(info.path)).st_mode & 0o777 == 0o700
    with client.connect(info.address, token=info.token) as c:
        assert c.wait_paused(WAIT)["step"] == 1
        c.cont()
    assert job.finish()[0] == 0


@pytest.mark.slow
def test_two_clients_at_once(start_job):
    job = start_job("--break", "step==3", script_args=("--steps", "6"))
    job.info()
    a, b = client.connect(), client.connect()
    try:
        first = b.wait_paused(WAIT)
        assert a.wait_paused(WAIT)["step"] == 3 and first["step"] == 3
        a.next_step()
        assert b.wait_paused(WAIT, previous=first)["step"] == 4  # b sees the pause that a caused
        b.cont()
        assert a.wait_exited(WAIT)["exit_code"] == 0
    finally:
        a.close()
        b.close()
    assert job.finish()[0] == 0


def test_a_killed_client_leaves_the_job_paused_for_a_reattach(start_job):
    job = start_job("--break", "step==2", script_args=("--steps", "5"))
    job.info()
    attach = subprocess.Popen([sys.executable, "-m", "stepdbg", "attach"], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + WAIT
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        while watcher.status()["frontends"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        attach.kill()
        attach.communicate()
        while watcher.status()["frontends"] > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        watcher.close()  # both gone now
    with client.connect() as again:
        while (st := again.status())["frontends"] > 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # the watcher's goodbye is read
        assert st["frontends"] == 1
        assert st["state"] == "paused" and st["paused"]["step"] == 2
        again.cont()
        assert again.wait_exited(WAIT)["exit_code"] == 0
    assert job.finish()[0] == 0


@pytest.mark.slow
def test_a_plain_run_pauses_at_a_break_while_a_client_is_attached(start_job, tmp_path):
    job = start_job("--break", "step==3", mode="run", script_args=("--steps", "6", "--start-after", str(go := tmp_path / "go")))
    job.info()
    with client.connect() as c:  # (attached after step 3, as a busy machine made it, it rightly did not pause)
        assert c.status()["frontends"] == 1 and not go.touch()  # attached: now the loop starts
        brk = c.wait_paused(WAIT)  # no --on-break given: report alone, pause with a front end
        assert brk["step"] == 3
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    assert job.finish()[0] == 0


def test_detach_timeout_resumes_a_job_left_alone(start_job):
    job = start_job("--break", "step==1", "--detach-timeout", "0.5", script_args=("--steps", "3"))
    job.info()
    with client.connect() as c:
        assert c.wait_paused(WAIT)["step"] == 1
    code, out, err = job.finish()
    assert code == 0 and "finished" in out and "resuming (--detach-timeout)" in err


def test_detach_with_end_ends_the_job_with_code_3(start_job):
    job = start_job("--break", "step==1", script_args=("--steps", "50"))
    job.info()
    c = client.connect()
    c.wait_paused(WAIT)
    c.close(then="end")
    code, out, err = job.finish()
    assert code == 3 and "ending the job" in err
    assert job.events()[-1] == {**job.events()[-1], "event": "end", "exit_code": 3}


def raw(info: sessions.SessionInfo) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with unix_name(info.address) as name:  # a socket path of any length
        s.connect(name)
    s.settimeout(5)
    return s


def answer(s: socket.socket) -> dict | None:
    dec = protocol.FrameDecoder()
    while True:
        data = s.recv(65536)
        if not data:
            return None
        msgs = dec.feed(data)
        if msgs:
            return msgs[0]


@pytest.mark.slow
def test_bad_clients_get_clear_errors_and_the_job_runs_on(start_job, tmp_path):
    job = start_job("--break", "step==5", script_args=("--steps", "8", "--sleep", "0.3", "--start-after", str(go := tmp_path / "go")))
    info = job.info()
    with client.connect() as c:
        with pytest.raises(ClientError) as e:
            c.evaluate("1")  # the job runs: nothing to evaluate in
        assert e.value.code == "not_paused" and not go.touch()  # (now the loop starts: 1.5 s before step 5's break)
    with pytest.raises(ClientError, match="wrong token"):
        client.connect(info.address, token="0" * 64)
    s = raw(info)  # says nothing: closed after the auth timeout with a reason
    assert answer(s)["error"] == {"code": "auth", "message": "no hello with the session token in time"}
    s.close()
    s = raw(info)  # garbage instead of a hello
    s.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert answer(s)["error"]["code"] == "too_large"
    s.close()
    s = raw(info)  # a version we do not speak
    s.sendall(protocol.encode({"type": "hello", "version": 99, "token": info.token}))
    assert answer(s)["error"]["code"] == "version"
    s.close()
    with client.connect() as c:
        c.conn.sock.sendall(struct.pack(">I", protocol.MAX_FRAME + 1))  # an oversized frame
        assert c.wait_exited(WAIT)["lost"]
    with client.connect() as c:
        with pytest.raises(ClientError, match="unknown op 'frobnicate'") as e:
            c.call("frobnicate")
        assert e.value.code == "unknown_op"
        with pytest.raises(ClientError) as e:
            c.call("set_lr", rate=1)
        assert e.value.code == "bad_args"
        with pytest.raises(ClientError, match="bad condition 'los>1'"):
            c.add_break("los>1")
        c.wait_paused(WAIT)
        r = c.evaluate("def f():\n    raise ValueError('from eval')\nf()")
        assert r["error"].startswith("Traceback") and "ValueError: from eval" in r["error"]
        assert "stepdbg/session.py" not in r["error"]
        big = c.evaluate("print('x' * 3_000_000)")
        assert len(big["output"]) < 1_100_000 and "more characters not shown" in big["output"]
        c.cont()
    code, out, err = job.finish()
    assert code == 0 and out.count("loss") == 8 and "finished" in out  # nothing lost


@pytest.mark.slow
def test_cli_attach_console_ls_and_errors(start_job):
    job = start_job("--break", "step==2", script_args=("--steps", "4"))
    info = job.info()
    ls = subprocess.run([sys.executable, "-m", "stepdbg", "ls", "--json"], capture_output=True, text=True, timeout=WAIT)
    (row,) = json.loads(ls.stdout)
    assert row["pid"] == info.pid and "token" not in row and row["state"] in ("running", "paused")
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", info.id], input="p x\nlr 0.5\nc\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert "paused at step 2 (before_forward) [step==2]: reached step 2" in out.stderr
        assert "x: float32 [8, 4] on cpu" in out.stderr
        assert "LR set to 0.5 (param group 0, was 0.01)" in out.stderr  # every change confirmed in one line
        assert watcher.wait_exited(WAIT)["exit_code"] == 0
    assert job.finish()[0] == 0
    assert json.loads([line for line in job.report.read_text().splitlines() if '"change"' in line][0])["lr"] == 0.5
    gone = subprocess.run([sys.executable, "-m", "stepdbg", "attach", info.id], capture_output=True, text=True)
    assert gone.returncode == 1 and f"no session '{info.id}' (running: none); the job may have ended" in gone.stderr


def test_interrupt_from_an_attached_console_is_ctrl_c_for_the_paused_job(start_job):
    """`interrupt` over attach: SIGINT in the job ends its pause with a KeyboardInterrupt in
    its loop, as Ctrl-C at its terminal would; the report still gets its end (code 130)."""
    job = start_job("--break", "step==2", script_args=("--steps", "1000", "--sleep", "0.01"))
    info = job.info()
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", info.id], input="interrupt\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert f"Ctrl-C sent to the job (pid {info.pid})" in out.stderr, out.stderr
    code, _, err = job.finish()
    assert code == -signal.SIGINT and "KeyboardInterrupt" in err, err[-2000:]
    assert job.events()[-1]["event"] == "end" and job.events()[-1]["exit_code"] == 130


def test_ctrl_c_ends_the_job_cleanly(start_job, tmp_path):
    """Once in ~20 loaded runs a SIGINT did nothing (a KeyboardInterrupt in a finalizer,
    dropped): a user presses Ctrl-C again, and so does this test once the job ran on past
    it (its step file), not after 5 s, when the first may still be ending the job."""
    at = tmp_path / "step"
    job = start_job(mode="run", script=FIXTURE.with_name("steps_to_a_file.py"), script_args=(str(at),))
    info = job.info()
    def step() -> int:
        return int(at.read_text()) if at.exists() else -1
    def wait(done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT  # a guard against a hang, never a measure
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)
    wait(lambda: step() >= 0, "the job's first step")
    for _ in range(2):
        at_ctrl_c = step()
        job.proc.send_signal(signal.SIGINT)
        wait(lambda: job.proc.poll() is not None or step() >= at_ctrl_c + 3,  # noqa: B023 - called in this pass
             "the job to end or to run on")
        if job.proc.poll() is not None:
            break
    code, _, err = job.finish()
    assert code == -signal.SIGINT and "KeyboardInterrupt" in err, err[-2000:]
    assert not os.path.exists(info.path)
    assert job.events()[-1]["event"] == "end" and job.events()[-1]["exit_code"] == 130


@pytest.mark.slow
def test_async_client_drives_a_job(start_job):
    """The asyncio client (what the TUI uses): pause, inspect, step, continue to the end."""
    import asyncio

    from stepdbg.client.async_client import AsyncClient

    job = start_job("--break", "step==2", script_args=("--steps", "5"))
    job.info()

    async def drive() -> dict:
        c = await AsyncClient.connect()
        brk = await c.wait_paused(WAIT)
        assert brk["step"] == 2
        assert (await c.summary("x"))["shape"] == [8, 4]
        assert (await c.status())["state"] == "paused"
        await c.next_step()
        brk2 = await c.wait_paused(WAIT, previous=brk)
        assert brk2["step"] == 3 and brk2["phase"] == "before_forward"
        with pytest.raises(ClientError) as e:
            await c.call("nope")
        assert e.value.code == "unknown_op"
        await c.cont()
        done = await c.wait_exited(WAIT)
        await c.close()
        return done

    assert asyncio.run(drive())["exit_code"] == 0
    assert job.finish()[0] == 0


def test_forwarded_output_reaches_clients_and_the_terminal(start_job):
    job = start_job("--break", "step==2", "--forward-output", script_args=("--steps", "5"))
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        c.cont()
        c.wait_exited(WAIT)
        lines = []
        while not c.events.empty():
            e = c.events.get()
            if e["event"] == "output":
                lines += [ln for batch in e["data"] if batch["stream"] == "stdout" for ln in batch["lines"]]
    code, out, err = job.finish()
    assert code == 0
    printed = out.splitlines()
    assert [ln.split()[:2] for ln in printed] == [["step", str(i)] for i in range(5)] + [["finished"]]
    forwarded = [ln for ln in lines if ln.startswith("step ")]
    # Everything printed once a client is there (steps 2-4 at least) reached it, in order.
    assert forwarded == printed[5 - len(forwarded):5] and len(forwarded) >= 3


def test_watch_from_code_with_serve_is_attachable(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import runpy, stepdbg\n"
        "stepdbg.watch('step==1', on_break='pause', serve=True)\n"
        f"runpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n"
    )
    proc = subprocess.Popen([sys.executable, str(script), "--steps", "3"], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job = Job(proc, tmp_path / "none")
        info = job.info()
        with client.connect() as c:
            assert c.wait_paused(WAIT)["step"] == 1
            c.cont()
        code, out, err = job.finish()
        assert code == 0 and "finished" in out and f"attach with: stepdbg attach {info.id}" in err
        assert sessions.listing() == []  # removed at exit
    finally:
        if proc.poll() is None:
            proc.kill()
