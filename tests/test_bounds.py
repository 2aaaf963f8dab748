"""What the agent shows of the user's values: a locals view or an evaluation's result
costs little whatever the values are (it never copies a large object whole), and a
locals view shows the user's variables first."""

from __future__ import annotations

import sys
import tracemalloc

import pytest

from stepdbg.agent.measure.tensors import short_repr
from stepdbg.agent.views.locals_view import frame_locals

BIG = 100_000_000


def peak_while(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("make", [lambda: b"x" * BIG, lambda: bytearray(BIG), lambda: "y" * BIG,
                                  lambda: list(range(BIG // 100)), lambda: {i: i for i in range(BIG // 100)},
                                  lambda: set(range(BIG // 100))],
                         ids=["bytes", "bytearray", "str", "list", "dict", "set"])
def test_a_locals_view_of_a_huge_value_stays_small(make):
    big = make()  # noqa: F841 (a local of the frame shown)
    here = sys._getframe()
    rows, peak = peak_while(lambda: frame_locals(here))
    row = next(r for r in rows if r["name"] == "big")
    assert len(row["value"]) <= 80
    assert peak < 1_000_000, f"showing it cost {peak:,} bytes"


def test_reprs_are_bounded_in_depth_and_length_and_survive_a_failing_repr():
    nested: list = []
    nested.append(nested)
    assert short_repr(nested, 80) == "[[[[[[[...]]]]]]]"
    assert short_repr(b"ab" * 1000, 40).endswith("...")
    assert short_repr(list(range(100)), 2000).startswith("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,")

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert "Broken" in short_repr(Broken())


def test_a_locals_view_puts_your_variables_first_and_tensors_by_size():
    """At a script's top level the frame is full of dunders, imports, functions and
    classes: they are hidden unless asked for (`locals all`), and the largest tensor leads."""
    import os as osmod  # noqa: F401 (locals of the frame shown)

    import torch

    def helper() -> None: ...

    class Thing: ...

    __note__ = "a dunder"  # noqa: F841
    small = torch.zeros(2)  # noqa: F841
    x = 3  # noqa: F841
    big = torch.zeros(1000, 10)  # noqa: F841
    here = sys._getframe()
    names = [r["name"] for r in frame_locals(here)]
    assert names[:2] == ["big", "small"] and "x" in names
    assert not {"osmod", "helper", "Thing", "__note__", "torch"} & set(names)
    everything = [r["name"] for r in frame_locals(here, everything=True)]
    assert everything[: len(names)] == names and {"osmod", "helper", "Thing", "__note__"} <= set(everything)
