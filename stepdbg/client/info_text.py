"""The console's `info` answers as tables a person reads, with the TUI's words: the
model, the optimizer (groups, state, schedulers), memory, threads, the source, the recent
steps, the phase timings and the status. The Optim panel shows the same state and
scheduler lines."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from ..wire.conditions import format_size
from ..wire.replay_text import pause_reason
from .memory_text import memory_lines


def num(v: Any, digits: int = 4) -> str:
    """A number as the panels show it: 4 significant digits, '-' for none."""
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, float):
        return str(v)
    return f"{v:.{digits}g}"


def seconds(v: Any, digits: int = 3) -> str:
    """A time in seconds as the panels show it ('0.012s'); 'not measured' for none (a bare
    '-' beside the unit read 'data_wait -s')."""
    return "not measured" if v is None else f"{num(v, digits)}s"


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Columns as wide as their widest cell, two spaces apart."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in (header, *rows)]


def optimizer_state_lines(info: dict[str, Any]) -> list[str]:
    """One optimizer's state (per kind: tensors, norm, largest |x|) and its LR schedulers."""
    lines = [f"state {k}: {st['tensors']} tensors, norm {num(st['norm'])}, max |x| {num(st['max_abs'])}"
             for k, st in info["state"].items()]
    for s in info["schedulers"]:
        lines.append(f"scheduler {s['type']}: last_epoch {s['last_epoch']}, base {_lrs(s['base_lrs'])}, "
                     f"last computed {_lrs(s['last_lr'])} (at its last step; the LR in force is the group's lr)")
        was = s.get("base_was")
        if was:  # (base changed with no word: 0.01 became 0.004 after `lr 0.001`)
            by = was["by"]
            change = " and ".join(f"{num(g['old'])} -> {num(g['new'])}" + (f" in group {g['group']}" if len(by) > 1 else "")
                                  for g in by)  # (one change of several groups: each group's)
            how = f"the LR change {change}" if was["changes"] == 1 else f"{was['changes']} LR changes (the last {change})"
            lines.append(f"scheduler {s['type']}: base was {_lrs(was['base_lrs'])}: {how} scaled it alike, "
                         "so the schedule goes on from the LR set")
    return lines if info["schedulers"] else [*lines, "no LR scheduler"]


def _lrs(values: list[Any]) -> str:
    return f"[{', '.join(num(v) for v in values)}]"


def group_other(group: dict[str, Any]) -> str:
    """A param group's other hyperparameters, as one cell."""
    return ", ".join(f"{k}={num(v) if not isinstance(v, list) else v}" for k, v in group.items()
                     if k not in ("index", "lr", "pinned_lr", "params"))


def optimizer_lines(infos: list[dict[str, Any]]) -> list[str]:
    if not infos:
        return ["no optimizer seen yet"]
    rows = [(f"{info['type']}[{g['index']}]", num(g.get("lr")), num(g.get("pinned_lr")), str(g["params"]),
             group_other(g)) for info in infos for g in info["groups"]]
    lines = table(("group", "lr", "pinned", "params", "other"), rows)
    for info in infos:
        lines += [f"{info['type']} {line}" for line in optimizer_state_lines(info)]
    return lines


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


# Why a step's cell is '-' (the job measured nothing there), said under a table that shows one.
NOT_MEASURED = {
    "loss": "no loss was seen in that step",
    "grad norm": "not read in that step (no condition or rule asked for it)",
    "data wait": "nothing to measure from (a loop's first step without a DataLoader)",
    "memory": "read at most every 10 ms (a read costs time), so a short step has none",
}


def not_measured(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """'-: not measured (memory: read at most every 10 ms ...)' for the columns showing '-'."""
    why = [f"{name}: {NOT_MEASURED[name]}" for i, name in enumerate(header)
           if name in NOT_MEASURED and any(r[i] == "-" for r in rows)]
    return [f"-: not measured ({'; '.join(why)})"] if why else []


def history_lines(history: list[dict[str, Any]]) -> list[str]:
    """The recent steps, one row each: loss, gradient norm, LR, data wait, step time, memory;
    under them, why a '-' is there."""
    if not history:
        return ["no step has ended yet"]
    rows = []
    for h in history:
        lr = h.get("lr") or []
        mem = h.get("mem")
        rows.append((str(h["step"]), num(h.get("loss")), num(h.get("grad_norm")),
                     ", ".join(num(x, 3) for x in lr) if isinstance(lr, list) else num(lr),
                     _ms(h.get("data_wait")), _ms(h.get("step_time")),
                     format_size(mem) if isinstance(mem, (int, float)) and math.isfinite(mem) else "-",
                     "skipped" if h.get("skipped") else ""))
    header = ("step", "loss", "grad norm", "lr", "data wait", "step time", "memory", "")
    return table(header, rows) + not_measured(header, rows)


def timings_lines(timings: dict[str, Any]) -> list[str]:
    """This step's phases so far, then the recent steps' time and data wait."""
    cur = timings.get("current") or {}
    lines = ["this step: " + (", ".join(f"{k} {_ms(v)}" for k, v in cur.items()) or "no phase timed yet")]
    hist = timings.get("history") or []
    if hist:
        header = ("step", "step time", "data wait")
        rows = [(str(h["step"]), _ms(h.get("step_time")), _ms(h.get("data_wait"))) for h in hist[-20:]]
        lines += table(header, rows) + not_measured(header, rows)
    return lines


def status_lines(status: dict[str, Any]) -> list[str]:
    """The status, a line a field; the break in the console's words, other nested answers
    (the loader, the stall) in one line each."""
    width = max((len(k) for k in status), default=0)
    return [f"{k:<{width}}  {_break_words(v) if k in BREAKS and isinstance(v, dict) else _value(v)}"
            for k, v in status.items()]


BREAKS = ("paused", "last_break")  # the status's breaks: said in the console's words (not `details=…`)


def _value(v: Any) -> str:
    return num(v) if not isinstance(v, (dict, list)) else _short(v)


def _break_words(brk: dict[str, Any]) -> str:
    replay = brk.get("replay") or {}  # (last_break's; a pause's replay is said by `r` and its reason)
    said = f"; its replay: {replay['summary']}" if isinstance(replay, dict) and replay.get("summary") else ""
    return f"at step {brk.get('step')} ({brk.get('phase')}) [{brk.get('condition')}]: {pause_reason(brk)}{said}"


def _short(v: dict[str, Any] | list[Any]) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_nested(x)}" for k, x in v.items()) or "-"
    return ", ".join(_nested(x) for x in v) or "-"


NESTED_SHOWN = 3  # a nested list's or dict's first items said, then how many more


def _nested(v: Any, deep: bool = False) -> str:
    """A value nested in a status field, said by what it holds, bounded: `2 (pid 81 alive,
    sleeping; pid 82 alive, sleeping)`, its first items then `and 5 more` (it was `…`, the
    eighteenth walk's 4); one more level down, a count."""
    if not isinstance(v, (dict, list)):
        return num(v)
    if not v:
        return "none"
    if deep:
        return f"{len(v)} {'field' if isinstance(v, dict) else 'item'}{'s' * (len(v) != 1)}"
    first = list(itertools.islice(v.items() if isinstance(v, dict) else v, NESTED_SHOWN))  # (only those said)
    if isinstance(v, dict):
        items = [f"{k} {_nested(x, True)}" for k, x in first]
    else:
        items = [worker_words(x) if isinstance(x, dict) and "alive" in x else _nested(x, True) for x in first]
    more = f"; and {len(v) - NESTED_SHOWN} more" if len(v) > NESTED_SHOWN else ""
    shown = f"({'; '.join(items)}{more})"
    return shown if isinstance(v, dict) else f"{len(v)} {shown}"


PROCESS_STATES = {"R": "running", "S": "sleeping", "D": "in a disk wait", "Z": "a zombie", "T": "stopped"}


# What the kernel's wait channel of a sleeping worker means, by the words in its name (the
# nineteenth walk read `sleeping in poll_schedule_timeout.constprop.0`: a kernel function's name).
WAITS = (("poll", "waiting for input"), ("select", "waiting for input"), ("pipe", "waiting on a pipe"),
         ("futex", "waiting on a lock"), ("sleep", "in a sleep"), ("do_wait", "waiting for a child process"),
         ("unix_stream", "waiting on a socket"), ("sock", "waiting on a socket"), ("wait_woken", "waiting on a socket"),
         ("io_schedule", "waiting for the disk"), ("page", "waiting for the disk"))


def wait_words(wchan: str) -> str:
    """`poll_schedule_timeout.constprop.0`: 'waiting for input (kernel: poll_schedule_timeout)'."""
    name = wchan.split(".")[0]
    said = next((words for key, words in WAITS if key in name), "in the kernel")
    return f"{said} (kernel: {name})"


def worker_words(w: dict[str, Any]) -> str:
    """A DataLoader worker process in words: `pid 81 alive, sleeping, waiting on a pipe (kernel: pipe_read)`."""
    state = PROCESS_STATES.get(w.get("state") or "", w.get("state") or "?")
    wchan = w.get("wchan")
    return f"pid {w.get('pid')} {'alive' if w.get('alive') else 'gone'}, {state}" \
           f"{', ' + wait_words(wchan) if isinstance(wchan, str) and wchan and wchan != '0' else ''}"


def quiet_words(quiet: list[int] | None) -> str:
    """A breakpoint that stayed true after its break, which is not reported again while it
    holds step after step (docs/conditions.md), in words; '' for one that did not."""
    if not quiet:
        return ""
    since, last = quiet
    return f"quiet since step {since}: stays true (through step {last}), not reported while it does"


def break_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The breakpoints, each on or off as the Breaks panel's ● and ○ say, and quiet where
    one stays true (a `break` list of specs alone showed an off one as if it were on)."""
    width = max((len(r["spec"]) for r in rows), default=0)
    return [f"  {'on ' if r['enabled'] else 'off'}  {r['spec']:<{width}}  {quiet_words(r.get('quiet'))}".rstrip()
            for r in rows] or ["no breakpoints"]


MODEL_DROP = (6, 2, 3)  # left out first where a line is wider than the terminal: mode, then out, then params
# (the norms stay), as the TUI's Model panel does (tui/panels.ModelPanel.DROP)


def model_lines(rows: list[dict[str, Any]], width: int | None = None) -> list[str]:
    """One line per module. At a terminal of `width` columns where a line would be wider
    (a terminal broke it, `|w|=4.3` / `|g|=- train`), the columns as narrow as what they
    hold, then mode, out and params left out until each line fits."""
    cells = [[f"{'  ' * r['depth']}{r['name']}", r["type"], f"out={r['output_shape']}", f"params={r['params']}",
              f"|w|={num(r['weight_norm'], 3)}", f"|g|={num(r['grad_norm'], 3)}",
              "train" if r["training"] else "eval"] for r in rows]  # (num: a non-finite norm comes as its word)
    lines = [f"{'  ' * r['depth']}{r['name']:<24} {c[1]:<16} {' '.join(c[2:])}" for r, c in zip(rows, cells, strict=True)]
    if width is None or all(len(ln) <= width for ln in lines):
        return lines
    kept = list(range(7))
    for gone in (None, *MODEL_DROP):
        if gone is not None:
            kept.remove(gone)
        wide = [max(len(c[i]) for c in cells) for i in range(7)]
        lines = [" ".join(c[i].ljust(wide[i]) if i < 2 else c[i] for i in kept).rstrip() for c in cells]
        if all(len(ln) <= width for ln in lines):
            break
    left = [("mode", "out", "params")[MODEL_DROP.index(i)] for i in MODEL_DROP if i not in kept]
    return [*lines, f"(left out at {width} columns: {', '.join(left)})"] if left else lines


def own_thread(t: dict[str, Any]) -> str:
    """`stepdbg-client-2 (stepdbg's own thread: it serves you)`: one of stepdbg's threads,
    a client's saying whose."""
    serves = t.get("serves")
    return f"{t['name']} (stepdbg's own thread{f': it serves {serves}' if serves else ''})"


def thread_lines(stacks: list[dict[str, Any]], frames: int = 8) -> list[str]:
    """Each thread and its innermost frames (the person's and their libraries', never stepdbg's)."""
    out = []
    for t in stacks:
        out.append(f"--- {own_thread(t) if t.get('own') else t['name']}")
        if left := left_out(t, frames):
            out.append(f"  {left}")
        out += [f"  {fr['file']}:{fr['line']} {fr['function']}: {fr['code']}" for fr in t["stack"][-frames:]]
    return out


def left_out(thread: dict[str, Any], frames: int) -> str:
    """What a thread's stack shown leaves out: its outer frames, or (past the job's bound on a
    view, measure.threads.THREADS_MOST) the whole stack; "" for none."""
    if thread.get("stack_not_read"):
        return "(its stack not read: the job tells the stacks of its first threads only)"
    n = max(0, len(thread.get("stack") or ()) - frames) + int(thread.get("frames_not_shown") or 0)
    return f"(… {n:,} outer frame{'s' * (n != 1)} not shown)" if n else ""


def source_lines(src: dict[str, Any] | None) -> list[str]:
    """The source around the selected frame's line, that line marked."""
    return [f"{'->' if ln['line'] == src['line'] else '  '}{ln['line']:5d}  {ln['text']}"
            for ln in src["lines"]] if src else []


# `info TOPIC`: what it asks the job, in words; in the order the help lists them.
INFO: dict[str, Callable[[Any, int | None], list[str]]] = {  # (the target, the terminal's width or None)
    "model": lambda t, width: model_lines(t.module_tree(), width),
    "torchinfo": lambda t, _: [t.model_summary() or "no model forward seen yet"],
    "opt": lambda t, _: optimizer_lines(t.optimizer_info()),
    "mem": lambda t, _: memory_lines(t.memory()),
    "threads": lambda t, _: thread_lines(t.stacks()),
    "breaks": lambda t, _: break_lines(t.breakpoints()),
    "source": lambda t, _: source_lines(t.source(8)),
    "history": lambda t, _: history_lines(t.get_history(20)),
    "timings": lambda t, _: timings_lines(t.timings()),
    "status": lambda t, _: status_lines(t.status()),
}


def info_lines(target: Any, what: str, width: int | None = None) -> list[str]:
    topic = INFO.get("opt" if what == "optimizer" else what)
    if topic is None:
        raise ValueError(f"info what? {', '.join(INFO)} (not {what!r})")
    return topic(target, width)
