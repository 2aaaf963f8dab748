"""How a doctor or overfit run ends: after its steps (exit code 0, with the overfit
verdict), or at once when there is no batch to repeat (exit code 2)."""

from __future__ import annotations

from typing import Any

from stepdbg.agent.bus import Bus
from stepdbg.agent.step.step_model import StepModel

EXIT_CANNOT_OVERFIT = 2  # stepdbg cannot do what it was asked with this script


def finish_early(model: StepModel, doctor: Any, bus: Bus) -> None:
    """End a doctor/overfit run after its steps: exit code 0 from the script's point of view."""
    if model.overfit and doctor is not None:  # (its verdict: said by the summary that follows, once)
        doctor.overfit_result(model)
    bus.say(f"stopping after {model.step} steps (--steps N sets how many)")  # (`--steps 100` read as given when not)
    raise SystemExit(0)


def cannot_overfit_here(bus: Bus) -> None:
    """`stepdbg overfit` repeats a DataLoader's first batch; a loop that took none in its
    first step (a get_batch() function, tensors made in the loop) has nothing to repeat:
    say so and end (exit code 2) rather than run the script as usual."""
    words = ("stepdbg overfit repeats the first batch a DataLoader yields, and this loop took no batch from "
             "a DataLoader in its first step (its data comes from elsewhere): there is no batch to repeat. "
             "Draw the batches from a DataLoader, or take one batch before the loop and train on it.")
    bus.write("overfit", losses=[], reached_near_zero=None, verdict=words)  # (the summary says it: once)
    raise SystemExit(EXIT_CANNOT_OVERFIT)
