"""The step a front end names: the last one the job reached (the TUI's header, its panels'
notes, the Ranks table and the console's `ranks`). Standard library only."""

from __future__ import annotations

from typing import Any


def last_reached(status: dict[str, Any]) -> Any:
    """The step the header names: the last one the job reached. Running between steps the
    status's step is the next one's number, not reached yet (at the end `step 60` after steps
    0 to 59): the one before it, which ran to its end; paused there too (a breakpoint() after
    opt.step(): `after step 5`, as its break says). Paused in a step, the job's own number."""
    step = status.get("step")
    if status.get("phase") == "between steps" and isinstance(step, int) and step > 0:
        return step - 1
    return step


def last_of_end(end: dict[str, Any], shown: Any = None) -> Any:
    """The last step a process that ended reached, from its `exited` record: `steps` ran to
    their end, so the last one's number is one less, unless it ended inside step `steps`
    (`in_step`); never before `shown`, the step last seen (an interrupt at a pause: the step
    never goes back). None when neither says."""
    steps = end.get("steps")
    last = steps - (not end.get("in_step")) if isinstance(steps, int) and (steps > 0 or end.get("in_step")) \
        else shown
    if isinstance(shown, int) and (last is None or shown > last):
        last = shown
    return last
