"""A job of many ranks breaks once, whichever ranks say it (issue 45, the ninth walk's 1 to
3). Under torchrun the rank that broke says its break where it saw it (before the backward),
then again where every rank pauses for it (before the update: `this rank broke: ...`), and
every other rank says its own pause for it (`paused for rank 1's break at step 6: ...`): the
Log said one break three or four times. The Break panel of a rank that paused for another's
break showed that rank's reason beside its own numbers (`loss is nan` beside `loss 0.1121`).

Here: which break of the job an event is (the step it broke at, the rank that broke), said
once in the Log; and each rank's last break, whose numbers the panel of a rank that paused
for it shows, under that rank's name. The panel of the rank that broke shows where it broke
(its phase and line: ddp_nan.py:45, before the backward), not the update's line where every
rank paused for it, which it says beside (`paused_at`; the twelfth walk's 1)."""

from __future__ import annotations

from typing import Any

from stepdbg.client.kept import kept

FROM_RANK = "from_rank"  # the key JobSource adds to a rank's event: the rank that sent it

Whose = tuple[Any, Any]  # (the step it broke at, the rank that broke: None in a job of one process)


def whose(brk: dict[str, Any]) -> Whose:
    """The job's break that `brk` is: a pause for a rank's break (the agent's `for_rank`) is
    that rank's break, at the step it broke at."""
    details = brk.get("details") or {}
    if details.get("for_rank") is not None:
        return details.get("broke_at", brk.get("step")), details["for_rank"]
    return brk.get("step"), brk.get(FROM_RANK)


def _one_break(brk: dict[str, Any]) -> tuple[Any, ...]:
    """A break of the job's own (no rank's pause for another): one break per step, rank,
    phase, condition, line (two in a step: `nan` before the backward, then before the update)
    and the time it was made (`at`, the job's Break's: its event and its record at an attach
    are one break; two pauses at one line in a step, stepdbg.breakpoint() in a block's forward
    that runs twice, are two, and the second was not said)."""
    where = brk.get("where") or {}
    return (*whose(brk), brk.get("phase"), brk.get("condition"), where.get("file"), where.get("line"), brk.get("at"))


class RankBreaks:
    """`said` (with `own`, `paused_first`): the job's breaks the Log said; `last`: each rank's last break event; `broke`:
    each break of the job as the rank that broke said it, where it broke."""

    def __init__(self) -> None:
        self.said: set[Whose] = set()  # the (step, rank) of the breaks said by their own event
        self.own: set[tuple[Any, ...]] = set()  # those breaks, each as _one_break says it
        self.paused_first: set[Whose] = set()  # said by a rank's pause for it, its own event not come
        self.last: dict[int, dict[str, Any]] = {}
        self.broke: dict[Whose, dict[str, Any]] = {}
        self.findings: set[tuple[Any, Any]] = set()  # (rule, message) of the findings the Log said

    @staticmethod
    def of(app: Any) -> RankBreaks:
        return kept(app, "_rank_breaks", RankBreaks)

    def came(self, brk: dict[str, Any]) -> None:
        """A rank's break event (as it comes, before the Log's order)."""
        if brk.get(FROM_RANK) is not None:
            self.last[brk[FROM_RANK]] = brk
            if (brk.get("details") or {}).get("for_rank") is None:
                self.broke[whose(brk)] = brk  # (its latest: a second break in that step is the one paused for)

    def attached(self, clients: list[Any]) -> None:
        """Each rank's pause at the attach (its status's record): a TUI attached after the break
        had no rank's break event, and rank 0's panel said `rank 1's have not come` for good
        (the closing walk's 2); rank 1's pause for its own break holds its numbers."""
        for rank, c in enumerate(clients):
            paused = getattr(c, "paused", None)
            if isinstance(paused, dict):
                self.came({**paused, FROM_RANK: rank})

    def first_time(self, brk: dict[str, Any]) -> bool:
        """The Log has not said this break of the job yet (and now counts it said). A rank's
        pause for a break (`for_rank`) is a break of that rank at that step said already, by
        its own event or another rank's pause (which comes first is chance: a pause said first
        stands for the break, whose own event is then not said again); a break of its own is
        said unless that same break was (its step, rank, phase, condition and line): a second
        break in one step (`nan` again before the update) was left out, and at the end the
        panel's `the last break` was the first (the walk of 08:30's 1)."""
        key = whose(brk)
        if (brk.get("details") or {}).get("for_rank") is not None:
            if key in self.said or key in self.paused_first:
                return False
            self.paused_first.add(key)
            return True
        if key in self.paused_first:  # (said by a rank's pause for it, come first)
            self.paused_first.discard(key)
            self.said.add(key)
            self.own.add(_one_break(brk))
            return False
        if _one_break(brk) in self.own:
            return False
        self.said.add(key)
        self.own.add(_one_break(brk))
        return True

    def first_finding(self, finding: dict[str, Any]) -> bool:
        """The job has not said this finding yet (every rank sends its own: the same words of
        another rank are the same finding; the twelfth walk's 4), and now counts it said."""
        key = (finding.get("rule"), finding.get("message"))
        if key in self.findings:
            return False
        self.findings.add(key)
        return True

    def shown(self, brk: dict[str, Any] | None, in_view: int | None) -> dict[str, Any] | None:
        """The break as the Break panel of rank `in_view` shows it: paused for another rank's
        break, with that rank's numbers under its name (`scalars_of`), or its own under its
        own name while that rank's have not come; the rank that broke, where it broke."""
        if not brk:
            return brk
        step, rank = whose(brk)
        if rank is None or in_view is None or (brk.get("details") or {}).get("for_rank") is None:
            return brk
        if rank == in_view:
            return self._where_it_broke(brk)
        theirs = self.last.get(rank)
        if theirs is not None and whose(theirs) == (step, rank):
            return {**brk, "scalars": theirs.get("scalars") or {}, "scalars_of": f"rank {rank}"}
        return {**brk, "scalars_of": f"rank {in_view} (rank {rank}'s have not come)"}

    def _where_it_broke(self, brk: dict[str, Any]) -> dict[str, Any]:
        """The pause of the rank that broke, for its own break: the break where it broke (its
        step, phase, line, reason and numbers; from its event, else from the record the pause
        keeps), the pause's place beside (`paused_at`). The numbers are the break's: the
        pause's, read at the update, put `grad_norm nan` beside `before_backward`, where the
        step had measured none (the seventeenth walk's 3)."""
        own = self.broke.get(whose(brk)) or (brk.get("details") or {}).get("broke")  # (kept by the job: a late attach)
        if own is None or (own.get("step"), own.get("phase")) == (brk.get("step"), brk.get("phase")):
            return brk
        return {**brk, "step": own.get("step"), "phase": own.get("phase"), "where": own.get("where"),
                "reason": own.get("reason", brk.get("reason")), "scalars": own.get("scalars", brk.get("scalars")),
                "paused_at": {k: brk.get(k) for k in ("step", "phase", "where")}}
