"""The agent in a process nobody launched through stepdbg: a SLURM task, a torchrun rank.

`stepdbg hook install` puts a one-line .pth file in site-packages; at interpreter start
it imports this module only when STEPDBG_AUTOSTART is set (to "1", or to condition
specs: "nan,grad_norm>100"). Only script runs (`python train.py`) get an agent, not
`python -c`, `-m` tools or torchrun's launcher. The job is attachable
(`stepdbg attach`), and with a client attached a break pauses every rank together.
STEPDBG_REPORT names a report file (one per rank).
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    spec = os.environ.get("STEPDBG_AUTOSTART", "").strip()
    if not spec or spec == "0" or not sys.argv or not sys.argv[0].endswith(".py"):
        return
    import stepdbg

    if stepdbg.current() is not None:
        return
    breaks = [b.strip() for b in spec.split(",") if b.strip() and b.strip() != "1"]
    try:
        session = stepdbg.watch(*breaks, on_break="report", serve=True, quiet=os.environ.get("STEPDBG_QUIET") == "1")
    except OSError as e:  # no socket (a runtime directory open to others is refused): said in one line,
        from .bootstrap import cannot_listen

        stepdbg.stop()  # and the job runs as it would without the hook, never harmed
        print(f"stepdbg: {cannot_listen(e, None)}; STEPDBG_AUTOSTART: the job runs without stepdbg", file=sys.stderr,
              flush=True)
        return
    session.breaker.actions_defaulted = True  # with a client attached, a break pauses


main()
