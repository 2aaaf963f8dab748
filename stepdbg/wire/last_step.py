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
