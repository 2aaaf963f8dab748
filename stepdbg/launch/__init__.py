"""How a script gets an agent before its first line, and where the agent's parts meet the
in-process console: ``bootstrap`` (what ``stepdbg run`` starts in the job), ``autostart``
(the .pth hook's agent for jobs nobody launched through stepdbg), ``keeper`` (the process
that holds a TUI-launched job's output, so the job outlives the TUI), ``session_for`` (a
Session with the console at the job's terminal; ``stepdbg.watch()`` uses it too)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepdbg.agent.session import Session
    from stepdbg.wire.agent_config import AgentConfig


def session_for(config: AgentConfig) -> Session:
    """A Session whose pauses, with no front end attached, open the console on the job's
    terminal (when it is one). The agent never imports the client; this wires them. The
    console's modules load at the first pause that asks for it, not at the job's start."""
    from stepdbg.agent.session import Session

    return Session(config, console=_console, can_prompt=_can_prompt)


def _console(session: Session) -> None:
    from stepdbg.agent.serve.local import LocalCalls
    from stepdbg.client.console import run_console

    run_console(LocalCalls(session))


def _can_prompt() -> bool:
    from stepdbg.client.console import can_prompt

    return can_prompt()
