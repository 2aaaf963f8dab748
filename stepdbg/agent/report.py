"""The JSON-lines report: one object per event, flushed as written.

Non-finite floats are written as the strings "nan", "inf" and "-inf" (protocol.plain)
so every line is strict JSON that any tool can read.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, TextIO

from ..wire.protocol import plain


class Report:
    """Appends events to a file (or nowhere when no path is given). Thread-safe."""

    def __init__(self, path: str | None, extra: dict[str, Any] | None = None) -> None:
        self.path = path
        self.extra = extra or {}  # fields on every event (a rank's "rank")
        self._lock = threading.Lock()
        self._file: TextIO | None = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        record = plain({"event": event, **self.extra, **fields})
        if self._file is not None:
            line = json.dumps(record, allow_nan=False)
            with self._lock:
                if self._file is not None:
                    self._file.write(line + "\n")
                    self._file.flush()
        return record

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def rank_path(path: str, rank: int) -> str:
    """r.jsonl -> r.rank1.jsonl: one report per rank of a distributed job."""
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"


def read(path: str) -> list[dict[str, Any]]:
    """Read a report back (used by tests and tools)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
