"""A distributed job as one target: a client per rank, one rank in view.

It has the same methods as a Client, so the console drives a job like one process:
inspection goes to the rank in view; stepping, LR changes, skip and end go to every
rank (a per-rank LR would silently make the replicas diverge). A pause of the whole
job is "pause at step N" with N past every rank's step, at before_optimizer_step,
so no rank is left inside a collective.
"""

from __future__ import annotations

from typing import Any

from .client import Client

BROADCAST = ("cont", "next_phase", "next_step", "run_to_step", "end", "set_lr", "set_param_group", "skip_step",
             "add_break", "remove_break", "enable_break")


def parse_ranks(spec: str, world: int) -> list[int]:
    """'0,2-3' -> [0, 2, 3]; 'all' -> every rank."""
    if spec.strip() in ("all", "*"):
        return list(range(world))
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"bad rank set {spec!r}: use e.g. 0,2-3 or all")
        out += range(int(lo), int(hi or lo) + 1)
    bad = [r for r in out if r >= world]
    if bad:
        raise ValueError(f"no rank {bad[0]}: the job has ranks 0-{world - 1}")
    return sorted(set(out))


class RankView:
    """What a front end reads of a job comes from the rank in view (shared by the sync
    Job and the TUI's async JobSource)."""

    clients: list[Any]
    current: int
    targets: list[int] | None = None  # who gets stepping and changes; None: every rank

    def _to(self) -> list[int]:
        return [r for r in (self.targets if self.targets is not None else range(len(self.clients)))
                if self.clients[r].exited is None]

    @property
    def client(self) -> Any:
        return self.clients[self.current]

    @property
    def session(self) -> dict[str, Any]:
        return self.client.session

    @property
    def status_at_attach(self) -> dict[str, Any]:
        return self.client.status_at_attach

    @property
    def paused(self) -> dict[str, Any] | None:
        return self.client.paused

    @property
    def exited(self) -> dict[str, Any] | None:
        """Set once every rank is gone."""
        return self.client.exited if all(c.exited is not None for c in self.clients) else None


class Job(RankView):
    """Clients of every rank of one job (index = rank)."""

    def __init__(self, clients: list[Client]) -> None:
        self.clients = clients
        self.current = 0

    def wait_paused(self, timeout: float | None = None, previous: dict[str, Any] | None = None) -> Any:
        return self.client.wait_paused(timeout, previous)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in BROADCAST:
            def every(*args: Any, **kwargs: Any) -> Any:
                results = [getattr(self.clients[r], name)(*args, **kwargs) for r in self._to()]
                return results[0] if results else None

            return every
        return getattr(self.client, name)

    @property
    def history(self) -> Any:
        return self.client.history

    def pause(self) -> int:
        """Pause every rank together at the next step boundary past all of them."""
        n = max(c.status()["step"] for c in self.clients if c.exited is None) + 1
        for r in self._to():
            self.clients[r].pause_at(n)
        return n

    def rank_table(self) -> list[dict[str, Any]]:
        """Per rank: state (running, paused, dead), step, phase, and the break."""
        rows = []
        for r, c in enumerate(self.clients):
            if c.exited is not None:
                rows.append({"rank": r, "state": "dead" if "lost" in c.exited else
                             f"exited ({c.exited.get('exit_code')})", "step": None, "phase": None})
                continue
            st = c.status()
            rows.append({"rank": r, "state": st["state"], "step": st["step"], "phase": st["phase"],
                         "break": (st.get("paused") or {}).get("reason")})
        return rows

    def compare(self, expr: str) -> list[tuple[int, str]]:
        """`expr` evaluated on every rank, to spot the one that differs."""
        out = []
        for r, c in enumerate(self.clients):
            if c.exited is not None:
                out.append((r, "(gone)"))
                continue
            res = c.evaluate(expr)
            out.append((r, (res.get("error") or "").strip().splitlines()[-1] if res.get("error") else str(res["value"])))
        return out

    def close(self, then: str = "stay") -> None:
        for c in self.clients:
            c.close(then=then)
