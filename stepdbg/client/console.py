"""A line console: at a pause in the job's own terminal, or over `stepdbg attach`.

The same commands drive either a Session (in process, on the paused training thread)
or a Client (another process, over the protocol): both have the same method names.
The richer prompt-toolkit REPL and the TUI come with the front-end issue; this keeps
`--on-break pause` and `stepdbg attach` useful from a plain terminal.
"""

from __future__ import annotations

import ast
import os
import queue
import shlex
import signal
import sys
import threading
import time
from typing import Any

from ..wire.conditions import ConditionError
from .info_text import info_lines, source_lines
from .tensor_text import format_summary

HELP = """\
stepdbg console:
  c | continue      continue    n | next   next pause point    s | step   next step
  Enter             the last of c, n, s, until N again (as in pdb); continue at first
  until N           run to step N       pause   pause at the next pause point
  r                 replay the step under anomaly detection
  save              write the step's evidence bundle (stepdbg replay PATH replays it later)
  p EXPR            summary of a tensor (loss, batch, model.fc.weight.grad, a local)
  lr X [pin]        set the learning rate (pin: keep it against schedulers and loops)
  skip              do not apply this step's update
  rewind [STEP]     back to the newest snapshot before this step (or STEP's), then continue
  w | where | bt    the paused stack (your frames only, forward() included); > marks the selected
  u | up [N], d | down [N]  select the frame N out (toward main) / in; p, eval, locals, source use it
  locals [all]      the selected frame's locals, yours first (tensors by size); all: dunders,
                    modules, functions and classes too
  info model|torchinfo|opt|mem|threads|source|history|timings|status
  break [add SPEC | rm SPEC]            list, add or remove breakpoints
  q | quit | abort  end the job (exit code 3)
  interrupt         Ctrl-C for the job (SIGINT): its own Ctrl-C handling runs, as at its terminal
  detach [continue|end]                 (attach only) leave; the job stays paused unless told
  ranks | rank N | on 0,2-3|all | compare EXPR      (a distributed job) status of every rank,
                    the rank in view, who gets stepping/LR, EXPR on every rank side by side
  anything else     runs as Python in the paused frame
A line that is Python and starts with a name your frame holds is Python, not a command:
with a variable `step`, `step` prints it and `s` steps; `!LINE` always runs LINE as Python.
Ctrl-C at this prompt does nothing to the job: `interrupt` sends it Ctrl-C, `q` ends it."""

RESUMES = {"c": "cont", "continue": "cont", "n": "next_phase", "next": "next_phase",
           "s": "next_step", "step": "next_step", "q": "end", "quit": "end", "abort": "end"}


def can_prompt() -> bool:
    if os.environ.get("STEPDBG_CONSOLE") == "1":
        return True
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, AttributeError):
        return False


def _out(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


STEPPING = ("c", "continue", "n", "next", "s", "step", "until")
_last_stepping = ["c"]  # what Enter repeats, across pauses (one console per process)


COMMANDS = {*RESUMES, *STEPPING, "h", "help", "?", "detach", "rank", "ranks", "compare", "on", "pause", "r",
            "replay", "save", "p", "lr", "skip", "rewind", "interrupt", "info", "w", "where", "bt", "u", "up", "d",
            "down", "locals", "break"}
IDLE_CTRL_C = ("Ctrl-C here does nothing to the job: `interrupt` sends it Ctrl-C, `q` ends it, "
               "`c` continues{}")


def is_python(target: Any, line: str) -> bool:
    """pdb's rule, made safe: `!LINE` is Python, and so is a line that parses as Python and
    starts with a name the paused frame holds (`step` with a variable step prints it)."""
    if line.startswith("!"):
        return True
    word = line.partition(" ")[0]
    if word not in COMMANDS or not word.isidentifier():
        return False
    try:
        ast.parse(line)
    except SyntaxError:
        return False  # `p loss`, `lr 0.1`, `u 2`: commands
    try:
        return target.evaluate(f"{word!r} in vars()").get("value") == "True"
    except Exception:  # not paused, or the job is gone: the command decides what to say
        return False


def execute(target: Any, cmd: str) -> str | None:  # noqa: C901, PLR0912, PLR0915 - the console's commands, one branch each, in the order the help lists them
    """Run one console command on a Session or Client. Returns "resumed" when the job
    was told to go on, "detach" when the user leaves, "interrupt" for the job's Ctrl-C in
    process (run_console delivers it), else None."""
    cmd = cmd.strip() or _last_stepping[0]
    if is_python(target, cmd):
        _show_evaluation(_evaluate(target, cmd.removeprefix("!")))
        return None
    if cmd.partition(" ")[0] in STEPPING:
        _last_stepping[0] = cmd
    if cmd in RESUMES:
        getattr(target, RESUMES[cmd])()
        return "resumed"
    if cmd in ("h", "help", "?"):
        _out(HELP)
        return None
    word, _, rest = cmd.partition(" ")
    rest = rest.strip()
    if word == "detach":
        return "detach"
    if hasattr(target, "rank_table") and word in ("rank", "ranks", "compare", "on"):
        _job_command(target, word, rest)
        return None
    if word == "until":
        target.run_to_step(int(rest))
        return "resumed"
    if word == "pause":
        target.pause()
    elif word in ("r", "replay"):
        result = target.replay()  # (in process the job says it: stepdbg: replay of step N: ...)
        _confirm(target, result["summary"] + (f"\n{result['verdict']}" if result.get("verdict") else ""))
    elif word == "save":
        r = target.save()
        _confirm(target, f"evidence bundle: {r['path']}" if r.get("saved") else f"not saved: {r.get('error')}")
    elif word == "p":
        _out(format_summary(target.summary(rest)))
    elif word == "lr":
        parts = shlex.split(rest)
        r = target.set_lr(float(parts[0]), pin="pin" in parts[1:])
        _confirm(target, f"LR set to {float(parts[0]):g}{' and pinned' if r.get('pinned') else ''} "
                         f"(param groups {', '.join(str(g['group']) for g in r.get('groups', []))})")
    elif word == "skip":
        target.skip_step()
        _confirm(target, "this step's update will not be applied")
    elif word == "rewind":
        r = target.rewind(int(rest) if rest else None)
        _out(f"rewinding to the snapshot of step {r['to_step']} where this step ends")
        return "resumed"
    elif word == "interrupt":
        if not getattr(target, "remote", False):
            return "interrupt"  # run_console delivers it, where its own Ctrl-C guard is not
        r = target.interrupt_job()
        _out(f"Ctrl-C sent to the job (pid {r['pid']}): its own Ctrl-C handling runs")
        return "resumed"
    elif word == "info":
        _lines(info_lines(target, rest or "model"))
    elif word in ("w", "where", "bt"):
        _show_frames(target.frames())
    elif word in ("u", "up", "d", "down"):
        by = int(rest) if rest else 1
        _show_frames(target.frames(by if word in ("u", "up") else -by), selected_only=True)
        show_source(target)
    elif word == "locals":
        rows = target.frame_locals(everything=rest == "all")
        width = max((len(r["name"]) for r in rows), default=0)
        for r in rows:
            _out(f"  {r['name']:<{width}}  {r['type']:<12} {r['value']}")
    elif word == "break":
        sub, _, spec = rest.partition(" ")
        if sub == "add":
            target.add_break(spec.strip())
        elif sub in ("rm", "remove"):
            target.remove_break(spec.strip())
        for spec in target.break_specs():
            _out(f"  {spec}")
    else:
        _show_evaluation(_evaluate(target, cmd))
    return None


def _interrupt_here() -> str | None:  # "resumed" when the job goes on, None when it stays paused
    """Ctrl-C at the job's own console, as its terminal would deliver it: the script's SIGINT
    handler runs on this thread, the paused training thread. Python's own raises
    KeyboardInterrupt, which leaves the pause into the script's code, where its `except
    KeyboardInterrupt` runs. A handler of the script's that returns leaves the job paused."""
    handler = signal.getsignal(signal.SIGINT)
    if handler is signal.SIG_IGN:
        _out("the job ignores Ctrl-C (SIGINT is set to be ignored): nothing happened")
        return None
    if not callable(handler) or threading.current_thread() is not threading.main_thread():
        os.kill(os.getpid(), signal.SIGINT)  # the default action, or Python's delivery to its main thread
        return "resumed"
    handler(signal.SIGINT, sys._getframe())
    _out("the job's Ctrl-C handler ran and returned: the job stays paused")
    return None


def _show_evaluation(r: dict[str, Any]) -> None:
    if r["output"]:
        print(r["output"], end="", file=sys.stderr)
    if r["error"]:
        print(r["error"], end="", file=sys.stderr)
    elif r["value"] is not None:
        _out(r["value"])


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


def _confirm(target: Any, words: str) -> None:
    """A change, confirmed in one line. In process the job says it itself (stepdbg: change: ...)."""
    if getattr(target, "remote", False):
        _out(words)


def _evaluate(target: Any, code: str) -> dict[str, Any]:
    """Evaluate in the paused frame; over a connection, Ctrl-C stops the code in the job
    (the `interrupt` op) and the answer still comes back. In process, Ctrl-C reaches the
    evaluated code directly."""
    if not getattr(target, "remote", False):
        return target.evaluate(code)
    answer: dict[str, Any] = {}
    failed: list[BaseException] = []

    def run() -> None:
        try:
            answer.update(target.evaluate(code))
        except BaseException as e:  # handed to the console's thread below
            failed.append(e)

    worker = threading.Thread(target=run, name="stepdbg-console-eval", daemon=True)
    worker.start()
    while worker.is_alive():
        try:
            worker.join(0.1)
        except KeyboardInterrupt:
            _out("interrupting the code in the job…")
            target.interrupt()
    if failed:
        raise failed[0]
    return answer


ENDS = tuple(k for k, v in RESUMES.items() if v == "end")


def _ended(client: Any, timeout: float = 60.0) -> bool:
    """Wait (bounded) for the end a `q` asked for; True once it came."""
    deadline = time.monotonic() + timeout
    while client.exited is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return client.exited is not None


def _job_command(job: Any, word: str, rest: str) -> None:
    """The commands only a whole job has: which rank is in view, who gets commands, compare."""
    from .job import parse_ranks

    if word == "rank":
        job.current = parse_ranks(rest, len(job.clients))[0]
        _out(f"rank {job.current} in view")
    elif word == "on":
        job.targets = None if rest in ("", "all") else parse_ranks(rest, len(job.clients))
        _out(f"stepping and changes go to ranks {'all' if job.targets is None else job.targets}")
    elif word == "ranks":
        for line in job.ranks_text():
            _out(line)
    else:
        for rank, value in job.compare(rest):
            _out(f"  rank {rank}: {value}")


def _errors() -> tuple[type[BaseException], ...]:
    from .connection import ClientError

    return (ConditionError, ValueError, KeyError, LookupError, RuntimeError, ClientError, IndexError)


def _show_frames(frames: list[dict[str, Any]], selected_only: bool = False) -> None:
    """The paused stack as pdb's `w` prints it: outermost first, `>` at the selected frame."""
    if not frames:
        _out("no paused frame of yours")
    for f in frames:
        if f["selected"] or not selected_only:
            _out(f"{'>' if f['selected'] else ' '} {f['file']}:{f['line']} in {f['function']}()\n    {f['code']}")


def show_source(target: Any, context: int = 2) -> None:
    _lines(source_lines(target.source(context)))


def run_console(session: Any) -> None:
    """In process, on the paused training thread: read commands until one resumes."""
    show_source(session)
    _out(f"stepdbg paused; Enter: {_last_stepping[0]}, h for help")
    while True:
        try:  # Ctrl-C anywhere here (the prompt being written, too) is the console's, not the job's
            print("(stepdbg) ", end="", file=sys.stderr, flush=True)
            line = sys.stdin.readline()
            if not line:  # EOF: nobody is there to answer, so go on
                session.cont()
                return
            done = execute(session, line)
        except KeyboardInterrupt:
            _out("\n" + IDLE_CTRL_C.format(""))
            continue
        except _errors() as e:
            _out(f"error: {e}")
            continue
        if done == "interrupt":  # the job's own Ctrl-C, delivered outside the guard above
            _out("Ctrl-C for the job, as at its terminal: its own Ctrl-C handling runs")
            if _interrupt_here() is None:
                continue
            return
        if done == "resumed":
            return


def attach_console(client: Any) -> int:  # noqa: C901, PLR0912 - the console's loop: input, events and the job's end interleave in one place
    """Over `stepdbg attach`: commands any time; pauses and the end are shown as they come.

    Returns the job's exit code when it ends while attached, else 0."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read_stdin, name="stepdbg-stdin", daemon=True).start()
    st = client.status_at_attach or client.status()
    if hasattr(client, "rank_table"):
        _out(f"attached to job {client.session.get('job_id')}: {len(client.clients)} ranks, rank {client.current} "
             "in view (ranks, rank N, on SET, compare EXPR); stepping and LR go to every rank")
    _out(f"attached to pid {client.session.get('pid')} ({' '.join(client.session.get('argv', [])[1:])}), "
         f"step {st.get('step')}, {st.get('state')}; h for help, detach to leave")
    shown, ending = None, False
    while True:
        if client.exited is not None:
            ex = client.exited
            if "lost" in ex:
                _out(f"stepdbg: {ex['lost']}")
                return 1
            _out(f"the job ended with exit code {ex.get('exit_code')} after {ex.get('steps')} steps")
            return int(ex.get("exit_code") or 0)
        brk = client.paused
        if brk is not None and brk is not shown:
            shown = brk
            _out(f"paused at step {brk['step']} ({brk['phase']}) [{brk['condition']}]: {brk['reason']}")
            try:
                show_source(client)
            except _errors():
                pass
            print("(stepdbg) ", end="", file=sys.stderr, flush=True)
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        except KeyboardInterrupt:
            _out("\n" + IDLE_CTRL_C.format(", `detach` leaves"))
            continue
        if line is None:
            if ending and _ended(client):  # `q` was the last line: its end is the answer, not a detach
                continue
            _out(detach(client, "detach"))
            return 0
        ending = line.strip() in ENDS or ending
        try:
            if execute(client, line) == "detach":
                _out(detach(client, line))
                return 0
        except _errors() as e:
            _out(f"error: {e}")
        except ConnectionError as e:
            _out(f"stepdbg: {e}")
            return 1
        if client.paused is not None:
            print("(stepdbg) ", end="", file=sys.stderr, flush=True)


def _lines(lines: list[str]) -> None:
    for line in lines:
        _out(line)
