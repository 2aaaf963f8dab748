"""Make the TUI pictures of README.md and docs/ from the real app on the real row-1 demo.

    .venv/bin/python scripts/screenshots.py    # writes docs/break-panel.svg, model-panel.svg, plots-panel.svg,
                                               # and memory-panel.svg (demos/oom_batch.py at its OOM)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def serve(*args: str) -> subprocess.Popen:
    from stepdbg.wire import sessions

    os.environ["STEPDBG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="stepdbg-shots-")
    job = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", "-q", *args], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not sessions.listing():
        time.sleep(0.1)
    return job


async def main() -> None:
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp

    job = serve("--break", "nan", sys.executable, "demos/nan_log.py")
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    async with app.run_test(size=(110, 44)) as pilot:
        while app.status.get("state") != "paused":
            await pilot.pause(0.1)
        await pilot.press("r")
        while app.replay_result is None:
            await pilot.pause(0.1)
        await pilot.pause(0.5)
        app.clear_notifications()
        await pilot.pause(0.2)
        app.save_screenshot(str(ROOT / "docs" / "break-panel.svg"))
        await pilot.press("2")
        await pilot.pause(1.0)
        app.save_screenshot(str(ROOT / "docs" / "model-panel.svg"))
        await pilot.press("6")
        await pilot.pause(1.0)
        app.save_screenshot(str(ROOT / "docs" / "plots-panel.svg"))
    await client.close(then="end")
    job.wait(30)
    await memory_panel()


async def memory_panel() -> None:
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp

    job = serve("--record-memory", sys.executable, "demos/oom_batch.py")
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    async with app.run_test(size=(130, 46)) as pilot:
        while app.status.get("state") != "paused":
            await pilot.pause(0.1)
        await pilot.press("5")
        await pilot.pause(1.5)
        app.clear_notifications()
        await pilot.pause(0.2)
        app.save_screenshot(str(ROOT / "docs" / "memory-panel.svg"))
    await client.close(then="end")
    job.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
