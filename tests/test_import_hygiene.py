"""The import boundary, proven in clean interpreters (STYLE.md example 5)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "textual", "rich", "prompt_toolkit")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.parametrize("code", [
    "import stepdbg",
    "import stepdbg.wire.conditions, stepdbg.agent.report, stepdbg.cli",
    "import stepdbg.wire.protocol, stepdbg.client, stepdbg.client.async_client, stepdbg.client.remote, stepdbg.wire.sessions",
    "import stepdbg.client.console, stepdbg.cli.attach",
])
def test_the_facade_and_the_light_modules_load_nothing_heavy(code):
    assert loaded_after(code) == []


def test_the_front_end_package_never_loads_torch():
    assert "torch" not in loaded_after("import stepdbg_tui.app, stepdbg_tui.launch, stepdbg_tui.repl")


def test_stepdbg_help_answers_without_torch():
    out = subprocess.run([sys.executable, "-m", "stepdbg", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "usage: stepdbg" in out.stdout
