"""One helper object kept on another (a client, the app) under a private name, made at
first use: what a client heard of replays, the app's last break, its ranks' breaks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def kept(owner: Any, name: str, make: Callable[[], T]) -> T:
    """`owner`'s `name` (in its __dict__: no property or __getattr__ of its runs), made by `make` once."""
    found = owner.__dict__.get(name)
    if found is None:
        found = owner.__dict__[name] = make()
    return found
