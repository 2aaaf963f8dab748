"""A change made to a job (the `change` event: an LR set, a breakpoint removed, a step's
update skipped, a rewind, a front end's Ctrl-C) in a person's words: the one place for
them, used by the job's own stderr line, the console's confirmation and the TUI's Log.
Standard library only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _param_groups(groups: Any) -> str:
    """' (param group 0, was 0.01)': which groups a change set, and what they held."""
    rows = [g for g in groups or [] if isinstance(g, dict)]
    if not rows:
        return ""
    was = sorted({f"{g['old']:g}" for g in rows if isinstance(g.get("old"), (int, float))})
    return (f" (param group{'s' if len(rows) > 1 else ''} {', '.join(str(g.get('group')) for g in rows)}"
            + (f", was {', '.join(was)})" if was else ")"))


def _unpinned(c: dict[str, Any]) -> str:
    """An LR set without `pin` where one was pinned: the pin is gone, said (it went silently)."""
    if not any(isinstance(g, dict) and g.get("unpinned") for g in c.get("groups") or []):
        return ""
    return f"; no longer pinned: a scheduler may change it (lr {c['lr']:g} pin keeps it)"


# A skip told after the job's end (its `done`: whether the step's own record says its update
# was skipped, None where no record of that step came): "will be skipped" was said after the end
# (the eighteenth walk's leftovers, 4).
SKIP_DONE = {True: "was skipped", False: "was not skipped (its step's record says so)",
             None: "was to be skipped (no record of that step came before the end)"}


def _skip_words(c: dict[str, Any]) -> str:
    """"step 17's update will be skipped" ("was skipped" after the end: SKIP_DONE); a repeat
    of a break that skips (--on-break skip) names the conditions that still hold."""
    held = " and ".join(c.get("repeat_of") or [])
    return (f"step {c['target_step']}'s update {SKIP_DONE[c['done']] if 'done' in c else 'will be skipped'}"
            + (f" too: {held} still hold{'s' if len(c.get('repeat_of') or []) == 1 else ''} (a repeat, not a new break)"
               if held else ""))


# What a skip keeps (the TUI's toast says it: the Break panel says the skip itself)
SKIP_KEEPS = "the parameters and the optimizer's state stay as they are"


def _skip_why(c: dict[str, Any]) -> str:
    if c.get("repeat_of"):
        return ("; every step's update is skipped while it holds (--on-break skip; counted in the end event, "
                "not said again)")
    bad = ", still the bad one" if c.get("bad_loss") else ""  # (a NaN's break; not a data_wait's, before any loss)
    return (f": {SKIP_KEEPS} (the loss your script prints for step "
            f"{c['target_step']} is the one it {'computed' if bad else 'computes'}{bad})")


def _undone(c: dict[str, Any]) -> str:
    """'steps 15 to 17 undone': the updates a rewind drops (`batches_skipped` counts them). No
    word of batches: a DataLoader's go on, but a loop that draws its batches from the RNGs the
    rewind put back draws the snapshot's steps' batches again (docs/rewind.md)."""
    first, n = c["to_step"], c["batches_skipped"]
    last = first + n - 1
    return (f"step {first}'s update undone" if n == 1 else
            f"steps {first} and {last} undone" if n == 2 else f"steps {first} to {last} undone")


def _rewind_words(c: dict[str, Any]) -> str:
    scaled = f"; the LR scaled by {c['lr_scale']:g} for {c['lr_steps']} steps" if c.get("lr_scale") else ""
    return f"rewind to the snapshot of step {c['to_step']} ({_undone(c)}{scaled})"


def rewind_answer(r: dict[str, Any]) -> str:
    """The answer to a rewind asked at a pause, as the console, the TUI's R and its REPL line
    say it: where it is done, what it undoes, and that the job runs on (it does not stay paused)."""
    return (f"rewinding to the snapshot of step {r['to_step']} where step {r['step']} ends ({_undone(r)}); "
            "the job runs on to its next break")


# A change to the job (the `change` event, the answer to set_lr and skip) in the person's words.
CHANGE_WORDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "lr": lambda c: f"LR set to {c['lr']:g}{' and pinned' if c.get('pinned') else ''}{_param_groups(c.get('groups'))}"
                    + _unpinned(c),
    "param_group": lambda c: f"{c['key']} set to {c['value']:g}{_param_groups(c.get('groups'))}",
    "skip": _skip_words,
    "rewind": _rewind_words,
    "break_add": lambda c: f"breakpoint added: {c['spec']}",
    "break_remove": lambda c: f"breakpoint removed: {c['spec']}",
    "break_enable": lambda c: f"breakpoint {'enabled' if c.get('enabled') else 'disabled'}: {c['spec']}",
    "interrupt": lambda c: (f"Ctrl-C ({c.get('signal') or 'SIGINT'}) sent to the job by {c.get('by') or 'a front end'}: "
                            "its own Ctrl-C handling runs"),
}


def change_words(c: dict[str, Any]) -> str:
    """'LR set to 0.001 and pinned (param group 0, was 0.01)', 'breakpoint added: nan',
    "step 17's update will be skipped": what the TUI's Log says. A change without words of
    its own is said by its fields, in words too ('set: nan, exception', not
    "set=['nan', 'exception']")."""
    try:
        return CHANGE_WORDS[c.get("what", "")](c)
    except (KeyError, TypeError, ValueError):
        fields = "; ".join(f"{str(k).replace('_', ' ')} {_value_words(v)}" for k, v in c.items()
                           if k not in ("what", "step", "between_steps"))
        return f"{str(c.get('what')).replace('_', ' ')}{': ' + fields if fields else ''}"


# What a change means beyond its words, where it is not plain (said after them, its own
# separator first): the job's own line and the console's confirmation say it; the Log, one
# line a change, keeps to the words.
CHANGE_WHY: dict[str, Callable[[dict[str, Any]], str]] = {"skip": _skip_why}


def change_said(c: dict[str, Any]) -> str:
    """A change as the job's stderr line ('change: ...') and the console's confirmation say it:
    its words, then what it means where that is not plain ("step 17's update will be
    skipped: the parameters and the optimizer's state stay as they are (...)")."""
    why = CHANGE_WHY.get(c.get("what", ""))
    try:
        return change_words(c) + (why(c) if why and not c.get("already") else "")
    except (KeyError, TypeError, ValueError):
        return change_words(c)


def change_line(c: dict[str, Any]) -> str:
    """A change as one line of a Log: 'change at step 30: LR set to 0.001 and pinned (param
    group 0, was 0.01)'. Made while the job ran between steps (`between_steps`) its `step`
    is the next one's, not begun: 'change after step 35: ...', the step the job was at, as
    a header says it (a Ctrl-C to a running job was `change at step 36` under `step 35`)."""
    step = c.get("step")
    if c.get("between_steps") and isinstance(step, int):
        return f"change {f'after step {step - 1}' if step > 0 else 'before step 0'}: {change_words(c)}"
    return f"change at step {step}: {change_words(c)}"


def _value_words(v: Any) -> str:
    """A field's value as a person reads it: a list as its items, a mapping as 'key value' pairs."""
    if isinstance(v, dict):
        return ", ".join(f"{k} {_value_words(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple, set)):
        return ", ".join(_value_words(x) for x in v) or "none"
    return "yes" if v is True else "no" if v is False else str(v)
