"""An end asked for while the job runs happens at its next pause point. A job stuck between
them (a DataLoader whose worker hangs, a deadlock) reaches none: `q` then `e` in the TUI, and
`abort` in the console, did nothing to it. So an end that no pause point has taken within
GRACE seconds, with no progress since it was asked for, is done from outside: the way a
stall with --on-break abort ends the job (exit code 3, the loader's workers killed).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from stepdbg.agent.measure import threads

GRACE = 10.0  # seconds: a long step (a big model's forward) reaches its next pause point within it


def end_if_stuck(breaker: Any, grace: float = GRACE) -> None:
    """After `controls.end()` while running: end the job in `grace` s if it has not moved."""
    model = breaker.model
    asked_at = model.last_progress

    def watch() -> None:
        time.sleep(grace)
        if model.last_progress != asked_at or model.halted or breaker.ending:
            return  # (it moved: the pause point took the end; or it is ending already)
        loader = model.capture.get("loader")
        it = loader() if loader is not None else None
        settings = breaker.guard("end", threads.loader_settings, it) if it is not None else None
        breaker.end_stalled({"dataloader": settings}, f"asked to end, it reached no pause point in {grace:g}s "
                            "(it is stuck between them)")

    threading.Thread(target=watch, name="stepdbg-end", daemon=True).start()
