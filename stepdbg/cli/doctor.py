"""`stepdbg doctor` and `stepdbg overfit`: a lint for the first minute of a run.

doctor runs the first N steps with every rule on, then prints the findings (exit 1 when
there are any, 0 when none). overfit feeds the first DataLoader batch again and again
for N steps and says whether the loss reaches near zero.
"""

from __future__ import annotations

import textwrap

from .common import Parser, add_run_options, run_config, steps
from .run import command, job_env

DOCTOR = ("Run the first N steps of the script with every rule on (exploding or vanishing gradients, "
          "stale gradients, wrong loss for the targets, unscaled inputs, eval mode, memory growth, a slow "
          "DataLoader, ...), then print the findings: exit 1 when there are any, 0 when none.")
OVERFIT = ("Feed the first DataLoader batch again and again for N steps and say whether the loss reaches "
           "near zero: a model, loss or optimizer bug shows as a model that cannot fit one batch.")
EXAMPLES = {
    "doctor": "examples:\n  stepdbg doctor python train.py\n  stepdbg doctor --steps 30 --json train.py > findings.json",
    "overfit": "examples:\n  stepdbg overfit python train.py\n  stepdbg overfit --steps 200 train.py",
}


def main(argv: list[str], overfit: bool = False) -> int:
    name = "overfit" if overfit else "doctor"
    p = Parser(prog=f"stepdbg {name}", usage="%(prog)s [--steps N] [OPTIONS] [python] SCRIPT.py [ARGS...]",
               description=textwrap.fill(OVERFIT if overfit else DOCTOR, 88), epilog=EXAMPLES[name])
    p.add_argument("--steps", type=steps, default=100 if overfit else 20, metavar="N",
                   help=f"how many steps to run (default {100 if overfit else 20}); the data-wait rule speaks "
                        "from 4 steps, memory growth from 14")
    p.add_argument("--json", action="store_true", help="print the findings as JSON, alone on stdout (the script's own stdout goes to stderr)")
    add_run_options(p, tui=False)
    ns = p.parse_args(argv)
    cfg = run_config(ns)
    cfg.tui = False
    cfg.agent.doctor, cfg.agent.stop_after, cfg.agent.overfit = True, ns.steps, overfit
    if not ns.actions:  # a NaN break is a finding, with what the replay of its step finds
        cfg.agent.actions, cfg.agent.actions_given = ["replay"], True
    from stepdbg_tui.doctor import run_doctor

    return run_doctor(command(cfg), job_env(cfg), cfg.agent.report,
                      {"steps": ns.steps, "overfit": overfit, "json": ns.json})
