"""A condition that stays true is one break (breakpoints.Breakpoints.repeat), but the action
that keeps a bad update from the weights is taken at every step it holds on.

Under ``--on-break skip`` a NaN at steps 5 and 6 broke at 5 and skipped that update; step 6
was a repeat of the same condition, not a break, and its NaN update went into the weights.
Now a repeat's update is skipped too: said once a run of repeats (and written to the
report as a change), counted in the end event (``repeats_skipped``), and marked skipped in
the step's record, as a break's skip is.
"""

from __future__ import annotations

from stepdbg.agent.bus import Bus
from stepdbg.agent.step.step_model import StepModel


class RepeatSkips:
    """The updates of repeated conditions skipped, by condition."""

    def __init__(self, model: StepModel, bus: Bus) -> None:
        self.model, self.bus = model, bus
        self.skipped: dict[str, int] = {}  # condition -> the updates of its repeats skipped
        self._told: set[str] = set()  # conditions whose run of repeats was said to be skipped

    def broke(self, specs: list[str]) -> None:
        """These conditions made a break: their next repeat starts a new run (said again)."""
        self._told.difference_update(specs)

    def skip(self, specs: list[str], actions: list[str]) -> None:
        """The conditions `specs` hold again (repeats, no break) and a break's `actions`
        skip: skip this step's update, unless it is skipped already, applied already or
        there is no optimizer to skip."""
        st = self.model.current
        if "skip" not in actions or st is None or st.skip or st.optimizer_stepped or not self.model.optimizers:
            return
        st.skip = True
        for spec in specs:
            self.skipped[spec] = self.skipped.get(spec, 0) + 1
        new = [s for s in specs if s not in self._told]
        if new:
            self._told.update(new)
            self.bus.change("skip", target_step=st.index, repeat_of=new)
