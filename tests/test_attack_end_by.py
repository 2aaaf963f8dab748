"""The end op's `by` over the wire (9bd9fd4): a bad value is one bad_args error and changes
nothing; and `here`, the words of the job's own console ('as asked by the console at this
terminal (q)'), is refused from a client: any client could have the job's terminal say its
end was typed there."""

from __future__ import annotations

import pytest

from stepdbg import client
from stepdbg.wire.ops import ENDED_BY


@pytest.mark.parametrize("by", ["here", "x", 5, None, ["tui"], "tui\n"])
def test_a_clients_end_by_a_word_not_its_own_is_refused_and_changes_nothing(
        session_factory, private_runtime_dir, monkeypatch, by):
    from stepdbg.agent import session
    from stepdbg.agent.serve.server import serve

    monkeypatch.setattr(session, "end_if_stuck", lambda breaker: None)  # (no training loop: it would os._exit)
    s = session_factory("nan")
    server = serve(s, announce=False)
    try:
        with client.connect(server.info.id) as c:
            with pytest.raises(client.ClientError) as refused:
                c.call("end", by=by)
            assert refused.value.code == "bad_args", refused.value
            assert (s.controls.end_requested, s.controls.end_asked_by) == (False, ENDED_BY["client"])
            c.call("end", by="console")  # (the words a client may say)
            assert s.controls.end_asked_by == ENDED_BY["console"]
    finally:
        s.stop()


def test_the_jobs_own_console_says_here(session_factory, monkeypatch):
    from stepdbg.agent import session
    from stepdbg.agent.serve.local import LocalCalls

    monkeypatch.setattr(session, "end_if_stuck", lambda breaker: None)
    s = session_factory("nan")
    LocalCalls(s).call("end")
    assert s.controls.end_asked_by == ENDED_BY["here"]
