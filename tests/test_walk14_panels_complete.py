"""The REPL line's Tab completes an attribute after a dot (issue 45, the closing walk): it
completed the paused frame's names, not `model.tra<Tab>` or `opt.param_g<Tab>`. The
attributes are read in the job through the eval request, running none of the user's code:
no property runs (stepdbg/agent/views/completion.py), and the list is bounded."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for
from textual.widgets import Input

from stepdbg.agent.views import completion

pytestmark = pytest.mark.timeout(300)


async def test_tab_after_a_dot_completes_the_attributes_of_the_paused_frames_object(tui_at_break):
    async with tui_at_break("--break", "step==2") as (app, pilot):
        line = app.query_one("#repl", Input)
        await pilot.press("e", *"opt.param_g", "tab")
        await wait_for(pilot, lambda: line.value == "opt.param_groups", f"opt.param_groups (the line: {line.value!r})")
        await pilot.press("ctrl+u", *"model.tra", "tab")
        await wait_for(pilot, lambda: "Tab: training, train" in text_of(app, "#repl-out"), "the two names said")  # (its own first)
        assert line.value == "model.train"
        await pilot.press("ctrl+u", *"model[0].we", "tab")  # (an index before the dot: not followed)
        await pilot.press("ctrl+u", *"loss.grad_f", "tab")
        await wait_for(pilot, lambda: line.value == "loss.grad_fn", f"loss.grad_fn (the line: {line.value!r})")
        await pilot.press("ctrl+u", *"nosuch.x", "tab")
        await wait_for(pilot, lambda: "no nosuch in the paused frame" in text_of(app, "#repl-out"), "no such name")


class Holder:
    calls = 0

    @property
    def costly(self) -> Holder:
        Holder.calls += 1
        raise AssertionError("a property ran")

    def __getattr__(self, name: str) -> object:
        Holder.calls += 1
        raise AssertionError("__getattr__ ran")


def test_the_attributes_are_read_without_running_a_property_and_bounded():
    h = Holder()
    h.inner = Holder()
    h.inner.value = 3
    assert completion.attribute_names(h, ("inner",), "val") == "value"
    assert completion.attribute_names(h, (), "co") == "costly"  # (named, never run)
    assert completion.attribute_names(h, ("costly",), "") == ""  # (through a property: not followed)
    assert completion.attribute_names(h, ("nosuch",), "") == ""
    assert Holder.calls == 0
    many = Holder()
    many.__dict__.update({f"name{i:04d}": i for i in range(5000)})
    names = completion.attribute_names(many, (), "name", cap=60).split()
    assert names == [f"name{i:04d}" for i in range(60)]


def test_an_objects_own_names_come_before_its_classes():
    """The sixteenth walk's 12: `model.<Tab>` listed `T_destination, add_module, apply, ...`, twelve
    of nn.Module's methods, and `features` and `head` only after `model.h`. Its own first."""
    from torch import nn

    from stepdbg.agent.views import completion

    model = nn.Sequential()
    model.add_module("features", nn.Linear(2, 2))
    model.add_module("head", nn.Linear(2, 1))
    model.register_buffer("scale", None)
    names = completion.attribute_names(model, (), "").split()
    assert names[:4] == ["features", "head", "scale", "training"], names
    assert "add_module" in names and names.index("add_module") > names.index("training"), names
    assert completion.attribute_names(model, (), "h").split() == ["head", "half"], names
