"""What the app talks to: the agent's ops as methods, generated from the op table
(stepdbg/wire/ops.py) into ``stepdbg.client.connection.Ops``, and the session it attached to.

An ``AsyncClient`` is one process's source; a ``JobSource`` answers the same ops for the
ranks of a distributed job (``many_ranks``: the app shows the Ranks panel). The tests'
fake (tests/fake_source.py) is built on ``Ops`` too, with canned answers by op name.
"""

from __future__ import annotations

from stepdbg.client.connection import Ops

from .job_source import JobSource

Source = Ops | JobSource
