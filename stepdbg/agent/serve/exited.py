"""The `exited` event's data: the job's end, and what a front end attached late lacks of it.

A front end that attached after the job's last break (a second TUI, a reconnect) never saw
that break's event nor the rewind or skip done about it, so at the end its Break panel said
only `the job ended` (issue 45's closing walk): the end carries the last break and the changes
made from its step on, as the job's own records hold them."""

from __future__ import annotations

from typing import Any

from stepdbg.agent.breaks.told import cut, told
from stepdbg.agent.step.step_state import begun

CHANGES_AT_MOST = 20  # the changes from the last break's step on that the end carries (the latest)


def exited_data(session: Any, exit_code: int | None, error: str | None) -> dict[str, Any]:
    """{exit_code, steps, error, in_step?, breakpoints?, last_break?, changes_after?}."""
    # `in_step`: it ended inside step `steps`, begun and never ended (a Ctrl-C in its forward): the front
    # ends' last step is that one, as a change made in it said (`change at step 36`); a zero_grad after it is none
    in_step = begun(getattr(getattr(session, "model", None), "current", None)) is not None
    out: dict[str, Any] = {"exit_code": exit_code, "steps": session.step, "error": cut(error) if error else error,
                           **({"in_step": True} if in_step else {})}
    breaker = getattr(session, "breaker", None)
    if breaker is None:
        return out
    out["breakpoints"] = breaker.break_set.listing()
    if breaker.breaks:
        last = breaker.breaks[-1]
        changes = getattr(getattr(session, "bus", None), "changes", [])
        out["last_break"] = told(last)  # (its strings cut: an error's message of megabytes, over the wire's frame,
        # had the end dropped, and no client heard it)
        out["changes_after"] = [c for c in changes if isinstance(c.get("step"), int) and c["step"] >= last.step
                                ][-CHANGES_AT_MOST:]
    return out
