"""Runs a training script with the agent installed before its first line.

Started by the CLI as ``python -m stepdbg.launch.bootstrap SCRIPT ARGS`` (or ``-m MODULE``)
with the configuration in ``STEPDBG_CONFIG``. It keeps the script's ``__main__``
semantics (``runpy`` with ``run_name="__main__"``), its ``sys.argv`` and ``sys.path[0]``,
and its exit code; an uncaught exception is printed as Python prints it.
"""

from __future__ import annotations

import atexit
import os
import runpy
import signal
import sys
import threading
import traceback
from typing import TYPE_CHECKING

import stepdbg
from stepdbg.launch.script import run_script
from stepdbg.wire.agent_config import AgentConfig
from stepdbg.wire.fold import say

if TYPE_CHECKING:
    from stepdbg.agent.session import Session

EXIT_CANNOT_LISTEN = 2  # like a bad stepdbg option: the script never started
EXIT_NO_TORCH = 2


def cannot_listen(e: OSError, listen: str | None) -> str:
    """Why the agent has no socket, in one line that names where and what to set (the
    launcher's and STEPDBG_AUTOSTART's)."""
    if listen:
        return f"cannot listen on {listen}: {e.strerror or e}"
    if isinstance(e, PermissionError) and e.strerror is None:  # sessions' refusal: it names the folder and what to do
        return str(e)
    from stepdbg.wire.sessions import runtime_dir

    why = e.strerror if e.strerror else str(e)
    named = "STEPDBG_RUNTIME_DIR=" if os.environ.get("STEPDBG_RUNTIME_DIR") else "the runtime directory "
    advice = "" if "STEPDBG_RUNTIME_DIR" in why else " (set STEPDBG_RUNTIME_DIR to a folder of yours)"
    return f"cannot listen on a socket in {named}{runtime_dir()}: {why}{advice}"


def _new_session(config: AgentConfig) -> Session:
    """The agent's Session; an interpreter without torch is told in one line what to do."""
    try:
        from stepdbg.launch import session_for

        return session_for(config)
    except ImportError as e:
        if getattr(e, "name", None) not in ("torch", "numpy"):
            raise
        print(f"stepdbg: {sys.executable} cannot import {e.name}: run stepdbg with the interpreter of the "
              "environment that has it (activate it, e.g. `source .venv/bin/activate`, or name its python: "
              f"`stepdbg /path/to/venv/bin/python train.py`)", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_NO_TORCH) from None


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def end_with_launcher() -> None:
    """A torchrun rank ends when its launcher does. Killed with SIGKILL, torchrun cannot
    stop its ranks, and one waiting in a collective whose timeout stepdbg raised (to keep
    a paused job alive) would otherwise linger for days. Linux's PR_SET_PDEATHSIG sends
    this process SIGTERM when its parent exits."""
    if not os.environ.get("TORCHELASTIC_RUN_ID") or not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the launcher died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


def _cannot_start(module: str | None, path: str) -> int | None:
    """A module that is not there, or a script that does not compile, is said as Python says
    it (one error, the real file and line), not as a break inside runpy; exit code 1."""
    if module is not None:
        import importlib.util

        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            print(f"{sys.executable}: No module named {module}", file=sys.stderr, flush=True)
            return 1
        return None
    try:
        with open(path, "rb") as f:
            compile(f.read(), path, "exec")
    except SyntaxError as e:
        traceback.print_exception(type(e), e, None)
        return 1
    except OSError as e:
        print(f"{sys.executable}: can't open file {path!r}: {e.strerror}", file=sys.stderr, flush=True)
        return 2
    return None


_held: list[int] = []  # the Ctrl-Cs that came while the agent started


def hold_ctrl_c() -> object:
    """Ctrl-C while the agent starts is held until the script would start. Raised where it
    came, KeyboardInterrupt went through torch's import: ~40 lines of traceback, or a C++
    `terminate called` (exit 134), or it was swallowed by an import's own `except` and the
    job ran on; the TUI's launcher starts the job with SIGINT blocked, so that Python's own
    start is not interrupted either. Returns SIGINT's handler before (an ignored SIGINT
    stays ignored)."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:
        signal.signal(signal.SIGINT, lambda n, frame: _held.append(n))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # the TUI launcher starts the job with it blocked
    return previous


def release_ctrl_c(previous: object) -> bool:
    """SIGINT's handler as it was; whether a Ctrl-C came while it was held."""
    if previous is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return bool(_held)


def main() -> int:  # noqa: C901, PLR0912, PLR0915 - the launcher's steps in order, and the ways a script ends (exit, Ctrl-C, an exception) that Python itself distinguishes
    env_config = os.environ.pop("STEPDBG_CONFIG", "")
    held = hold_ctrl_c()
    end_with_launcher()
    argv = sys.argv[1:]
    if not argv:
        print("usage: python -m stepdbg.launch.bootstrap SCRIPT [ARGS] | -m MODULE [ARGS]", file=sys.stderr)
        return 2
    module = None
    if argv[0] == "-m":
        module, argv = argv[1], argv[1:]
        sys.path[0] = os.getcwd()
    else:
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    sys.argv = list(argv)
    code = _cannot_start(module, argv[0])
    if code is not None:
        return code
    try:
        config = AgentConfig.from_json(env_config)
    except ValueError as e:  # set by hand, or by another version of stepdbg: one line, as the CLI says it
        say(f"stepdbg: {e}")
        return 2
    config.argv = [sys.executable, *(["-m"] if module else []), *argv]
    session = _new_session(config)
    stepdbg.use(session)
    session.start()
    from stepdbg.agent.measure.frames import user_traceback
    from stepdbg.agent.serve.server import serve

    try:
        serve(session, config.listen, announce=bool(config.serve and config.announce or config.listen))
    except OSError as e:
        why = cannot_listen(e, config.listen)
        if config.serve or config.listen:  # attaching was the point: say why and stop now
            say(f"stepdbg: {why}")
            session.stop(exit_code=EXIT_CANNOT_LISTEN, error=why)
            return EXIT_CANNOT_LISTEN
        say(f"stepdbg: {why}; the job runs without attach")
    tee = None
    if config.forward_output:
        from stepdbg.agent.serve.output_tee import OutputTee

        tee = OutputTee(lambda stream, lines: session.bus.emit("output", {"stream": stream, "lines": lines}))
        session.on_stop.append(tee.stop)
        tee.start()
    code, error = 0, None
    if release_ctrl_c(held):
        return interrupted_before_the_script()
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            # As `python script.py` runs it: argv[0] as typed, __file__ as Python names it (script.py).
            run_script(argv[0])
    except SystemExit as e:
        code = _exit_code(e)
    except KeyboardInterrupt as e:
        print(user_traceback(e), end="", file=sys.stderr)
        session.stop(exit_code=130)
        sys.stderr.flush()
        del e  # (its frames hold the script's objects: a DataLoader's iterator, which ends its workers)
        atexit._run_exitfuncs()  # as Python's own end does before it kills itself: multiprocessing ends
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # its daemonic children there (a DataLoader worker stuck
        os.kill(os.getpid(), signal.SIGINT)  # in a sample was left behind, orphaned, holding the job's output)
        return 130
    except BaseException as e:
        if session.breaker.ending:  # the watchdog ends this stalled rank (exit code 3): wait for it
            threading.Event().wait()
        try:
            ended = session.ranks.ended_by()
        except Exception:  # the store went with the rank that served it: an error of its own
            ended = None
        if ended is not None:  # another rank ended the job: this rank's collective failed for that
            session.say(f"rank {ended['rank']} ended the job ({ended['reason']}); this rank ends with it "
                        f"(exit code {ended['exit_code']})")
            session.stop(exit_code=ended["exit_code"], error=f"rank {ended['rank']} ended the job")
            return int(ended["exit_code"])
        code = 1
        try:
            session.breaker.post_mortem(e)
        except SystemExit as inner:  # abort chosen at the post-mortem
            code = _exit_code(inner)
        print(user_traceback(e), end="", file=sys.stderr)
        error = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-1)[-3:])
    finally:
        sys.stdout.flush()
    session.stop(exit_code=code, error=error)
    return code


def interrupted_before_the_script() -> int:
    """Ctrl-C before the script's first line (the agent importing torch, starting, opening
    its socket): the job ends as plain python interrupted at its start does, killed by
    SIGINT (a shell says 130), with one line that says the script did not run (a bare
    `KeyboardInterrupt` left a newcomer asking, the nineteenth walk's 15), not the ~40 of
    stepdbg's and torch's imports."""
    print("KeyboardInterrupt: Ctrl-C as stepdbg started the job; the script did not run", file=sys.stderr, flush=True)
    session = stepdbg.current()
    if session is not None:
        try:
            session.stop(exit_code=130, error="KeyboardInterrupt")
        except BaseException:  # (a second Ctrl-C, or a session half started): the end is the same
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    return 130


def run() -> int:
    """main(); a KeyboardInterrupt it lets out came before the script ran (the script's
    own is handled in main, as Python handles it)."""
    try:
        return main()
    except KeyboardInterrupt:
        return interrupted_before_the_script()


if __name__ == "__main__":
    sys.exit(run())
