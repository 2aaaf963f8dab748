"""The op table (stepdbg/wire/ops.py) is the one declaration of every op: the handlers,
the clients' methods and docs/protocol.md's table are checked against it (STYLE.md 1)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from stepdbg.wire.ops import OPS, SCHEMAS, OpCalls, markdown_table

PROTOCOL_DOC = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"


def test_every_op_has_one_handler_and_every_handler_an_op():
    from stepdbg.agent.serve.handlers import Handlers

    handled = {n[3:] for n in dir(Handlers) if n.startswith("op_")}
    assert handled == set(OPS)
    for name, op in OPS.items():  # the handler takes what the table declares, with its defaults
        params = list(inspect.signature(getattr(Handlers, f"op_{name}")).parameters.values())[1:]
        assert [p.name for p in params] == [a.name for a in op.args], name
        assert [p.default for p in params] == [a.default for a in op.args], name


def test_the_readme_table_is_the_generated_one():
    text = PROTOCOL_DOC.read_text()
    found = re.search(r"<!-- ops:start -->\n(.*?)\n<!-- ops:end -->", text, re.S)
    assert found, "docs/protocol.md has no ops table between <!-- ops:start --> and <!-- ops:end -->"
    assert found.group(1) == markdown_table(), "regenerate docs/protocol.md's op table from stepdbg/wire/ops.py"


class Recorder(OpCalls):
    def __init__(self) -> None:
        self.sent: list[tuple[str, float | None, dict]] = []
        self.forgot = 0

    def call(self, op, timeout=300, **args):
        self.sent.append((op, timeout, args))
        return op

    def _forget_pause(self) -> None:
        self.forgot += 1


def test_client_methods_send_the_op_with_its_wire_names_and_defaults():
    r = Recorder()
    r.frame_locals(everything=True)
    r.slice("w", "0")
    r.set_lr(0.1, pin=True)
    r.interrupt()
    assert r.sent == [("locals", 300, {"all": True}), ("slice", 300, {"name": "w", "index": "0", "limit": 256}),
                      ("set_lr", 300, {"lr": 0.1, "group": None, "pin": True}), ("interrupt", 10, {})]
    r.cont()
    r.rewind()
    assert r.forgot == 2  # resuming ops forget the pause first
    with pytest.raises(TypeError):
        r.summary()  # a required argument, as Python says it
    assert "norm" in Recorder.summary.__doc__ and str(inspect.signature(Recorder.slice)) == (
        "(self, name, index='', limit=256)")


def test_every_default_passes_its_own_check():
    for name, op in OPS.items():
        for a in op.args:
            if a.default is not inspect.Parameter.empty:
                assert SCHEMAS[name][a.name].check(a.name, a.default) == a.default


def test_what_goes_to_every_rank_is_declared_on_the_op():
    """Stepping and changes go to every rank of a job (the replicas stay the same);
    inspection to the rank in view. The flag is on the op; a job routes each op by it."""
    from stepdbg.client.job import Job

    class Rank:
        exited = None

        def __init__(self) -> None:
            self.sent: list[str] = []

        def call(self, op, timeout=300, **args):
            self.sent.append(op)

        def _forget_pause(self) -> None:
            self.sent.append("(forgot the pause)")

    broadcast = {n for n, op in OPS.items() if op.broadcast}
    assert {"cont", "next_step", "run_to_step", "end", "set_lr", "skip"} <= broadcast
    assert not {"summary", "eval", "replay", "status", "save"} & broadcast
    job = Job([Rank(), Rank(), Rank()])
    job.current, job.targets = 1, [0, 1]
    job.set_lr(0.1)
    job.cont()
    job.summary("loss")
    assert [c.sent for c in job.clients] == [["set_lr", "(forgot the pause)", "cont"],
                                             ["set_lr", "(forgot the pause)", "cont", "summary"], []]


@pytest.mark.parametrize("typed, said", [
    ("3e-4", None),
    ("abc", "'abc' is not a learning rate (a number from 0 to 10000)"),
    ("1e5", "learning rate must be a finite number from 0 to 10000, not 100000.0"),
    ("-1", "learning rate must be a finite number from 0 to 10000, not -1.0"),
    ("nan", "learning rate must be a finite number from 0 to 10000, not nan"),
])
def test_one_check_of_a_learning_rate_for_every_front_end_and_the_agent(typed, said):
    """The LR dialog, the REPL line, the console and the agent all ask wire.ops.check_lr,
    which is the set_lr op's own schema: what one accepts, all accept."""
    from stepdbg.wire.ops import LR, OPS, lr_typed

    assert OPS["set_lr"].args[0].spec is LR
    if said is None:
        assert lr_typed(typed) == 3e-4
    else:
        with pytest.raises(ValueError) as e:
            lr_typed(typed)
        assert str(e.value) == said
