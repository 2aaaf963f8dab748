"""`diff ranks`: the replicas of a job's ranks compared, tensor by tensor (standard library only).

Every rank answers the `replicas` op with a page of fingerprints (stepdbg/agent/diff/
replicas.py): its parameters, then their gradients, in parameter order. ``RankDiff`` takes
one page from every rank at a time (``feed``), compares the ranks' fingerprints of each
tensor with stepdbg/wire/step_diff.py's ``compare`` (bitwise by default; --atol/--rtol on
the fingerprints' numbers), and stops at the first tensor whose replicas differ: the
client fetches no further page. The ranks are grouped by the value they hold; the value
most ranks hold is the reference (on a tie, the group of the lowest rank, and the answer
says there is no majority) and the others are the ranks that differ.

Nothing is compared when the parameters are sharded (FSDP, FSDP2: each rank holds a
shard, not a replica) or when the ranks are paused at different points (step, phase).
"""

from __future__ import annotations

from typing import Any

from .rank_words import ranks_words
from .step_diff import compare, nonnegative

USAGE = "diff ranks [--atol X] [--rtol Y]"


def tolerances(words: list[str]) -> tuple[float, float]:
    """(atol, rtol) from `--atol X --rtol Y` (or `--atol=X`), as `stepdbg diff` takes them."""
    got = {"--atol": 0.0, "--rtol": 0.0}
    i = 0
    while i < len(words):
        flag, eq, value = words[i].partition("=")
        if flag not in got:
            raise ValueError(f"{USAGE}: {words[i]!r}?")
        if not eq:
            i += 1
            if i == len(words):
                raise ValueError(f"{flag} needs a number >= 0 (e.g. 1e-6)")
            value = words[i]
        got[flag] = nonnegative(flag, value)
        i += 1
    return got["--atol"], got["--rtol"]



class RankDiff:
    """The comparison of every rank's pages, fed one page of all ranks at a time."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0) -> None:
        self.atol, self.rtol = atol, rtol
        self.compared = self.gradients = 0  # tensors compared (each on every rank); gradients among them
        self.found: dict[str, Any] | None = None
        self.not_compared: str | None = None  # why nothing (more) was compared
        self.grads_local: str | None = None
        self.ranks: list[int] = []
        self.where: tuple[Any, Any] = (None, None)  # (step, phase)
        self.total = 0
        self.world = 0  # the job's ranks, as the ranks say it
        self.values = self.total_values = 0  # values read on each rank so far, and in all
        self.walked = 0  # tensors walked (a gradient no rank has yet too)
        self.pauses: dict[int, Any] = {}  # each rank's pause (step, phase, when it paused) at its first page
        self.moved: str | None = None  # a rank left that pause between pages: what was walked is said, no more
        self.unread: list[str] = []  # tensors a rank could not read: compared by shape and dtype alone

    def feed(self, pages: dict[int, dict[str, Any]]) -> int | None:
        """One page of every rank's answer (by rank): compared in order. Returns the start
        of the next page to ask for, or None when the comparison is done. Where the ranks'
        pages end at different tensors, the tensors all of them sent are compared and the
        next page starts after those."""
        if not self.ranks:
            if not self._first(pages):
                return None
        elif self._moved(pages):
            return None
        rows = [pages[r].get("entries") or [] for r in self.ranks]
        common = min(len(row) for row in rows)
        for i in range(common):
            if self._one({r: row[i] for r, row in zip(self.ranks, rows, strict=True)}):
                return None
        self.values += min(int(pages[r].get("values") or 0) for r in self.ranks)
        self.walked += common
        ended = [r for r, row in zip(self.ranks, rows, strict=True)
                 if len(row) == common and pages[r].get("next") is None]
        if len(ended) == len(self.ranks):
            return None
        if ended:  # some ranks have no tensor left where the others have more
            longer = [r for r in self.ranks if r not in ended]
            self._structure(longer, f"{ranks_words(longer)} {'holds' if len(longer) == 1 else 'hold'} more "
                                    "parameters than the others")
            return None
        return int(pages[self.ranks[0]].get("start") or 0) + common

    def _moved(self, pages: dict[int, dict[str, Any]]) -> bool:
        """Whether a rank answered this page at another pause than its first page's (another
        client continued the job between pages): the pages are not of one moment."""
        now = {r: _pause(pages[r]) for r in self.ranks}
        gone = [r for r in self.ranks if now[r] != self.pauses[r]]
        if gone:
            r = gone[0]
            self.moved = (f"the job moved on between pages ({ranks_words(gone)}: rank {r} now at step {now[r][0]} "
                          f"{now[r][1]}): the rest was not compared")
        return bool(gone)

    def progress(self) -> str:
        """How far the walk is, in words (for a walk that takes long)."""
        return (f"{self.walked} of {self.total} parameters and gradients compared on every rank "
                f"({self.values / max(self.total_values, 1):.0%} of their values)")

    def _first(self, pages: dict[int, dict[str, Any]]) -> bool:
        """The first pages: whether there is anything to compare."""
        self.ranks = sorted(pages)
        self.pauses = {r: _pause(p) for r, p in pages.items()}
        first = pages[self.ranks[0]]
        self.where = (first.get("step"), first.get("phase"))
        self.total = int(first.get("total") or 0)
        self.total_values = int(first.get("total_values") or 0)
        self.world = max((p.get("world_size") for p in pages.values() if isinstance(p.get("world_size"), int)),
                         default=len(pages))
        sharded = next((p["sharded"] for p in pages.values() if p.get("sharded")), None)
        if sharded:
            self.not_compared = (f"nothing compared: {sharded}, so each rank holds its own shard, not a replica "
                                 "(diff ranks compares the replicas of DDP-style data parallelism)")
            return False
        places = {(p.get("step"), p.get("phase")) for p in pages.values()}
        if len(places) > 1:
            at = ", ".join(f"rank {r} at step {pages[r].get('step')} {pages[r].get('phase')}" for r in self.ranks)
            self.not_compared = f"nothing compared: the ranks are paused at different points ({at})"
            return False
        if not any(p.get("total") for p in pages.values()):
            self.not_compared = ("nothing compared: no rank knows its model's parameters yet (they are found at the "
                                 "first training step's forward or optimizer step)")
            return False
        self.grads_local = next((p["grads_local"] for p in pages.values() if p.get("grads_local")), None)
        return True

    def _one(self, held: dict[int, dict[str, Any] | None]) -> bool:
        """Compare one tensor across the ranks; True when it (or the ranks' structure) differs."""
        keys = {r: (e.get("name"), e.get("what")) if e else None for r, e in held.items()}
        if len(set(keys.values())) > 1:
            groups = _groups(list(keys.items()), lambda a, b: a == b)
            odd = [r for g in groups[1:] for r in g]
            base = held[groups[0][0]]
            self._structure(odd, f"{ranks_words(odd[:1])} holds {_named(held[odd[0]])} where {ranks_words(groups[0])} "
                                 f"{'hold' if len(groups[0]) > 1 else 'holds'} {_named(base)}")
            return True
        e = next((x for x in held.values() if x), None)
        if e is None:
            return False
        if e.get("what") == "gradient" and self.grads_local:
            return False
        note = next((x["fp"]["unreadable"] for x in held.values() if x and x["fp"].get("unreadable")), None)
        if note:
            self.unread.append(f"{e.get('name')}: {str(note)[:200]}")
        present = sum(1 for x in held.values() if x and not x["fp"].get("none"))
        self.compared += bool(present)  # (a gradient no rank has yet is not counted)
        self.gradients += bool(present) and e.get("what") == "gradient"
        groups = _groups([(r, x["fp"]) for r, x in held.items() if x],
                         lambda a, b: compare(a, b, self.atol, self.rtol) is None)
        if len(groups) == 1:
            return False
        ref, odd = groups[0], groups[1:]
        diff = compare(held[odd[0][0]]["fp"], held[ref[0]]["fp"], self.atol, self.rtol) or {}  # type: ignore[index]
        self._differ(e, ref, odd, diff)
        return True

    def _differ(self, e: dict[str, Any], ref: list[int], odd: list[list[int]], diff: dict[str, Any]) -> None:
        majority = len(ref) > sum(len(g) for g in odd)
        odd_ranks = sorted(r for g in odd for r in g)
        kind = "parameter" if e["what"] == "parameter" else "gradient"
        words = f"{e['name']} ({kind}) is the first whose replicas differ: {ranks_words(odd_ranks)} " \
                f"{'differs' if len(odd_ranks) == 1 else 'differ'} from {ranks_words(ref)}"
        if len(odd) > 1:
            words += " and from each other"
        words += f": {diff.get('reason')}"
        if diff.get("max_abs"):
            words += (f"; max |rank {odd[0][0]} - rank {ref[0]}| {diff['max_abs']:g}, max relative "
                      f"{diff['max_rel']:g} over its fingerprint")
        elif diff.get("max_abs") == 0:
            words += (" (its sampled values and statistics are equal as numbers: the values that differ are between "
                      "the samples, or differ in their bits alone: -0.0 and 0.0, NaNs)")
        if diff.get("past") is not None:
            words += f", {diff['past']:g}x the tolerance"
        if not majority:
            words += f" (no value is held by most ranks: {ranks_words(ref)}'s is taken as the reference)"
        self.found = {"name": e["name"], "what": kind, "ranks": odd_ranks, "reference": ref,
                      "groups": [ref, *odd], "majority": majority, "reason": diff.get("reason"),
                      "max_abs": diff.get("max_abs"), "max_rel": diff.get("max_rel"),
                      "past_tolerance": diff.get("past"), "summary": words}

    def _structure(self, odd: list[int], detail: str) -> None:
        others = [r for r in self.ranks if r not in odd]
        self.found = {"name": None, "what": "structure", "ranks": odd, "reference": others,
                      "groups": [others, odd], "majority": len(others) > len(odd),
                      "reason": "the ranks hold different parameters", "max_abs": None, "max_rel": None,
                      "past_tolerance": None,
                      "summary": f"the ranks hold different parameters: {detail}"}

    def result(self) -> dict[str, Any]:
        """The answer: `first_divergence` (null when the replicas agree), what was compared
        how, and a `summary` in words."""
        bitwise = self.atol == 0 and self.rtol == 0
        tolerance = {"mode": "bitwise" if bitwise else "tolerance", "atol": self.atol, "rtol": self.rtol}
        step, phase = self.where
        at = f"step {step} ({phase})" if phase else f"step {step}"
        if self.not_compared:
            summary = self.not_compared
        elif self.found:
            summary = f"{at}: {self.found['summary']}"
        else:
            n = len(self.ranks)
            what = "the same parameters and gradients"
            if self.grads_local:
                what = f"the same parameters (gradients not compared: {self.grads_local})"
            elif not self.gradients:
                what = "the same parameters (no gradients yet)"
            how = "bitwise" if bitwise else f"within atol {self.atol:g}, rtol {self.rtol:g}"
            summary = f"{at}: all {n} ranks hold {what}: {self.compared} tensor{'s' if self.compared != 1 else ''} compared on each, {how}"
        if self.moved and not self.found:
            summary = f"{at}: {self.compared} of {self.total} tensors agree, then {self.moved}"
        if self.unread and not self.not_compared:
            n = len(self.unread)
            summary += (f"; {n} tensor{'s' if n != 1 else ''} could not be read on a rank and "
                        f"{'were' if n != 1 else 'was'} compared by shape and dtype alone ({self.unread[0]}"
                        f"{', ...' if n > 1 else ''})")
        if self.world > len(self.ranks) and not self.not_compared:
            summary += f" (only {ranks_words(self.ranks)} of the job's {self.world} answered: the others are gone)"
        return {"first_divergence": self.found, "ranks": self.ranks, "world_size": self.world, "step": step,
                "phase": phase,
                "compared": self.compared, "gradients": self.gradients, "tensors": self.total,
                "not_compared": self.not_compared, "moved": self.moved, "not_read": self.unread[:20],
                "grads_local": self.grads_local, "tolerance": tolerance,
                "summary": summary}


def _pause(page: dict[str, Any]) -> tuple[Any, Any, Any]:
    return page.get("step"), page.get("phase"), page.get("paused_at")


def _named(e: dict[str, Any] | None) -> str:
    return f"{e.get('name')} ({e.get('what')})" if e else "nothing more"


def _groups(items: list[tuple[int, Any]], same: Any) -> list[list[int]]:
    """Ranks grouped by the value they hold (each compared with its group's first), the
    largest group first (on a tie, the one of the lowest rank)."""
    groups: list[tuple[Any, list[int]]] = []
    for r, v in items:
        for first, members in groups:
            if same(v, first):
                members.append(r)
                break
        else:
            groups.append((v, [r]))
    return [m for _, m in sorted(groups, key=lambda g: (-len(g[1]), g[1][0]))]
