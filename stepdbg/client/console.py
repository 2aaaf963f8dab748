"""A line console: at a pause in the job's own terminal, or over `stepdbg attach`.

This is the loop that reads lines and shows what the job does between them; the
commands themselves are in commands.py. The same commands drive either a Session (in
process, on the paused training thread) or a Client (another process, over the protocol).
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from typing import Any

from ..wire.conditions import ConditionError
from .commands import COMMANDS, RESUMES, execute, last_stepping, out, show_source
from .connection import lost_words
from .console_line import ConsoleLine, at_terminal, ctrl_c_ours, words_for
from .replays_heard import pause_words, replays_heard

LINE_LIMIT = 1 << 20  # characters of one typed or piped line: a command, or code to evaluate
CLEAR = "\x1b[H\x1b[2J"  # what Ctrl-L does at a shell's prompt: the screen cleared


def _ctrl_l(line: str) -> str:
    """Ctrl-L typed into a line (the terminal passes it on as a character: `clear^Lbreak add
    loss>100` was a SyntaxError): the screen is cleared, as a shell does, and the line is what
    was typed after it, the part the person still sees."""
    if "\f" not in line:
        return line
    if sys.stderr is not None and sys.stderr.isatty():
        print(CLEAR, end="", file=sys.stderr, flush=True)
    return line.rpartition("\f")[2]


def read_line(stream: Any) -> str | None:
    """The next line of `stream`, read at most LINE_LIMIT at a time (a pipe that never sends
    a newline must not fill the job's memory); a longer line is read to its end, dropped and
    said, and the line after it is returned. None at the end of input."""
    while True:
        line = stream.readline(LINE_LIMIT + 1)
        if not line:
            return None
        if len(line) <= LINE_LIMIT or line.endswith("\n"):
            return _ctrl_l(line)
        while (rest := stream.readline(LINE_LIMIT)) and not rest.endswith("\n"):
            pass
        out(f"error: a line of over {LINE_LIMIT:,} characters was ignored")


def can_prompt() -> bool:
    if os.environ.get("STEPDBG_CONSOLE") == "1":
        return True
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, AttributeError):
        return False


IDLE_CTRL_C = ("Ctrl-C here does nothing to the job: `interrupt` sends it Ctrl-C,\n`q` ends it, "
               "`c` continues{}")  # (lines within 80 columns)


def _interrupt_here() -> str | None:  # "resumed" when the job goes on, None when it stays paused
    """Ctrl-C at the job's own console, as its terminal would deliver it: the script's SIGINT
    handler runs on this thread, the paused training thread. Python's own raises
    KeyboardInterrupt, which leaves the pause into the script's code, where its `except
    KeyboardInterrupt` runs. A handler of the script's that returns leaves the job paused."""
    handler = signal.getsignal(signal.SIGINT)
    if handler is signal.SIG_IGN:
        out("the job ignores Ctrl-C (SIGINT is set to be ignored): nothing happened")
        return None
    if not callable(handler) or threading.current_thread() is not threading.main_thread():
        os.kill(os.getpid(), signal.SIGINT)  # the default action, or Python's delivery to its main thread
        return "resumed"
    handler(signal.SIGINT, sys._getframe())
    out("the job's Ctrl-C handler ran and returned: the job stays paused")
    return None


DETACH_THEN = ("stay", "continue", "end")


def detach(client: Any, line: str) -> str:
    """Leave the job as `detach [continue|end]` says; the words that say what happened to it."""
    words = line.split()
    then = words[1] if len(words) > 1 else "stay"
    if then not in DETACH_THEN:
        raise ValueError(f"detach {then}? detach (the job stays as it is), detach continue or detach end")
    paused = client.paused is not None
    client.close(then=then)
    if then == "end":
        return "detached; the job is ending (exit code 3)"
    if then == "stay" and paused:
        again = getattr(client, "again", None) or client.session.get("id")
        return f"detached; the job stays paused: `stepdbg attach {again}` comes back"
    return "detached; the job goes on"


ENDS = tuple(k for k, v in RESUMES.items() if v == "end")


def end_words(client: Any, lost: str | None = None) -> tuple[str, int]:
    """How the job ended while attached, in one line, and the attach's exit code: the job's
    own, or 1 where the connection was lost (`lost`: a call's ConnectionError, before the
    end is known), said as the job being gone (its pid, killed, no exit code) or unreachable."""
    ex = client.exited or ({"lost": lost} if lost else {})
    if "lost" in ex:
        return f"stepdbg: {lost_words(client.session, ex['lost'])}", 1
    return (f"the job ended with exit code {ex.get('exit_code')} after {ex.get('steps')} steps",
            int(ex.get("exit_code") or 0))


def _ended(client: Any, timeout: float = 60.0) -> bool:
    """Wait (bounded) for the end a `q` asked for; True once it came."""
    deadline = time.monotonic() + timeout
    while client.exited is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return client.exited is not None


def error_line(e: BaseException) -> str:
    """An error as the console says it; one that needs the job paused names the command that
    pauses it (`p loss` on a running job said 'pause it first' and not how)."""
    return f"error: {e} (type `pause`)" if getattr(e, "code", None) == "not_paused" else f"error: {e}"


def _errors() -> tuple[type[BaseException], ...]:
    from .connection import ClientError

    return (ConditionError, ValueError, KeyError, LookupError, RuntimeError, ClientError, IndexError)


def enter_offer(session: Any) -> str:
    """'Enter: n, ' where Enter can repeat the last stepping command; '' where it cannot: an
    `until 4` paused at step 4 (the prompt offered 'Enter: until 4', which then failed)."""
    word, _, rest = last_stepping[0].partition(" ")
    try:
        step = session.status().get("step") if word == "until" else None
    except _errors():
        step = None
    if word == "until" and rest.strip().isdigit() and isinstance(step, int) and int(rest) <= step:
        return ""
    return f"Enter: {last_stepping[0]}, "


_LINE: list[ConsoleLine] = []  # the console's line at a terminal (its history kept from pause to pause)


def _typed_line(session: Any) -> str | None:
    """The next line typed at the prompt: at a terminal with readline (Up, Tab), else read
    as a pipe's, bounded."""
    if not at_terminal():
        with ctrl_c_ours():
            print("(stepdbg) ", end="", file=sys.stderr, flush=True)
            return read_line(sys.stdin)
    complete = words_for(session, sorted(COMMANDS))  # (this pause's session; the history is kept)
    if not _LINE:
        _LINE.append(ConsoleLine(complete))
    _LINE[0].complete = complete
    line = _LINE[0].read("(stepdbg) ")
    if line is not None and len(line) > LINE_LIMIT:
        out(f"error: a line of over {LINE_LIMIT:,} characters was ignored")
        return _typed_line(session)
    return line


def run_console(session: Any) -> None:
    """In process, on the paused training thread: read commands until one resumes."""
    show_source(session)
    out(f"stepdbg paused; {enter_offer(session)}h for help")
    while True:
        try:  # Ctrl-C anywhere here (the prompt being written, too) is the console's, not the job's
            line = _typed_line(session)
            if line is None:  # EOF: nobody is there to answer, so go on
                if sys.stdin is not None and sys.stdin.isatty():  # (Ctrl-D went on in silence: say so)
                    out("\nCtrl-D: the job goes on, as c (q ends it)")
                session.cont()
                return
            done = execute(session, line)
        except KeyboardInterrupt:
            out("\n" + IDLE_CTRL_C.format(""))
            continue
        except _errors() as e:
            out(error_line(e))
            continue
        if done == "interrupt":  # the job's own Ctrl-C, delivered outside the guard above
            out("Ctrl-C for the job, as at its terminal: its own Ctrl-C handling runs")
            if _interrupt_here() is None:
                continue
            return
        if done == "resumed":
            return


def _say_heard(client: Any) -> None:
    """A replay another client ran (r in the TUI), said once, the prompt again after it."""
    for words in replays_heard(client):
        out(words)
        print("(stepdbg) ", end="", file=sys.stderr, flush=True)


def _say_pause(client: Any, brk: dict[str, Any]) -> None:
    """A pause at the attached console: its break, the replay run at it before this console
    attached (the pause's reason then points at it), its source, the prompt."""
    for words in pause_words(brk):
        out(words)
    try:
        show_source(client)
    except (*_errors(), ConnectionError):  # the job gone meanwhile: said at the loop's next turn
        pass
    print("(stepdbg) ", end="", file=sys.stderr, flush=True)


def attach_console(client: Any) -> int:  # noqa: C901, PLR0912 - the console's loop: input, events and the job's end interleave in one place
    """Over `stepdbg attach`: commands any time; pauses and the end are shown as they come.

    Returns the job's exit code when it ends while attached, else 0."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read_stdin() -> None:
        while (line := read_line(sys.stdin)) is not None:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read_stdin, name="stepdbg-stdin", daemon=True).start()
    st = client.status_at_attach or client.status()
    if client.many_ranks:
        out(f"attached to job {client.session.get('job_id')}: {len(client.clients)} ranks, rank {client.current} "
             "in view (ranks, rank N, on SET, compare EXPR); stepping and LR go to every rank")
    out(f"attached to pid {client.session.get('pid')} ({' '.join(client.session.get('argv', [])[1:])}), "
         f"step {st.get('step')}, {st.get('state')}; h for help, detach to leave (the job stays as it is), q ends the job")
    shown, ending = None, False
    while True:
        if client.exited is not None:
            words, code = end_words(client)
            out(words)
            return code
        brk = client.paused
        if brk is not None and brk is not shown:
            shown = brk
            _say_pause(client, brk)
        _say_heard(client)
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        except KeyboardInterrupt:
            out("\n" + IDLE_CTRL_C.format(", `detach` leaves"))
            continue
        if line is None:
            if ending and _ended(client):  # `q` was the last line: its end is the answer, not a detach
                continue
            out(detach(client, "detach"))
            return 0
        ending = line.strip() in ENDS or ending
        try:
            if execute(client, line) == "detach":
                out(detach(client, line))
                return 0
        except _errors() as e:
            out(error_line(e))
        except ConnectionError as e:
            words, code = end_words(client, str(e))
            out(words)
            return code
        if client.paused is not None:
            print("(stepdbg) ", end="", file=sys.stderr, flush=True)


