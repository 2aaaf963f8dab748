"""A save killed with SIGKILL leaves its hidden folder (no Python runs to remove it); the
next save in that folder removes it, and nothing else: not another host's, not a running
process's, not a link, not a file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT, WAIT

from stepdbg.agent.replay import bundle, partials

KILLED = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from stepdbg.agent.replay import bundle

    def fill(tmp):
        (tmp / "tensors.pt").write_bytes(b"x" * 4096)
        print("filling", flush=True)
        threading.Event().wait()

    bundle._atomically(Path(sys.argv[1]), "stepdbg-step3", fill)
""")


def _write(tmp: Path) -> None:
    (tmp / "meta.json").write_text("{}")


def test_a_save_killed_with_sigkill_is_swept_by_the_next_and_nothing_else_is(tmp_path):
    job = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                           cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert job.stdout is not None and job.stdout.readline() == "filling\n"
    job.kill()
    job.wait(timeout=WAIT)
    (left,) = [p.name for p in tmp_path.iterdir()]
    assert left.startswith(".stepdbg-step3.partial-")
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        keep = [f".stepdbg-step4.partial-otherhost-{job.pid}-abc",  # another host: its pid means nothing here
                f"{partials.prefix('stepdbg-step5').replace(str(os.getpid()), str(alive.pid))}abc"]  # still running
        for name in keep:
            (tmp_path / name).mkdir()
        link = partials.prefix("stepdbg-step6").replace(str(os.getpid()), str(job.pid)) + "lnk"
        (tmp_path / "target").mkdir()
        (tmp_path / "target" / "precious").write_text("mine")
        (tmp_path / link).symlink_to(tmp_path / "target")
        plain_file = partials.prefix("stepdbg-step7").replace(str(os.getpid()), str(job.pid)) + "file"
        (tmp_path / plain_file).write_text("not a folder")
        saved = bundle._atomically(tmp_path, "stepdbg-step3", _write)
        assert saved.name == "stepdbg-step3" and (saved / "meta.json").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*keep, link, plain_file, "target",
                                                                     "stepdbg-step3"])
        assert (tmp_path / "target" / "precious").read_text() == "mine"
    finally:
        alive.kill()
        alive.wait(timeout=WAIT)


def test_a_failed_save_leaves_nothing_and_the_names_are_this_hosts(tmp_path):
    def fail(tmp: Path) -> None:
        (tmp / "meta.json").write_text("{}")
        raise OSError(28, "No space left on device")

    try:
        bundle._atomically(tmp_path, "stepdbg-step1", fail)
    except OSError as e:
        assert e.errno == 28
    assert list(tmp_path.iterdir()) == []
    assert partials._NAME.match(partials.prefix("stepdbg-step1") + "x1y2")


HOLDER = textwrap.dedent("""
    import sys, threading
    from stepdbg.agent.replay import partials

    with partials.held(sys.argv[1]):
        print("holding", flush=True)
        threading.Event().wait()
""")


def test_a_save_whose_pid_looks_gone_but_holds_its_lock_is_left(tmp_path):
    """A save in another PID namespace (a container sharing the folder and the hostname)
    looks gone to os.kill, but it holds its folder's lock: the sweep leaves it (the
    attacker's unshare --pid run had it removed mid-write)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=WAIT)
    name = partials.prefix("stepdbg-step8").replace(str(os.getpid()), str(dead.pid)) + "live"
    (tmp_path / name).mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / name)], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        assert partials.sweep(tmp_path) == []
        assert (tmp_path / name).is_dir()
    finally:
        holder.kill()
        holder.wait(timeout=WAIT)
    assert partials.sweep(tmp_path) == [name]  # its holder gone too: swept
