"""The console's commands, one handler each: `c`, `p EXPR`, `lr X pin`, `break add SPEC`, ...

The same commands drive a Session (in process, at the job's own terminal) or a Client or
Job (over `stepdbg attach`): both have the same method names. ``execute`` runs one line;
a line that is not a command runs as Python in the paused frame. The loops that read the
lines are in console.py (and the prompt-toolkit REPL in the TUI package).
"""

from __future__ import annotations

import ast
import difflib
import shlex
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..wire.change_text import change_said, change_words, rewind_answer
from ..wire.conditions import parse as parse_condition
from ..wire.fold import columns, for_terminal
from ..wire.numbers import ascii_int
from ..wire.ops import lr_typed
from ..wire.rank_diff import USAGE as RANKS_USAGE
from ..wire.rank_diff import tolerances
from ..wire.rank_words import targets_words
from .info_text import info_lines, source_lines
from .replays_heard import own_replay
from .tensor_text import format_summary

HELP = """\
stepdbg console:
  c | continue    continue           n | next   to the next pause point
  s | step        the same pause point of the next step
  until N         run to step N
  Enter           the last of c, n, s, until again (as pdb); at first continue
  pause           pause at the next pause point
  r               replay the step under anomaly detection
  save            write the step's evidence bundle (for stepdbg replay PATH)
  diff            run the step twice from the same state: where the runs part
  diff compile [BACKEND]  the forward eagerly and under torch.compile
                  (inductor; aot_eager, eager): the first module that differs
  diff ranks [--atol X] [--rtol Y]  (a distributed job) every rank's
                  parameters and gradients: the first whose replicas differ,
                  and the ranks (bitwise unless a tolerance is given)
  p EXPR          a tensor's summary (loss, batch, model.fc.weight.grad, ...)
  lr X [pin]      set the learning rate (pin: keep it against schedulers)
  skip            do not apply this step's update
  rewind [STEP]   back to the newest snapshot before this step (or STEP's),
                  where this step ends; the job runs on, as after c
  w | where | bt  the paused stack (your frames only); > marks the selected one
  u | up [N]      select the frame N out (toward main); d | down [N]: N in;
                  p, eval, locals and source follow the selected frame
  locals [all]    the selected frame's locals, yours first (tensors by size);
                  all: dunders, modules, functions and classes too
  info WHAT       model, torchinfo, opt, mem, threads, breaks, source,
                  history, timings or status
  break           list the breakpoints; break add SPEC, break rm SPEC,
                  break off SPEC (kept, not checked), break on SPEC
  q | quit | abort  end the job (exit code 3)
  interrupt       Ctrl-C for the job (SIGINT): its own Ctrl-C handling runs
  detach [continue|end]  (attach only) leave; the job stays paused unless told
  ranks | rank N | on 0,2-3|all | compare EXPR   (a distributed job): every
                  rank's status, the rank in view, who gets stepping and LR,
                  EXPR on every rank
  anything else   runs as Python in the paused frame
A line that is Python and starts with a name your frame holds is Python, not a
command: with a variable `step`, `step` prints it and `s` steps; `!LINE` always
runs LINE as Python. Ctrl-C at this prompt does nothing to the job: `interrupt`
sends it Ctrl-C, `q` ends it."""

RESUMES = {"c": "cont", "continue": "cont", "n": "next_phase", "next": "next_phase",
           "s": "next_step", "step": "next_step", "q": "end", "quit": "end", "abort": "end"}


def out(text: str) -> None:
    print(for_terminal(text, sys.stderr), file=sys.stderr, flush=True)  # (at a terminal, folded between words)


STEPPING = ("c", "continue", "n", "next", "s", "step", "until")
last_stepping = ["c"]  # what Enter repeats, across pauses (one console per process)


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
        return word in target.attribute_names("", word)  # (the frame's names, read running none of your code)
    except Exception:  # not paused, or the job is gone: the command decides what to say
        return False


def execute(target: Any, cmd: str) -> str | None:
    """Run one console command on a Session or Client. Returns "resumed" when the job
    was told to go on, "detach" when the user leaves, "interrupt" for the job's Ctrl-C in
    process (run_console delivers it), else None."""
    repeated = not cmd.strip()  # Enter: the last stepping command again
    cmd = cmd.strip() or last_stepping[0]
    if is_python(target, cmd):
        _show_evaluation(_evaluate(target, cmd.removeprefix("!")))
        return None
    if cmd.partition(" ")[0] in STEPPING:
        last_stepping[0] = cmd
    if cmd in RESUMES:
        getattr(target, RESUMES[cmd])(**({"by": "console"} if RESUMES[cmd] == "end" else {}))
        return "resumed"
    word, _, rest = cmd.partition(" ")
    if getattr(target, "many_ranks", False) and word in JOB_WORDS:
        _job_command(target, word, rest.strip())
        return None
    handler = HANDLERS.get(word)
    if handler is None:
        r = _evaluate(target, cmd)
        if cmd.isidentifier() and f"NameError: name '{cmd}' is not defined" in (r.get("error") or ""):
            out(not_a_command(cmd))  # (`i` said Python's NameError, as if the console had no commands)
        else:
            _show_evaluation(r)
        return None
    try:
        return handler(target, word, rest.strip())
    except Exception as e:  # (Enter after `until 10` reached step 10 said only 'step 10 is not ahead')
        if repeated and word == "until":
            raise ValueError(f"Enter repeats the last stepping command, `{cmd}`, which cannot run now: {e}; "
                             "c, n, s or until N go on") from None
        raise


def not_a_command(word: str) -> str:
    """A lone word that is neither a command nor a name in the paused frame: the commands it
    may mean ('i': info or interrupt; 'contnue': continue), where the help is."""
    near = sorted(c for c in COMMANDS if c.startswith(word)) if len(word) == 1 else \
        difflib.get_close_matches(word, sorted(COMMANDS), 3)
    return (f"{word}: not a command, nor a name in the paused frame"
            + (f"; did you mean {' or '.join(near)}?" if near else "") + " (h lists the commands)")


# ---------------------------------------------------------------------- one handler a command
# Each takes the target, the command's word and the rest of the line; returns what execute does.


def _help(target: Any, word: str, rest: str) -> str | None:
    out(HELP)
    return None


def _detach(target: Any, word: str, rest: str) -> str | None:
    return "detach"


UNTIL_USAGE = "until N: run to step N, a step number ahead of this one, e.g. until 40"


def _until(target: Any, word: str, rest: str) -> str | None:
    step = ascii_int(rest)
    if step is None:  # (`until abc` said Python's int() error)
        raise ValueError(UNTIL_USAGE)
    target.run_to_step(step)
    return "resumed"


def _pause(target: Any, word: str, rest: str) -> str | None:
    target.pause()
    return None


def _replay(target: Any, word: str, rest: str) -> str | None:
    result = own_replay(target)  # (in process the job says it: stepdbg: replay of step N: ...)
    _confirm(target, result["summary"] + (f"\n{result['verdict']}" if result.get("verdict") else ""))
    return None


def _diff(target: Any, word: str, rest: str) -> str | None:
    mode, _, backend = rest.partition(" ")
    if mode == "compile":
        r = target.diff_compile(backend.strip() or "inductor")
        _confirm(target, f"diff compile: {r['summary']}")
    elif mode == "ranks":
        from .replicas import diff_ranks

        atol, rtol = tolerances(shlex.split(backend))
        out(f"diff ranks: {diff_ranks(target, atol, rtol, lambda far: out(f'diff ranks: {far}…'))['summary']}")
    elif mode:
        out(f"diff {mode}? diff (the step twice from the same state), diff compile [inductor|aot_eager|eager] "
            f"or {RANKS_USAGE}")
    else:
        r = target.diff_step()  # (in process the job says it: stepdbg: diff: ...)
        _confirm(target, f"diff: {r['summary']}")
    return None


def _save(target: Any, word: str, rest: str) -> str | None:
    r = target.save()
    _confirm(target, f"evidence bundle: {r['path']}" if r.get("saved") else f"not saved: {r.get('error')}")
    return None


def _print(target: Any, word: str, rest: str) -> str | None:
    """`p EXPR`: a tensor's summary; `None` where EXPR is None, as pdb's p says it (a gradient's
    None is said with why: not required, not a leaf, no backward yet)."""
    s = target.summary(rest)
    out("None" if s.get("type") == "NoneType" and not rest.endswith(".grad") else format_summary(s))
    return None


def _lr(target: Any, word: str, rest: str) -> str | None:
    parts = shlex.split(rest)
    if not parts:
        out("lr X [pin]: set the learning rate, e.g. lr 3e-4 (info opt shows the groups' LRs)")
        return None
    _confirm(target, change_said(target.set_lr(lr_typed(parts[0]), pin="pin" in parts[1:])))
    return None


def _skip(target: Any, word: str, rest: str) -> str | None:
    _confirm(target, change_said(target.skip_step()))
    return None


def _rewind(target: Any, word: str, rest: str) -> str | None:
    r = target.rewind(int(rest) if rest else None)
    out(rewind_answer(r))
    return "resumed"


def _interrupt(target: Any, word: str, rest: str) -> str | None:
    if not getattr(target, "remote", False):
        return "interrupt"  # run_console delivers it, where its own Ctrl-C guard is not
    r = target.interrupt_job()
    out(f"Ctrl-C sent to the job (pid {r['pid']}): its own Ctrl-C handling runs")
    return "resumed"


def _info(target: Any, word: str, rest: str) -> str | None:
    _lines(info_lines(target, rest or "model", columns(sys.stderr)))
    return None


def _where(target: Any, word: str, rest: str) -> str | None:
    _show_frames(target.frames())
    return None


def _up_down(target: Any, word: str, rest: str) -> str | None:
    by = int(rest) if rest else 1
    up = word in ("u", "up")
    at = [f["selected"] for f in target.frames()]
    frames = target.frames(by if up else -by)
    if frames and at == [f["selected"] for f in frames]:  # (`u` at the outermost showed the same frame, silently)
        out(f"already at the {'outermost' if up else 'innermost'} frame")
    _show_frames(frames, selected_only=True)
    show_source(target)
    return None


def _locals(target: Any, word: str, rest: str) -> str | None:
    rows = target.frame_locals(everything=rest == "all")
    width = max((len(r["name"]) for r in rows), default=0)
    kind = min(max((len(r["type"]) for r in rows), default=0), 24)  # (ArgumentParser ran into its value)
    for r in rows:
        out(f"  {r['name']:<{width}}  {r['type']:<{kind}}  {r['value']}")
    return None


def added_words(spec: str, had: list[str]) -> str:
    """What `break add SPEC` did, as the Log says a change ('breakpoint added: grad_norm>10'),
    or that the breakpoint was there already (nothing changed, so the job says nothing)."""
    same = parse_condition(spec).spec
    return f"{same} is there already: not added again" if same in had else \
        change_words({"what": "break_add", "spec": same})


def _break(target: Any, word: str, rest: str) -> str | None:
    """What was added or removed, in one line (the change's words), then the breakpoints."""
    sub, _, spec = rest.partition(" ")
    spec = spec.strip()
    if sub in ("add", "rm", "remove", "on", "off") and not spec:
        raise ValueError(f"break {sub} what? a breakpoint's spec (break {sub} nan)")
    if sub == "add":
        had = target.break_specs()
        target.add_break(spec)  # (a bad spec: the job's refusal, said as an error)
        if parse_condition(spec).spec in had:
            out(added_words(spec, had))  # no change: the job said nothing
        else:
            _confirm(target, added_words(spec, had))
    elif sub in ("rm", "remove"):
        target.remove_break(spec)
        _confirm(target, change_words({"what": "break_remove", "spec": spec}))
    elif sub in ("on", "off"):
        target.enable_break(spec, sub == "on")
        _confirm(target, change_words({"what": "break_enable", "spec": spec, "enabled": sub == "on"}))
    elif sub:
        raise ValueError(f"break what? add, rm, on or off SPEC (not {sub!r})")
    for line in info_lines(target, "breaks"):
        out(line)
    return None


# The commands in the order the help lists them (c, n, s and q are RESUMES).
HANDLERS: dict[str, Callable[[Any, str, str], str | None]] = {
    "h": _help, "help": _help, "?": _help, "detach": _detach, "until": _until, "pause": _pause,
    "r": _replay, "replay": _replay, "save": _save, "diff": _diff, "p": _print, "lr": _lr, "skip": _skip, "rewind": _rewind,
    "interrupt": _interrupt, "info": _info, "w": _where, "where": _where, "bt": _where,
    "u": _up_down, "up": _up_down, "d": _up_down, "down": _up_down, "locals": _locals, "break": _break,
}
JOB_WORDS = ("rank", "ranks", "compare", "on")  # a whole job's own (_job_command)
COMMANDS = {*RESUMES, *HANDLERS, *JOB_WORDS}


def _show_evaluation(r: dict[str, Any]) -> None:
    if r["output"]:
        print(r["output"], end="", file=sys.stderr)
    if r["error"]:
        print(r["error"], end="", file=sys.stderr)
    elif r["value"] is not None:
        out(r["value"])


def _confirm(target: Any, words: str) -> None:
    """A change, confirmed in one line. In process the job says it itself (stepdbg: change: ...)."""
    if getattr(target, "remote", False):
        out(words)


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
            out("interrupting the code in the job…")
            target.interrupt()
    if failed:
        raise failed[0]
    return answer


def _job_command(job: Any, word: str, rest: str) -> None:
    """The commands only a whole job has: which rank is in view, who gets commands, compare."""
    from .job import odd_ranks, parse_ranks

    if word == "rank":
        job.current = parse_ranks(rest, len(job.clients))[0]
        out(f"rank {job.current} in view")
    elif word == "on":
        job.targets = None if rest in ("", "all") else parse_ranks(rest, len(job.clients))
        out(targets_words(job.targets))
    elif word == "ranks":
        for line in job.ranks_text():
            out(line)
    else:
        values = job.compare(rest)
        odd = odd_ranks(values)
        for rank, value in values:
            out(f"  rank {rank}: {value}" + ("   <- differs" if rank in odd else ""))
        if len({v for _, v in values}) == 1:
            out("  (every rank has the same value)")


def _show_frames(frames: list[dict[str, Any]], selected_only: bool = False) -> None:
    """The paused stack as pdb's `w` prints it: outermost first, `>` at the selected frame."""
    if not frames:
        out("no paused frame of yours")
    for f in frames:
        if f["selected"] or not selected_only:
            out(f"{'>' if f['selected'] else ' '} {f['file']}:{f['line']} in {f['function']}()\n    {f['code']}")


def show_source(target: Any, context: int = 2) -> None:
    _lines(source_lines(target.source(context)))


def _lines(lines: list[str]) -> None:
    for line in lines:
        out(line)
