"""Why no change reaches the job, in words, where a panel's hint or field says it: after its
end (`the job has ended`), or once its process is gone (kill -9: `the job (pid N) is gone`,
job_gone.GoneWatch); None while it is there. The Breaks panel's add box and the Optim
panel's `l` hint say it (they invited a change after the end: the eighteenth walk's leftovers)."""

from __future__ import annotations

from typing import Any


def no_job(app: Any) -> str | None:
    if str((getattr(app, "status", None) or {}).get("state", "")).startswith("exited"):
        return "the job has ended"
    if getattr(app, "gone", None):
        return f"the job (pid {app.source.session.get('pid')}) is gone"
    return None
