"""A break in a job of many ranks, done by the job as one (ranks.py says how the ranks
agree on a step): a pause pauses every rank there, and a replay of a sharded model
(FSDP2's DTensors) is run by every rank there together, each rank its own step's
forward, since that forward all-gathers the parameters from every rank. Alone, the
rank that broke would wait forever for ranks that are not replaying; headless
(`--on-break replay` on every rank, as torchrun gives every rank the same flags) there
is no console to ask every rank at once, so the rank that broke asks them here."""

from __future__ import annotations

from typing import Any

from stepdbg.agent.breaks.controls import Break
from stepdbg.agent.breaks.ranks import EARLY_PHASES

REPLAY_TOGETHER = "replay_together"  # the action: replay, every rank joining (views.replay(alone=False))
GLOBAL = ("nan", "inf", "nonfinite")  # at the update, read from the sharded gradients' global norm


def coordinate(breaker: Any, brk: Break, actions: list[str], coordinated: bool) -> list[str]:
    """`actions` for this rank's break, less what every rank will do together at the step
    the ranks agree on (asked of them here)."""
    ranks, guard = breaker.ranks, breaker.guard
    if not ranks.active() or brk.condition == "pause" or brk.phase == "exception":
        return actions
    if coordinated:  # a rank's request, done here: this rank's replay joins the others'
        return [REPLAY_TOGETHER if a == "replay" else a for a in actions]
    if brk.phase == "before_optimizer_step" and brk.condition in GLOBAL and breaker.hooks.sharded():
        # The gradients' norm is the job's, all-reduced: every rank breaks here by itself, at
        # this step (asked, the others would pause at the next one, whose capture is another's),
        # and replays it together now (a rank that did not is waited for JOIN_S, not for ever).
        return [REPLAY_TOGETHER if a == "replay" else a for a in actions]
    if "pause" in actions:  # outside any collective; a replay then is the console's, every rank at once
        target = guard("ranks", ranks.request_pause, brk.step, brk.phase, brk.reason, brk.condition)
        if target is not None:  # else (the store is gone) this rank pauses alone
            brk.details["pause_at_step"] = target
            return [a for a in actions if a != "pause"]
    elif "replay" in actions and brk.phase in EARLY_PHASES and breaker.hooks.sharded():
        # Before this step's backward: every rank is still to reach its update, where the step's
        # capture is whole. (A later break would name the next step, whose capture is another.)
        target = guard("ranks", lambda: ranks.request_pause(brk.step, brk.phase, brk.reason, brk.condition,
                                                            kind="replay"))
        if target is not None:
            brk.details["replay_at_step"] = target
            return [a for a in actions if a != "replay"]
    return actions


def for_rank(breaker: Any, req: dict[str, Any]) -> None:
    """Every rank, the one that broke included, pauses (or replays: kind "replay") here
    for a rank's break."""
    mine = req["rank"] == breaker.ranks.rank
    step = breaker.model.step
    breaker.break_set.mark_fired(req["condition"], step)  # the job broke once, not once per rank
    breaker.model.ensure_step().phase = "before_optimizer_step"
    kind = "replay" if req.get("kind") == "replay" else "pause"
    done = "paused" if kind == "pause" else "replayed"
    if not mine:
        reason = f"{done} for rank {req['rank']}'s break at step {req['broke_at']}: {req['reason']}"
    elif step == req["broke_at"]:
        reason = f"this rank broke: {req['reason']}"
    else:
        reason = f"{done} at step {step} for this rank's break at step {req['broke_at']}: {req['reason']}"
    details = {"for_rank": req["rank"], "broke_at": req["broke_at"]}
    if mine:
        details["broke"] = own_break(breaker.breaks, req)
    breaker.take(req["condition"] if mine else f"rank {req['rank']}", reason, phase="before_optimizer_step",
                 actions=[kind], details=details, coordinated=True)


def own_break(breaks: list[Break], req: dict[str, Any]) -> dict[str, Any] | None:
    """The rank that broke, pausing for its own break: that break's record (its step, phase,
    file:line, condition, reason and numbers), kept in its pause, which a client's status reads (a TUI
    attached after the break knew only the pause at the update's line; the closing walk's 5)."""
    brk = next((b for b in reversed(breaks) if b.step == req["broke_at"] and "for_rank" not in b.details
                and b.condition == req["condition"]), None)
    if brk is None:
        return None
    return {"step": brk.step, "phase": brk.phase, "where": brk.where, "condition": brk.condition, "reason": brk.reason,
            "scalars": brk.scalars}
