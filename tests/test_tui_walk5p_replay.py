"""The Break panel's replay line names an op born in the backward or the loss with its
autograd node (since 8844cf2 the replay's op is the program's `sqrt`, its node `SqrtBackward0`
beside it): the panel under Pilot, the fake job's replay answer a backward one."""

from __future__ import annotations

import fake_source
import pytest
from conftest import text_of, wait_for
from test_tui_keys import started

DEMO = fake_source.DEMO_FILE
BACKWARD = {"where": "backward", "module": "features", "module_type": "RootFeatures", "op": "sqrt",
            "node": "SqrtBackward0", "file": DEMO, "line": 20, "function": "forward", "code": "return x.sqrt()"}
LOSS = {"where": "loss", "module": None, "module_type": None, "op": "mse_loss", "node": "MseLossBackward0",
        "file": DEMO, "line": 52, "function": "main", "code": "loss = F.mse_loss(out, y)"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("first", "said"), [(BACKWARD, "op sqrt's backward (SqrtBackward0)"),
                                             (LOSS, "op mse_loss (MseLossBackward0)")])
async def test_an_op_born_in_the_backward_is_named_with_its_node(monkeypatch, first, said):
    monkeypatch.setattr(fake_source, "REPLAY", {**fake_source.REPLAY, "first_nonfinite": first, "advice": None})
    src, app, ctx = await started(size=(120, 40))
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: "replay:" in text_of(app, "#break-record"), "the replay's answer")
        record = " ".join(text_of(app, "#break-record").split())
        assert said in record, record
