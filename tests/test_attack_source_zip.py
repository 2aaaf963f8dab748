"""A module imported from a zip whose archive is then swapped for a FIFO (issue 43's leftover
of the source files' attack): `zipimport` opens its archive again for each source it reads, so
the view's read of a line of that module waited for a writer for good. A zip archive is read
only where its path is still a regular file; a module of a plain zip still has its lines."""

from __future__ import annotations

import importlib
import linecache
import os
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from conftest import WAIT

from stepdbg.agent.measure import source_lines


def _zipped(tmp_path: Path, name: str) -> tuple[dict, str]:
    archive = tmp_path / f"{name}.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"{name}.py", "def f():\n    return 41 + 1  # the line read\n")
    sys.path.insert(0, str(archive))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(archive))
    return vars(module), module.f.__code__.co_filename


def _read_in_a_thread(filename: str, f_globals: dict) -> list[str] | None:
    said: list[list[str]] = []
    reader = threading.Thread(target=lambda: said.append(source_lines.lines(filename, f_globals)), daemon=True)
    reader.start()
    reader.join(WAIT)
    return said[0] if said else None


@pytest.fixture
def fresh_cache():
    yield
    for name in [n for n in sys.modules if n.startswith("zipped_")]:
        del sys.modules[name]


def test_a_zip_modules_lines_are_read(tmp_path, fresh_cache):
    f_globals, filename = _zipped(tmp_path, "zipped_plain")
    linecache.cache.pop(filename, None)
    assert source_lines.line(filename, 2, f_globals) == "    return 41 + 1  # the line read\n"


def test_a_zip_swapped_for_a_fifo_is_not_opened(tmp_path, fresh_cache):
    f_globals, filename = _zipped(tmp_path, "zipped_fifo")
    archive = tmp_path / "zipped_fifo.zip"
    archive.unlink()
    os.mkfifo(archive)
    linecache.cache.pop(filename, None)
    try:
        got = _read_in_a_thread(filename, f_globals)
    finally:
        with open(os.open(archive, os.O_RDWR | os.O_NONBLOCK), "wb"):  # (a writer: a read that waits ends)
            pass
    assert got == [], got
