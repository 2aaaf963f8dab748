"""Gradient accumulation where the step's values are read before the update: which
micro-batch made a non-finite loss or output, and its inputs back for the search.

On the CPU a NaN breaks at the micro-batch that made it (its loss is read before its
backward, its output after its forward), where the captured inputs are its own. On an
accelerator the losses and the outputs' sums stay on the device until the step's one read
before the update (host_reads.py), when the captured inputs are the last micro-batch's.
So each value kept on the device keeps its micro-batch's inputs (``inputs_now``: the
capture without the output, which would hold a GPT's logits), and the break puts the bad
one's back (``focus``) for the replay, the activation watch's search and the views.
"""

from __future__ import annotations

from typing import Any


def inputs_now(model: Any) -> dict[str, Any]:
    """What the StepModel captured of the forward in progress, without its output."""
    return {**model.capture, "output": None}


def focus(model: Any, captures: list[dict[str, Any]], bad: int | None) -> str | None:
    """Micro-batch `bad` (an index into `captures`, one per micro-batch) made the non-finite
    value: its inputs become the StepModel's capture. Returns "2 of 40", or None for a step
    of one micro-batch (nothing to tell apart) or when it is not known."""
    if bad is None or len(captures) < 2 or bad >= len(captures):
        return None
    if bad < len(captures) - 1:  # (the last one's are the capture already, with its loss)
        model.capture = captures[bad]
    return f"{bad + 1} of {len(captures)}"
