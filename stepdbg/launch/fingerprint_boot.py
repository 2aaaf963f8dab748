"""The job's entry point under `stepdbg diff`: bootstrap, with a fingerprint recorder.

Started as ``python -m stepdbg.launch.fingerprint_boot SCRIPT ARGS`` (or ``-m MODULE``)
with STEPDBG_CONFIG (as bootstrap reads it: stop after N steps, quiet) and
STEPDBG_FINGERPRINT, JSON ``{"path": ..., "steps": N, "max_calls": M}``: where the
recorder writes and for how many steps. Everything else is bootstrap's: the script's
``__main__``, argv, exit code. The recorder joins the session bootstrap makes when it is
made current (``stepdbg.use``), before the session starts and the script's first line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import stepdbg
from stepdbg.launch import bootstrap


def _spec(text: str) -> dict[str, Any] | None:
    try:
        spec = json.loads(text)
    except ValueError:
        return None
    ok = isinstance(spec, dict) and isinstance(spec.get("path"), str) and all(
        isinstance(spec.get(k), int) and not isinstance(spec.get(k), bool) and spec[k] >= 1
        for k in ("steps", "max_calls"))
    return spec if ok else None


def main() -> int:
    spec = _spec(os.environ.pop("STEPDBG_FINGERPRINT", ""))
    if spec is None:
        print("stepdbg: STEPDBG_FINGERPRINT must be JSON {path, steps, max_calls} (set by stepdbg diff)",
              file=sys.stderr)
        return 2
    plain_use = stepdbg.use

    def use(session: Any) -> None:
        plain_use(session)
        from stepdbg.agent.diff.recorder import Recorder

        Recorder.attach(session, spec["path"], spec["steps"], spec["max_calls"])

    stepdbg.use = use
    return bootstrap.main()


if __name__ == "__main__":
    sys.exit(main())
