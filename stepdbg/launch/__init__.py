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
    terminal (when it is one). The agent never imports the client; this wires them."""
    from stepdbg.agent.serve.local import LocalCalls
    from stepdbg.agent.session import Session
    from stepdbg.client.console import can_prompt, run_console

    return Session(config, console=lambda s: run_console(LocalCalls(s)), can_prompt=can_prompt)
