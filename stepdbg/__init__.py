"""stepdbg: a step-level debugger for PyTorch training loops.

``import stepdbg`` is cheap and does not import torch: the agent (hooks, replay) loads
on the first call that needs it.

    import stepdbg
    stepdbg.watch("nan", "grad_norm>100", report="run.jsonl")   # in the script, before the loop
    stepdbg.breakpoint()                                          # pause here
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from .version import __version__

__all__ = ["__version__", "breakpoint", "current", "use", "watch", "stop"]

if TYPE_CHECKING:
    from .agent.session import Session

_session: Session | None = None


def current() -> Session | None:
    """The session of this process, if one was started."""
    return _session


def use(session: Session) -> None:
    """Make `session` the session of this process (the launcher's bootstrap starts its own)."""
    global _session
    _session = session


def watch(*breaks: str, on_break: str | list[str] = "report", report: str | None = None,
          quiet: bool = False, serve: bool | None = None, keep_every: int = 0, keep: int = 2,
          max_rewinds: int | None = None, record_memory: bool = False, skip_on_device: bool = False) -> Session:
    """Start watching the training loop of this process for `breaks` (condition specs).

    With no breaks, watches for ``nan`` and ``exception``. Calling it again adds the new
    conditions to the running session. A malformed spec raises ConditionError at once.
    `serve` (or STEPDBG_SERVE=1) makes the job attachable (`stepdbg attach`); then
    ``breakpoint()``, and a break with ``on_break="pause"``, wait for a client. `keep_every` keeps a snapshot of
    the training state every N steps (the newest `keep`), for ``on_break="rewind"`` (at most
    `max_rewinds` times) or a rewind from a front end. `record_memory` is ``--record-memory``,
    `skip_on_device` is ``--skip-on-device``.
    """
    global _session
    from .wire.conditions import parse

    conds = [parse(b) for b in breaks]  # refuse bad input before touching torch
    if _session is not None:
        for c in conds:
            _session.breaker.add(c)
        return _session
    from .launch import session_for
    from .wire.agent_config import DEFAULT_BREAKS, AgentConfig

    actions = [on_break] if isinstance(on_break, str) else list(on_break)
    if "rewind" in actions and not keep_every:
        raise ValueError('on_break="rewind" needs snapshots to go back to: pass keep_every=N (e.g. 50)')
    serving = bool(serve or (serve is None and os.environ.get("STEPDBG_SERVE") == "1"))
    _session = session_for(AgentConfig(
        breaks=[c.spec for c in conds] or list(DEFAULT_BREAKS), actions=actions,
        report=report or os.environ.get("STEPDBG_REPORT"), quiet=quiet,
        serve=serving,  # a pause (breakpoint(), on_break="pause") waits for a client
        rewind={"every": keep_every, "keep": keep, "max_rewinds": max_rewinds}, record_memory=record_memory,
        skip_on_device=skip_on_device))
    _session.start(scan_existing=True)
    import atexit

    atexit.register(stop)  # the end event, and the session file and socket removed
    if serving:
        from .agent.serve.server import serve as start_server

        start_server(_session)
    if _session.breaker.break_set.first("exception") is not None:
        _install_excepthook(_session)
    return _session


def breakpoint() -> None:  # noqa: A001 - the name users expect
    """Pause the training loop here (a console at the terminal, or the attached front end)."""
    s = _session or watch()
    s.breaker.breakpoint(sys._getframe(1))


def stop(exit_code: int | None = None) -> None:
    """Remove every hook and close the report."""
    global _session
    if _session is not None:
        _session.stop(exit_code)
        _session = None


def _install_excepthook(session: Session) -> None:
    previous = sys.excepthook

    def hook(typ: Any, exc: BaseException, tb: Any) -> None:
        try:
            session.breaker.post_mortem(exc)
        finally:
            previous(typ, exc, tb)

    sys.excepthook = hook
