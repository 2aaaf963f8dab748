"""A line console at the terminal for a paused job with no front end attached.

It runs on the paused training thread and calls the session directly. The richer
prompt-toolkit REPL and the TUI come with the front-end issues; this is the fallback
that keeps `--on-break pause` useful from a plain terminal.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

from .conditions import ConditionError, format_size

if TYPE_CHECKING:
    from .session import Session

HELP = """\
stepdbg console (the job is paused):
  Enter, c          continue            n   next pause point     s   next step
  until N           run to step N       r   replay the step (anomaly detection)
  p EXPR            summary of a tensor (loss, batch, model.fc.weight.grad, a local)
  lr X [pin]        set the learning rate (pin: keep it against schedulers/loops)
  skip              do not apply this step's update
  info model|opt|mem|threads|source|history|timings
  break [add SPEC | rm SPEC]            list, add or remove breakpoints
  q                 end the job now (exit code 3)
  anything else     runs as Python in the paused frame"""


def can_prompt() -> bool:
    if os.environ.get("STEPDBG_CONSOLE") == "1":
        return True
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, AttributeError):
        return False


def run_console(session: Session) -> None:
    """Read commands until one resumes the job."""
    from .session import Abort

    out = sys.stderr
    src = session.source(2)
    if src:
        for ln in src["lines"]:
            mark = "->" if ln["line"] == src["line"] else "  "
            print(f"{mark}{ln['line']:5d}  {ln['text']}", file=out)
    print("stepdbg paused; Enter continues, h for help", file=out, flush=True)
    while True:
        print("(stepdbg) ", end="", file=out, flush=True)
        line = sys.stdin.readline()
        if not line:  # EOF: nobody is there to answer, so go on
            session.cont()
            return
        cmd = line.strip()
        try:
            if cmd in ("", "c", "continue"):
                session.cont()
                return
            if cmd in ("n", "next"):
                session.next_phase()
                return
            if cmd in ("s", "step"):
                session.next_step()
                return
            if cmd in ("q", "quit", "abort"):
                raise Abort()
            if cmd in ("h", "help", "?"):
                print(HELP, file=out)
                continue
            word, _, rest = cmd.partition(" ")
            rest = rest.strip()
            if word == "until":
                session.run_to_step(int(rest))
                return
            if word in ("r", "replay"):
                session.replay()
            elif word == "p":
                _show(session.summary(rest))
            elif word == "lr":
                parts = shlex.split(rest)
                session.set_lr(float(parts[0]), pin="pin" in parts[1:])
            elif word == "skip":
                session.skip_step()
            elif word == "info":
                _info(session, rest or "model")
            elif word == "break":
                _break_cmd(session, rest)
            else:
                r = session.evaluate(cmd)
                if r["output"]:
                    print(r["output"], end="", file=out)
                if r["error"]:
                    print(r["error"], end="", file=out)
                elif r["value"] is not None:
                    print(r["value"], file=out)
        except Abort:
            raise
        except (ConditionError, ValueError, KeyError, LookupError, RuntimeError) as e:
            print(f"error: {e}", file=out)


def _show(data: Any) -> None:
    print(json.dumps(data, indent=1, default=str), file=sys.stderr)


def _info(session: Session, what: str) -> None:
    if what == "model":
        for r in session.module_tree():
            g = f"{r['grad_norm']:.3g}" if r["grad_norm"] is not None else "-"
            w = f"{r['weight_norm']:.3g}" if r["weight_norm"] is not None else "-"
            print(f"{'  ' * r['depth']}{r['name']:<24} {r['type']:<16} out={r['output_shape']} "
                  f"params={r['params']} |w|={w} |g|={g} {'train' if r['training'] else 'eval'}",
                  file=sys.stderr)
    elif what == "mem":
        m = session.memory()
        print(f"host RSS {format_size(m['host_rss'] or 0)}", file=sys.stderr)
        for d in m["cuda"]:
            print(f"cuda:{d['device']} allocated {format_size(d['allocated'])} reserved "
                  f"{format_size(d['reserved'])} peak {format_size(d['peak_allocated'])}", file=sys.stderr)
    elif what in ("opt", "optimizer"):
        _show(session.optimizer_info())
    elif what == "threads":
        for t in session.stacks():
            print(f"--- {t['name']}", file=sys.stderr)
            for fr in t["stack"][-8:]:
                print(f"  {fr['file']}:{fr['line']} {fr['function']}: {fr['code']}", file=sys.stderr)
    elif what == "source":
        _show(session.source(8))
    elif what == "history":
        _show(list(session.history)[-20:])
    elif what == "timings":
        _show(session.timings())
    else:
        raise ValueError(f"info what? model, opt, mem, threads, source, history, timings (not {what!r})")


def _break_cmd(session: Session, rest: str) -> None:
    word, _, spec = rest.partition(" ")
    if word == "add":
        session.add_break(spec.strip())
    elif word in ("rm", "remove"):
        session.remove_break(spec.strip())
    for c in session.conditions:
        print(f"  {c.spec}", file=sys.stderr)
