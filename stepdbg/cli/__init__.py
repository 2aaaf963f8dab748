"""The `stepdbg` command line: one module per subcommand, each with its own parser.

    stepdbg [run] [OPTIONS] [python] SCRIPT.py ARGS...     (run.py; torchrun too)
    stepdbg serve | doctor | overfit | diff | attach | ls | hook | replay ...

Options are stepdbg's until the script (or the interpreter, or -m) is named; every
argument after it goes to the script untouched. The commands that only talk to a job
(attach, ls, hook) never import torch.
"""

from __future__ import annotations

import os
import sys

from ..client import ClientError, TargetError
from ..wire import settings
from ..wire.fold import say
from .common import EXIT_FAILED, EXIT_USAGE, UsageError

SUBCOMMANDS = ("run", "serve", "doctor", "overfit", "diff", "attach", "ls", "hook", "replay")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[0] if argv and argv[0] in SUBCOMMANDS else "run"
    rest = argv[1:] if argv and argv[0] == cmd else argv
    try:
        settings.check_environment()
        return _dispatch(cmd, rest)
    except (UsageError, settings.SettingError) as e:
        say(f"stepdbg: {e}")
        return EXIT_USAGE
    except (TargetError, ClientError, PermissionError) as e:  # PermissionError: a runtime dir not ours
        say(f"stepdbg: {e}")
        return EXIT_FAILED
    except BrokenPipeError:
        # `stepdbg --help | head -1`: the reader left; end quietly, as a shell tool does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _dispatch(cmd: str, argv: list[str]) -> int:
    if cmd in ("run", "serve"):
        from . import run

        return run.main(argv, serve=cmd == "serve")
    if cmd in ("doctor", "overfit"):
        from . import doctor

        return doctor.main(argv, overfit=cmd == "overfit")
    if cmd == "diff":
        from . import diff

        return diff.main(argv)
    if cmd == "attach":
        from . import attach

        return attach.main(argv)
    if cmd == "replay":
        from . import replay

        return replay.main(argv)
    if cmd == "ls":
        from . import ls

        return ls.main(argv)
    from . import hook

    return hook.main(argv)
