"""Warnings stepdbg records or silences while it runs its own work in the job (a replay, a
census of live objects), without touching what the job's warnings do after.

``warnings.catch_warnings()`` restores the filters on exit by calling
``_filters_mutated()``, which bumps the filters' version: every module's
``__warningregistry__`` is then cleared at its next warning, and a warning Python shows
once (the "default" action) is shown again. A run with a replay or a census printed the
job's own once-only warnings twice or seven times. Here the filter list is changed in
place (a filter put first, then taken out again by identity), which the warnings
machinery reads on each warning without a version change; recording swaps the function
that shows a warning, as catch_warnings(record=True) does.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def _first(action: str) -> Iterator[None]:
    entry = (action, None, Warning, None, 0)
    filters: list[Any] = warnings.filters  # type: ignore[attr-defined]
    filters.insert(0, entry)
    try:
        yield
    finally:
        for i, f in enumerate(filters):
            if f is entry:
                del filters[i]
                break


class Ignored:
    """A filter that ignores `message` until `remove()`: put first in place and taken out
    again by identity, so the job's filters are as they were, with no version bump."""

    def __init__(self, message: str) -> None:
        self.entry = ("ignore", re.compile(message, re.I), Warning, None, 0)
        warnings.filters.insert(0, self.entry)  # type: ignore[attr-defined]

    def remove(self) -> None:
        filters: list[Any] = warnings.filters  # type: ignore[attr-defined]
        for i, f in enumerate(filters):
            if f is self.entry:
                del filters[i]
                return


@contextlib.contextmanager
def recorded() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised in the block (a new message: one already shown at the same
    place is not raised again), kept in the list, none shown."""
    caught: list[warnings.WarningMessage] = []
    impl, show = warnings._showwarnmsg_impl, warnings.showwarning  # type: ignore[attr-defined]
    warnings._showwarnmsg_impl = caught.append  # type: ignore[attr-defined]
    warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
    try:
        with _first("always"):
            yield caught
    finally:
        warnings._showwarnmsg_impl, warnings.showwarning = impl, show  # type: ignore[attr-defined]


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No warning raised in the block is shown (isinstance on a deprecated torch proxy)."""
    with _first("ignore"):
        yield


__all__ = ["Ignored", "recorded", "silenced"]
