"""The JSON-lines report: one object per event, flushed as written.

Non-finite floats are written as the strings "nan", "inf" and "-inf" (protocol.plain)
so every line is strict JSON that any tool can read.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, TextIO

from stepdbg.wire import files
from stepdbg.wire.protocol import plain


class Report:
    """Appends events to a file (or nowhere when no path is given). Thread-safe."""

    def __init__(self, path: str | None, extra: dict[str, Any] | None = None) -> None:
        self.path = path
        self.extra = extra or {}  # fields on every event (a rank's "rank")
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        if path:
            try:
                self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115
            except OSError as e:
                self._switch_off(e)

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        record = plain({"event": event, **self.extra, **fields})
        if self._file is not None:
            line = json.dumps(record, allow_nan=False)
            with self._lock:
                if self._file is not None:
                    try:
                        self._file.write(line + "\n")
                        self._file.flush()
                    except (OSError, ValueError) as e:  # a full disk, a closed file: never the job's problem
                        self._switch_off(e)
        return record

    def _switch_off(self, e: BaseException) -> None:
        """The report cannot be written: say so once and go on without it."""
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except (OSError, ValueError):
                pass  # the close flushes what the disk refused: the same error again
        reason = getattr(e, "strerror", None) or str(e)
        try:
            print(f"stepdbg: cannot write the report {self.path} ({reason}); it is off, the job goes on",
                  file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        with self._lock:
            f, self._file = self._file, None
            if f is not None:
                try:
                    f.close()
                except (OSError, ValueError) as e:
                    self._switch_off(e)


def rank_path(path: str, rank: int) -> str:
    """r.jsonl -> r.rank1.jsonl: one report per rank of a distributed job."""
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"


def read(path: str) -> list[dict[str, Any]]:
    """Read a report back (used by tests and tools): a regular file of at most
    files.REPORT_LIMIT bytes, else OSError."""
    text = files.read_capped(path, files.REPORT_LIMIT).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
