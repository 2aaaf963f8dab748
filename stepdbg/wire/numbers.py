"""Whole numbers from text that a person or an environment wrote: ASCII digits only.

``str.isdigit()`` is true for '²' and '١', which ``int()`` then refuses or reads as a
number nobody typed; a launcher that trusted it died with a traceback on ``RANK=²``."""

from __future__ import annotations

import os
import re

_DIGITS = re.compile(r"[0-9]+")


def ascii_int(text: str | None) -> int | None:
    """`text` as a non-negative int when it is ASCII digits (surrounding blanks allowed), else None."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if _DIGITS.fullmatch(text) else None


def env_int(name: str, default: int | None = None) -> int | None:
    """An environment variable as ascii_int reads it; `default` when unset or not a number
    (inside a job a bad value must never fail the training)."""
    value = ascii_int(os.environ.get(name))
    return default if value is None else value
