"""What a path or an environment variable hands stepdbg is read within a cap, and odd values
are one line, never a traceback or a hang (issue 43, items 11 and 12).

`attach --token-file /dev/zero` read until the OOM killer; a FIFO blocked; a breakpoint of
501-1,000 characters was accepted by --break but could not be turned off or removed from a
client; STEPDBG_REMOTE with an unbalanced quote and some STEPDBG_CONFIG values ended in
tracebacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from conftest import FIXTURE, ROOT, WAIT
from hypothesis import given, settings
from hypothesis import strategies as st

from stepdbg import client
from stepdbg.cli import common
from stepdbg.client import ClientError
from stepdbg.wire import files, sessions
from stepdbg.wire.agent_config import AgentConfig
from stepdbg.wire.conditions import MAX_SPEC


def stepdbg(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stepdbg", *args], capture_output=True, text=True, timeout=WAIT,
                          cwd=ROOT, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def one_line(out: subprocess.CompletedProcess[str], starts: str) -> None:
    assert out.returncode not in (0, None), (out.returncode, out.stderr)
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(starts), out.stderr
    assert "Traceback" not in out.stderr


def test_a_token_file_that_never_ends_or_blocks_or_is_huge_is_one_line(tmp_path):
    """/dev/zero (read until the OOM killer before), a FIFO nobody writes (it blocked), a
    folder, a 10 MB file: refused before a byte too many is read, in one line."""
    fifo, huge = tmp_path / "fifo", tmp_path / "huge"
    os.mkfifo(fifo)
    huge.write_bytes(b"t" * 10_000_000)
    for path, why in (("/dev/zero", "not a regular file"), (str(fifo), "not a regular file"),
                      (str(tmp_path), "a folder"), (str(huge), "larger than 4,096 bytes")):
        out = stepdbg("attach", "127.0.0.1:5678", "--token-file", path, "--repl")
        one_line(out, f"stepdbg: --token-file {path!r}: ")
        assert why in out.stderr, out.stderr


def test_a_token_in_the_environment_is_capped_too():
    one_line(stepdbg("attach", "127.0.0.1:5678", "--repl", env={"STEPDBG_TOKEN": "t" * 100_000}),
             "stepdbg: STEPDBG_TOKEN is 100,000 characters long")


def test_a_session_file_is_read_within_its_cap(tmp_path, private_runtime_dir):
    """A session file past the cap (or nested past Python's recursion limit) is not a
    session: `stepdbg ls` lists nothing and says no traceback."""
    private_runtime_dir.mkdir(mode=0o700)
    row = {"id": "1", "pid": os.getpid(), "host": sessions.node_name(), "argv": ["x" * files.SESSION_LIMIT],
           "address": str(private_runtime_dir / "1.sock"), "token": "t", "started": 0.0}
    for name, text in (("big", json.dumps(row)), ("deep", "[" * 100_000)):
        path = private_runtime_dir / f"{name}.json"
        path.write_text(text)
        path.chmod(0o600)
    assert sessions.listing(clean=False) == []
    out = stepdbg("ls")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr


def test_the_capped_reader_reads_a_file_that_fits_whole(tmp_path):
    path = tmp_path / "t"
    path.write_bytes(b"x" * 4096)
    assert files.read_capped(str(path), 4096) == b"x" * 4096
    with pytest.raises(OSError, match="larger than 4,095 bytes"):
        files.read_capped(str(path), 4095)


@pytest.mark.parametrize("config", [
    "[" * 100_000,  # RecursionError
    '{"rewind": {"every": "x"}}',  # ValueError in the Session
    '{"rewind": {"bogus": 1}}',  # TypeError in the Session
    '{"rewind": {"max_rewinds": "x"}}',  # (taken, then a TypeError at the break)
    '{"listen": "bad:addr:x"}',  # ValueError at serve
    '{"actions": [1]}',  # (one line before, without the variable's name)
    # odd values that were one line already: a folder, a missing file, a number, TOML, bad UTF-8
    "/tmp", "/nonexistent/stepdbg.json", "7", 'breaks = ["nan"]', "\udcff{}", '{"breaks": ["\udcff"]}',
    # taken before: a pause with no client resumed at once; the script never ran and exit code 0
    '{"detach_timeout": NaN, "serve": true}', '{"detach_timeout": -1, "serve": true}',
    '{"detach_timeout": Infinity}', '{"detach_timeout": 0}', '{"stop_after": -5}', '{"stop_after": 0}',
])
def test_a_stepdbg_config_the_session_would_refuse_is_one_line_and_exit_code_2(config):
    out = subprocess.run([sys.executable, "-m", "stepdbg.launch.bootstrap", str(FIXTURE), "--steps", "2"],
                         capture_output=True, text=True, timeout=WAIT, cwd=ROOT,
                         env={**os.environ, "STEPDBG_CONFIG": config}, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and out.stdout == "", (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("stepdbg: STEPDBG_CONFIG"), out.stderr


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(), st.integers(-10, 10)), st.one_of(st.integers(-2**70, 2**70), st.floats()))
def test_stepdbg_config_takes_the_timeout_and_steps_the_command_line_takes(seconds, steps):
    """detach_timeout and stop_after as --detach-timeout and --steps take them, no other."""
    def taken(make: Any) -> bool:
        try:
            make()
        except (ValueError, common.UsageError):
            return False
        return True

    assert taken(lambda: AgentConfig(detach_timeout=seconds)) == taken(lambda: common._seconds(repr(seconds)))
    both = (lambda: AgentConfig.from_json(json.dumps({"stop_after": steps})), lambda: common.steps(repr(steps)))
    assert taken(both[0]) == taken(both[1]), steps


@pytest.mark.parametrize("command", ["doctor", "overfit"])
@pytest.mark.parametrize("n", ["-5", "0", "nan"])
def test_steps_the_command_line_refuses(command, n):
    one_line(stepdbg(command, "--steps", n, str(FIXTURE)), f"stepdbg: --steps needs a whole number of steps >= 1, not '{n}'")


def test_a_10_mb_stepdbg_config_is_refused_before_it_is_parsed():
    """(An environment variable holds at most 128 KiB on Linux, so in the process.)"""
    big = json.dumps({"argv": ["x" * 10_000_000]})
    with pytest.raises(ValueError, match="STEPDBG_CONFIG is 10,000,0"):
        AgentConfig.from_json(big)


@pytest.mark.parametrize("remote", ["stepdbg '", ""])
def test_stepdbg_remote_that_is_not_a_command_is_one_line(remote):
    """Before anything reaches ssh: an unbalanced quote ended in shlex's traceback, and an
    empty value ran `ls --json` on the remote host."""
    one_line(stepdbg("ls", "ssh://nohost.invalid", env={"STEPDBG_REMOTE": remote}), "stepdbg: STEPDBG_REMOTE")


def padded(n: int) -> str:
    """A condition of exactly n characters that never holds."""
    head = "expr:step > 1000000000."
    return head + "0" * (n - len(head))


@pytest.mark.usefixtures("private_runtime_dir")
def test_every_spec_the_command_line_accepts_a_client_can_turn_off_and_remove(start_job):
    """--break took up to 1,000 characters, the ops up to 500: a spec of 501-1,000 could
    be neither disabled nor removed. One cap now, on both sides."""
    assert len(padded(MAX_SPEC)) == MAX_SPEC
    one_line(stepdbg("--break", padded(MAX_SPEC + 1), "python", str(FIXTURE)), "stepdbg: ")
    long, other = padded(MAX_SPEC), padded(MAX_SPEC - 1)
    job = start_job("--break", "nan", "--break", long, script_args=("--steps", "100000", "--sleep", "0.01"))
    job.info()
    with client.connect() as c:
        c.enable_break(long, False)
        assert [b["enabled"] for b in c.breakpoints() if b["spec"] == long] == [False]
        c.remove_break(long)
        c.add_break(other)
        assert c.break_specs() == ["nan", other]
        with pytest.raises(ClientError, match=str(MAX_SPEC)):
            c.add_break(padded(MAX_SPEC + 1))
        c.end()
    assert job.finish()[0] == 3


def test_the_report_read_back_is_capped(tmp_path):
    from stepdbg.agent import report

    with pytest.raises(OSError, match="not a regular file"):
        report.read("/dev/zero")
    path = tmp_path / "r.jsonl"
    path.write_text('{"event": "end"}\n')
    assert report.read(str(path)) == [{"event": "end"}]



@pytest.mark.parametrize("command", ["attach", "ls"])
def test_what_ssh_answers_is_read_within_a_cap(tmp_path, command):
    """A remote (or an ssh) that answers without end: 1.5 GB was read whole (4.4 GB of
    memory). Past 16 MiB it is one line, and ssh is killed: it never gets to its last line."""
    fake, done = tmp_path / "ssh", tmp_path / "done"
    fake.write_text(f"#!/bin/sh\nhead -c 40000000 /dev/zero\necho finished > {done}\n")
    fake.chmod(0o755)
    out = stepdbg(command, "ssh://x@host", env={"STEPDBG_SSH": str(fake)})
    one_line(out, "stepdbg: 'stepdbg ls' over ssh to x@host answered more than 16 MiB; not read further")
    assert not done.exists()


@pytest.mark.parametrize("local", ["/" + "s" * 120 + "\x00.sock", "/" + "d" * 60 + "\x00/" + "s" * 60 + ".sock",
                                   "/" + "s" * 120 + "\ud800.sock"])
def test_a_session_file_whose_socket_is_no_path_is_not_a_session(private_runtime_dir, local):
    """`ls --json --with-token` makes a short link to a socket path too long for an address:
    a path of more than 108 bytes with a NUL in it ended in os.symlink's ValueError (and one
    with a lone surrogate, in os.fsencode's while connecting). Such a file is no session now,
    and the link is not made."""
    private_runtime_dir.mkdir(mode=0o700)
    row = {"id": "1", "pid": os.getpid(), "host": sessions.node_name(), "argv": ["train.py"], "local": local,
           "address": str(private_runtime_dir / "1.sock"), "token": "t", "started": 0.0}
    path = private_runtime_dir / "1.json"
    path.write_text(json.dumps(row))
    path.chmod(0o600)
    out = stepdbg("ls", "--json", "--with-token")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout) == [] and sessions.listing(clean=False) == []
    assert sessions.short_alias(local) is None
    with pytest.raises(ValueError, match="local .* is no path"):
        sessions.SessionInfo.from_json(row)
