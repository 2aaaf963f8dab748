"""A hang across ranks, explained while the ranks are alive.

When a rank's watchdog sees no progress, it asks every rank, through the job's own store
(the one torch.distributed made), where it is: step, phase, the user's line, its stack, the
collective it waits in and how many it has started per process group (collectives.py).
Every rank's watchdog answers from its own thread (the training thread is stuck), once a
tick. A rank that does not answer in time is named as such: dead, or its agent stuck.
`diagnose` turns the answers into words: which rank skipped which collective, and where
each one waits. With ``--on-break abort`` the rank that reported tells the others to end
too (exit code 3), through the same key.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from stepdbg.agent.breaks.ranks import Ranks
from stepdbg.agent.measure import threads
from stepdbg.agent.measure.frames import is_own_file
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.rank_words import ranks_words
from stepdbg.wire.stall_text import at as _at
from stepdbg.wire.stall_text import collective_text

KEY = "stepdbg/stall"
STACK_FRAMES = 12


def rank_state(model: StepModel, rank: int) -> dict[str, Any]:
    """Where this rank is, read from outside its training thread."""
    now = time.monotonic()
    st = model.current
    frame = sys._current_frames().get(model.thread) if model.thread is not None else None
    out: dict[str, Any] = {"rank": rank, "answered": True, "step": model.step,
                           "phase": st.phase if st else "between steps", "paused": model.halted,
                           "idle_s": round(now - model.last_progress, 1), "where": None, "stack": [],
                           **model.collectives.state()}
    if frame is not None:
        blocked = threads.blocked_in(frame, True)
        out["where"] = {k: blocked[k] for k in ("file", "line", "function", "code")}
        out["stack"] = [f"{os.path.basename(f.f_code.co_filename)}:{n} {f.f_code.co_name}"  # (no source read)
                        for f, n in reversed(list(traceback.walk_stack(frame)))
                        if not (is_own_file(f.f_code.co_filename) or f.f_code.co_filename.startswith("<frozen"))
                        ][-STACK_FRAMES:]
        if out["current"] is None and blocked["collective"]:  # DDP's reducer: called from C++
            ddp = blocked["collective"].startswith("backward")
            out["current"] = {"op": "all_reduce" if ddp else blocked["collective"], "group": None, "seq": None,
                              "by": "DDP's gradient buckets, in backward" if ddp else None,
                              "where": {"file": blocked["file"], "line": blocked["line"]},
                              "started_s_ago": out["idle_s"]}
    return out


class StallExchange:
    """The store key through which ranks ask each other where they are, and end together."""

    def __init__(self, ranks: Ranks, model: StepModel) -> None:
        self.ranks, self.model = ranks, model
        self.answered_at: float | None = None  # when this rank last answered another's ask
        self.asker: int | None = None
        self._answered = 0

    def _store(self) -> Any:
        return self.ranks._store()

    def poll(self) -> dict[str, Any] | None:
        """Answer another rank's ask (once each); the ask, when it says the job ends."""
        store = self._store()
        if not store.check([KEY]):
            return None
        ask = json.loads(store.get(KEY))
        me = self.ranks.rank
        if ask["id"] != self._answered and ask["rank"] != me:
            store.set(f"{KEY}/{ask['id']}/{me}", json.dumps(rank_state(self.model, me)))
            self._answered, self.answered_at, self.asker = ask["id"], time.monotonic(), ask["rank"]
        if ask.get("abort") and ask["rank"] != me:
            store.set(f"{KEY}/{ask['id']}/end/{me}", "seen")
            return ask
        return None

    def ask(self, wait: float) -> tuple[int, list[dict[str, Any]]] | None:
        """Every rank's state (index = rank), waiting up to `wait` seconds for the answers.
        None when another rank asked after this one (both saw the stall): that rank reports
        it, and this one has answered it."""
        store, me, world = self._store(), self.ranks.rank, self.ranks.world()
        ask_id = store.add(f"{KEY}/asks", 1)
        store.set(KEY, json.dumps({"id": ask_id, "rank": me}))
        rows: dict[int, dict[str, Any]] = {me: rank_state(self.model, me)}
        deadline = time.monotonic() + wait
        while len(rows) < world and time.monotonic() < deadline:
            if json.loads(store.get(KEY))["id"] != ask_id:
                self.poll()
                return None
            for r in range(world):
                key = f"{KEY}/{ask_id}/{r}"
                if r not in rows and store.check([key]):
                    rows[r] = json.loads(store.get(key))
            time.sleep(0.05)
        return ask_id, [rows.get(r, {"rank": r, "answered": False}) for r in range(world)]

    def end_job(self, ask_id: int, rows: list[dict[str, Any]], wait: float) -> None:
        """Tell every rank to end (exit code 3): this rank's stall report aborts the job.
        Returns once the ranks that answered have seen it (or after `wait` seconds), so that
        this rank exits first and theirs are the collectives that fail, quietly."""
        store = self._store()
        store.set(KEY, json.dumps({"id": ask_id, "rank": self.ranks.rank, "abort": True}))
        keys = [f"{KEY}/{ask_id}/end/{r['rank']}" for r in rows if r.get("answered") and r["rank"] != self.ranks.rank]
        deadline = time.monotonic() + wait
        while keys and not store.check(keys) and time.monotonic() < deadline:
            time.sleep(0.05)


def _doing(row: dict[str, Any]) -> str:
    """What a rank does, for a sentence: 'is waiting in X at file:line' or 'is at file:line...'."""
    c = row.get("current")
    if c:
        return f"is waiting in {collective_text(c)} at {_at(c.get('where') or row.get('where'))}"
    where = row.get("where")
    fn = f" in {where['function']}" if where else ""
    return f"is not in a collective: at {_at(where)}{fn}, step {row['step']} ({row['phase']}), " \
           f"no progress for {row['idle_s']:g}s"



def diagnose(rows: list[dict[str, Any]]) -> str:
    """In words: who did not answer, who skipped (or has not reached) which collective and
    where it waits instead, and where the ranks that wait are."""
    silent = [r["rank"] for r in rows if not r.get("answered")]
    alive = [r for r in rows if r.get("answered")]
    counted = [r for r in alive if r.get("current") and r["current"].get("seq") is not None]
    said: dict[str, list[int]] = {}  # a phrase -> the ranks it is true of
    keys = {(r["current"]["group"], r["current"]["seq"]) for r in counted}
    if len(keys) == 1 and len(counted) == len(alive) and not silent:
        c = counted[0]["current"]
        return (f"every rank waits in {collective_text(c)}: they agree on it, and it does not complete "
                "(the network, the backend, or a process outside these ranks)")
    accused: set[int] = set()
    # The collective waited in longest is the one the others skipped; a rank that skipped
    # it is not said to be skipped in turn.
    for w in sorted(counted, key=lambda r: -r["current"].get("started_s_ago", 0)):
        if w["rank"] in accused:
            continue
        c, group, seq = w["current"], w["current"]["group"], w["current"]["seq"]
        for o in alive:
            oc = o.get("current") or {}
            if o is w or (oc.get("group"), oc.get("seq")) == (group, seq):
                continue
            accused.add(o["rank"])
            done = (o.get("counts") or {}).get(group, 0)
            if done < seq:
                verb = "skipped" if oc else "has not reached"
                said.setdefault(f"{verb} {collective_text(c)} (called at {_at(c.get('where'))} on rank "
                                f"{w['rank']}) and {_doing(o)}", []).append(o["rank"])
            else:
                said.setdefault(f"is past {collective_text(c)} (it started {done} on {group}) and {_doing(o)}",
                                []).append(o["rank"])
    parts = [f"{ranks_words(rs)} {text if len(set(rs)) == 1 else text.replace(' and is ', ' and are ', 1)}"
             for text, rs in said.items()]
    rest: dict[str, list[int]] = {}
    for r in alive:
        if r["rank"] not in accused:
            rest.setdefault(_doing(r).replace("is waiting in", "waits in", 1), []).append(r["rank"])
    parts += [f"{ranks_words(rs)} {text}" for text, rs in rest.items()]
    if silent:
        parts.append(f"{ranks_words(silent)} did not answer: dead, or its agent is stuck")
    return "; ".join(parts)
