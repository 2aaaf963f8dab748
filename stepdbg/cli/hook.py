"""`stepdbg hook install|remove|status`: the STEPDBG_AUTOSTART switch in this environment.

It puts a one-line .pth file in site-packages; at interpreter start, a script run with
STEPDBG_AUTOSTART set gets an agent (see stepdbg.launch.autostart)."""

from __future__ import annotations

import os
import textwrap

from .common import Parser

HOOK_NAME = "stepdbg-autostart.pth"
HOOK_LINE = ("import os; exec('try:\\n import stepdbg.launch.autostart\\nexcept Exception as e:\\n import sys; "
             "print(\\'stepdbg: autostart failed:\\', e, file=sys.stderr)') "
             "if os.environ.get('STEPDBG_AUTOSTART') else None\n")


def main(argv: list[str]) -> int:
    import sysconfig

    p = Parser(prog="stepdbg hook", usage="%(prog)s install|remove|status",
               description=textwrap.fill(
                   "Switch STEPDBG_AUTOSTART on for this Python environment: once installed, a script run with "
                   "STEPDBG_AUTOSTART=1 (or =nan,grad_norm>100) starts an attachable agent, e.g. every rank of "
                   "a SLURM job.", 88),
               epilog="examples:\n  stepdbg hook install\n  STEPDBG_AUTOSTART=1 srun python train.py\n"
                      "  stepdbg hook status")
    p.add_argument("what", nargs="?", choices=("install", "remove", "status"), default="status")
    what = p.parse_args(argv).what
    path = os.path.join(sysconfig.get_paths()["purelib"], HOOK_NAME)
    if what == "install":
        with open(path, "w") as f:
            f.write(HOOK_LINE)
        print(f"installed {path}: STEPDBG_AUTOSTART=1 (or =nan,grad_norm>100) now starts an agent in scripts")
    elif what == "remove":
        if os.path.exists(path):
            os.unlink(path)
        print(f"removed {path}")
    else:
        print(f"{'installed' if os.path.exists(path) else 'not installed'}: {path}")
    return 0
