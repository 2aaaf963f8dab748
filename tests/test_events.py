"""The events pushed to clients are declared once (stepdbg/wire/events.py): the agent sends
only those, the clients drop anything else, the TUI's handlers and docs/protocol.md's table
follow the declaration (STYLE.md 1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stepdbg.wire import events, protocol

PROTOCOL_DOC = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"


def test_the_readme_table_is_the_generated_one():
    found = re.search(r"<!-- events:start -->\n(.*?)\n<!-- events:end -->", PROTOCOL_DOC.read_text(), re.S)
    assert found and found.group(1) == events.markdown_table(), "regenerate docs/protocol.md's events table"


def test_the_agent_sends_only_declared_events():
    assert protocol.event("resumed", {"step": 3})["event"] == "resumed"
    with pytest.raises(ValueError, match="no such event 'resume'"):
        protocol.event("resume", {"step": 3})
    with pytest.raises(ValueError):
        protocol.event("lost", "the client's own")


@pytest.mark.parametrize(("name", "data", "ok"), [
    ("paused", {"step": 1, "phase": "before_backward", "condition": "nan", "reason": "loss is nan"}, True),
    ("paused", {"step": 1}, False),  # half-made: no phase, condition, reason
    ("output", [{"stream": "stdout", "lines": ["x"]}], True),
    ("output", {"stream": "stdout", "lines": ["x"]}, False),  # not a batch
    ("exited", {"exit_code": 0, "steps": 3, "error": None}, True),
    ("exited", None, False),
    ("lost", "the connection closed", True),
    ("shutdown", {}, False),
    (7, {}, False),
])
def test_a_client_takes_only_a_declared_event_with_its_fields(name, data, ok):
    assert events.check_in(name, data) is ok


def test_the_tuis_handlers_are_declared_events():
    from stepdbg_tui.job_events import HANDLERS

    routed_by_the_app = {"step", "lost"}  # (the plots; the end of the connection)
    assert set(HANDLERS) | routed_by_the_app == set(events.EVENTS)


@pytest.mark.usefixtures("private_runtime_dir")
def test_the_jobs_lines_read_before_an_event_go_out_before_it():
    """Output lines the agent has read (batched ten times a second) go to a client before
    the next event, so the Log shows them in the job's order (issue 45, item 8: a break
    overtook the lines printed before it)."""
    from stepdbg import client
    from stepdbg.agent.serve.server import serve
    from stepdbg.agent.session import Session
    from stepdbg.wire.agent_config import AgentConfig

    session = Session(AgentConfig(quiet=True))
    server = serve(session, announce=False)
    try:
        with client.connect(server.info.id) as c:
            assert c.status()["frontends"] == 1  # (answered once this client gets every event)
            session.bus.emit("output", {"stream": "stdout", "lines": ["printed before the change"]})
            session.bus.emit("change", {"what": "lr", "step": 0})
            got = []
            while not got or got[-1] != "change":
                got.append(c.events.get(timeout=60)["event"])
            assert got == ["output", "change"], got
    finally:
        server.stop()
