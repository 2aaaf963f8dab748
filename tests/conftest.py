"""Shared helpers: run the real CLI on a real script, read its report, find marked lines."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from stepdbg.wire import sessions

# A suite started in the background of a non-interactive shell (`pytest ... &` in a script)
# inherits SIGINT ignored (POSIX), and so would every job a test starts: the Ctrl-C tests
# then wait for an end that never comes (a run of this session's: 18 such failures).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Hypothesis's 200 ms deadline and its too-slow health check measure the machine, not the
# code: on a busy one they fail a test that holds. Every property test runs without them.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models come from configs; nothing is downloaded
DEMOS = ROOT / "demos"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Everything the suite's processes put in the temp folder (torchrun's and DataLoader
    workers' folders, tmux sockets, session directories, torch.compile's cache, the
    benchmarks') lands in pytest's own folder for this run, which pytest cleans up, never
    loose in $TMPDIR. Set before the test modules are imported: a module that reads the
    temp folder (or copies the environment) at import sees this one."""
    import tempfile

    d = config._tmp_path_factory.getbasetemp() / "tmp"  # each xdist worker has its own base
    d.mkdir(exist_ok=True)
    if len(str(d)) > SHORT:  # a deep TMPDIR: tmux's and multiprocessing's sockets would not fit there
        d = Path(tempfile.mkdtemp(prefix="sdbg-", dir="/tmp"))
        config.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    os.environ["TMPDIR"] = os.environ["TMUX_TMPDIR"] = str(d)
    # One inductor cache for the run, its xdist workers' too (a worker's base is the run's
    # popen-gwN): its C++ header, built once (~5 s of CPU), and any graph compiled twice.
    run_base = config._tmp_path_factory.getbasetemp()
    run_base = run_base.parent if hasattr(config, "workerinput") else run_base
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(run_base / "torchinductor"))
    tempfile.tempdir = None  # asked again, from TMPDIR
    if not hasattr(config, "workerinput"):  # once, in the controller
        _compile_our_sources()


def _compile_our_sources() -> None:
    """Where Python writes no bytecode (PYTHONDONTWRITEBYTECODE=1), every process the suite
    starts (the CLI, a job, a client: well over a thousand) compiled stepdbg's modules from
    source again, ~0.2 s of CPU a launch (issue 47). Compiled once here, into the __pycache__
    folders git ignores, as an installed package has them; a file edited later is stale by
    its time stamp and compiled in memory, as always."""
    import compileall

    for part in ("stepdbg", "tui", "tests/fixtures", "demos"):
        compileall.compile_dir(ROOT / part, quiet=2)


# The deepest temp folder the suite's processes are given: a Unix socket's path holds about
# 104 bytes, and tmux (tmux-0/NAME) and DataLoader workers' fd passing (pymp-X/listener-Y),
# which are not stepdbg's and cannot go deeper, put theirs in the temp folder.
SHORT = 60


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    events: list[dict[str, Any]]

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]


def marked_line(path: Path, name: str) -> int:
    """The line number of the line marked `# @name` in `path` (names lines, not numbers)."""
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if line.rstrip().endswith(f"# @{name}") or f"# @{name} " in line or line.rstrip().endswith(f"@{name}"):
            return n
    raise LookupError(f"no line marked @{name} in {path}")


def run_stepdbg(tmp_path: Path, *args: str, script_args: tuple[str, ...] = (), timeout: float | None = None,
                stdin: str | None = None, env: dict[str, str] | None = None) -> Run:
    """`stepdbg [args] python SCRIPT ...` as a user types it, with a report in tmp_path. It
    may take WAIT unless told (90 s was a deadline a busy machine reached: a doctor run of
    100 steps took 51 s of a loaded suite)."""
    report = tmp_path / "report.jsonl"
    cmd = [sys.executable, "-m", "stepdbg", "--report", str(report), *args, sys.executable, *script_args]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout or WAIT, cwd=ROOT,
        input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    events = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    errors = [e for e in events if e["event"] == "error"]
    assert not errors, f"a stepdbg hook failed: {errors}"
    return Run(proc.returncode, proc.stdout, proc.stderr, events)


def host_reads_counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a tensor's value to the host from now on, by name (item, tolist, ...):
    on the CPU, what would be a host-device sync on a GPU."""
    import torch

    reads: list[str] = []
    for name in ("item", "tolist", "__float__", "__bool__", "__int__"):
        orig = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name,
                            lambda self, *a, _orig=orig, _name=name, **k: (reads.append(_name), _orig(self, *a, **k))[1])
    return reads


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test starts from the same random state: a model's initialization decides where a
    NaN goes (a -inf row that a ReLU zeroes leaves the loss finite and the gradients NaN, in
    about one initialization of 16), so an unseeded test fails by chance."""
    import random

    random.seed(0)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)


@pytest.fixture
def session_factory():
    """Make in-process sessions; every one is stopped (hooks removed) after the test."""
    from stepdbg.agent.session import Session
    from stepdbg.wire.agent_config import AgentConfig

    made: list[Session] = []

    def make(*breaks: str, actions: tuple[str, ...] = ("report",), **kw: Any) -> Session:
        s = Session(AgentConfig(breaks=list(breaks or ("nan",)), actions=list(actions), quiet=True, **kw))
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.stop()
    # A hook that failed turned itself off quietly; in a test that is a bug to see.
    assert not any(s.guard.disabled for s in made), [s.guard.disabled for s in made]


# ---------------------------------------------------------------------- served jobs (attach, hardening)

FIXTURE = Path(__file__).parent / "fixtures" / "train_loop.py"
# The longest a test waits for an event (a line, a pause, an exit) before it fails: a guard
# against a hang, never a measure. Generous: the suite runs beside other work on 2 cores.
WAIT = 240


@pytest.fixture
def private_runtime_dir(tmp_path, monkeypatch):
    """Each test has its own session directory, so tests never see each other's jobs."""
    d = tmp_path / "run"
    if len(str(d)) > SHORT:  # sshd forwards to the socket's own path, which must fit (test_long_paths: ours)
        d = Path(tempfile.mkdtemp(prefix="run-")) / "run"
    monkeypatch.setenv("STEPDBG_RUNTIME_DIR", str(d))
    monkeypatch.setenv("STEPDBG_AUTH_TIMEOUT", "1")
    return d


class Job:
    def __init__(self, proc: subprocess.Popen, report: Path) -> None:
        self.proc = proc
        self.report = report

    def info(self) -> sessions.SessionInfo:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            live = sessions.listing()
            if live:
                return live[0]
            assert self.proc.poll() is None, self.proc.stderr.read()
            time.sleep(0.05)
        raise AssertionError("the job never announced its session")

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=WAIT)
        return self.proc.returncode, out, err

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.report.read_text().splitlines()]


@pytest.fixture
def start_job(tmp_path):
    jobs: list[Job] = []

    def start(*args: str, script: Path = FIXTURE, script_args: tuple[str, ...] = (), mode: str = "serve") -> Job:
        report = tmp_path / f"report{len(jobs)}.jsonl"
        cmd = [sys.executable, "-m", "stepdbg", mode, "--report", str(report), *args,
               sys.executable, str(script), *script_args]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        jobs.append(Job(proc, report))
        return jobs[-1]

    yield start
    for j in jobs:
        if j.proc.poll() is None:
            j.proc.kill()
            j.proc.communicate()


async def wait_for(pilot: Any, predicate: Any, what: str) -> None:
    """Pilot's pauses until `predicate` holds (a guard against a hang, never a measure)."""
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.1)


def in_time(call: Any) -> Any:
    """`call()`'s answer, or the test fails where it hangs (a client's call waits for its
    answer as long as its op's timeout: a view that never answers is the failure)."""
    import threading

    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(call()), daemon=True)
    t.start()
    t.join(WAIT)
    assert out, "the job never answered"
    return out[0]


@contextlib.contextmanager
def paused_job(start_job: Any, tmp_path: Path, text: str, *args: str,
               script_args: tuple[str, ...] = ()) -> Iterator[tuple[Any, Any]]:
    """A served job of the script `text` (written to tmp_path), started with `args`, and a
    client at its first pause: `with paused_job(start_job, tmp_path, SCRIPT, "--break", ...) as (job, c)`."""
    from stepdbg import client

    script = tmp_path / "train.py"
    script.write_text(text)
    job = start_job(*args, script=script, script_args=script_args)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        yield job, c


def run_past(client: Any, step: int) -> None:
    """Wait until the job's own step (its status, asked of `client`) reaches `step`: a job that
    went on past its break (a guard against a hang, never a measure)."""
    deadline = time.monotonic() + WAIT
    while client.status()["step"] < step:
        assert time.monotonic() < deadline, f"the job never reached step {step}"
        time.sleep(0.05)


@pytest.fixture
def tui_at_break(start_job, private_runtime_dir):
    """The TUI (Pilot) attached to a real served job of its own, from its first pause:
    `async with tui_at_break(*stepdbg_args, script=..., script_args=..., size=...) as (app,
    pilot)`. The job starts for this test alone (no state shared between tests); after the
    block the app closes and the job is ended (it may have ended already)."""
    import contextlib

    @contextlib.asynccontextmanager
    async def attached(*args: str, script: Path = FIXTURE, script_args: tuple[str, ...] = (),
                       size: tuple[int, int] = (80, 24), notifications: bool = False) -> Any:
        from stepdbg.client.async_client import AsyncClient
        from stepdbg_tui.app import StepdbgApp

        start_job(*args, script=script, script_args=script_args).info()
        client = await AsyncClient.connect()
        app = StepdbgApp(client)
        if notifications:  # toasts on (run_test leaves them off), each one raised kept in app.raised
            app.raised = raised = []
            add = app._notifications.add
            app._notifications.add = lambda n: (raised.append(n), add(n))[1]
        try:
            async with app.run_test(size=size, notifications=notifications) as pilot:
                await wait_for(pilot, lambda: app.status.get("state") == "paused", "the first pause")
                yield app, pilot
                app.exit(None)
        finally:
            await client.close(then="end")

    return attached


class Tmux:
    """A real terminal: tmux running `stepdbg ARGS` in the repository, its exit code kept.
    Each has a tmux server of its own (`tmux -L`), so tests in parallel never meet."""

    def __init__(self, tmp_path: Path, runtime_dir: Path, args: str, size: tuple[int, int] = (160, 30),
                 env: str = "") -> None:
        import uuid

        self.name = f"stepdbg-{uuid.uuid4().hex[:8]}"
        self.exit_file = tmp_path / "exit"
        self.runtime_dir = runtime_dir
        cmd = (f"cd {ROOT} && {env} STEPDBG_RUNTIME_DIR={runtime_dir} {sys.executable} -m stepdbg {args}; "
               f"echo $? > {self.exit_file}.new; mv {self.exit_file}.new {self.exit_file}; sleep 600")
        # Not the COLUMNS and LINES a picture test in this worker set: the terminal's own size counts.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        self._tmux("new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]), cmd,
                   env={**env, "TERM": "xterm-256color"})

    def _tmux(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True, check=check,
                              env=env).stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", self.name, check=False)

    def wait_screen(self, text: str, timeout: float = WAIT) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in (s := self.screen()):
                return s
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen()}")

    def keys(self, *k: str) -> None:
        self._tmux("send-keys", "-t", self.name, *k)

    def exit_code(self, timeout: float = WAIT) -> str:
        deadline = time.monotonic() + timeout
        while not self.exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.exit_file.read_text().strip() if self.exit_file.exists() else f"none; screen:\n{self.screen()}"

    def hang_up(self) -> None:
        """The terminal goes, as when its window closes (its processes get SIGHUP)."""
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True)

    def close(self) -> None:
        """The terminal goes, and with it any job it started that still runs: a launched job
        outlives its terminal (a session of its own), so a test that failed midway would
        leave it paused for ever. Its process group is killed: the job, its workers, and
        under torchrun torchrun and the other ranks; never a job in this test's own session
        (start_job's, which the test ends)."""
        self.hang_up()
        import signal

        for f in self.runtime_dir.glob("*.json") if self.runtime_dir.is_dir() else []:
            try:
                pid = int(json.loads(f.read_text())["pid"])
                if os.getsid(pid) != os.getsid(0):
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (OSError, ValueError, KeyError, TypeError):
                pass


def text_of(app: Any, selector: str) -> str:
    """The words a Static of the TUI shows (its content rendered as plain text, 200 columns wide)."""
    import io

    from rich.console import Console

    content = app.screen.query_one(selector).content
    if isinstance(content, str):
        return content
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(content)
    return console.export_text()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A private folder as short as the suite's TMPDIR (pytest's tmp_path under a deep
    TMPDIR is not): for a job given it as its TMPDIR, whose DataLoader workers bind an
    AF_UNIX socket there (107 bytes at most: a plain run fails as well)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="t-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)
