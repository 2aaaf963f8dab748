"""`stepdbg diff A B`: run two command lines under stepdbg and name where they first part.

Each of A and B is a command line in one argument ("python train.py --lr 3e-4"). They
run one after the other, here, each under the agent with a fingerprint recorder
(AgentConfig.fingerprint: the agent attaches stepdbg/agent/diff/recorder.py; stopped
after --steps steps as doctor stops), writing their records into a private temporary folder that is removed at the
end. The records are compared in the order things happened (stepdbg/wire/step_diff.py)
and the first divergence is printed: in words, or with --json as one JSON object.

Each job runs in a process group of its own (its DataLoader workers with it), watched
here: a progress line on stderr while it runs long (its steps recorded so far), ended at
--timeout. SIGINT, SIGTERM or SIGHUP to this process ends the running job's process
group, removes the folder and exits 128 + the signal's number, in one line.

Exit codes: 0 the runs agree, 1 they differ, 2 a bad argument or a run that failed or
ran past --timeout (one line says which and why), 128 + N when stopped by signal N.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

from ..wire.agent_config import FINGERPRINT_LIMIT
from ..wire.diff_randomness import randomness_words, records_randomness
from ..wire.fold import say
from ..wire.step_diff import Record, RecordError, first_divergence, nonnegative, read_record
from . import isolated
from .common import Parser, UsageError, add_run_options, run_config, steps
from .diff_jobs import (
    SIGNALS,
    StopOnSignal,
    Stopped,
    TimedOut,
    adopt_orphans,
    end_group,
    end_orphans,
    in_child,
    watch,
)
from .diff_records import (
    Keeper,
    RecordUnusable,
    keep,
    keep_folder,
    looks_like_a_record,
    names_a_record,
    read_kept,
)

EXIT_AGREE, EXIT_DIFFER, EXIT_BAD = 0, 1, 2
MAX_CALLS = 4096  # module calls fingerprinted per step (each about 0.5 KB in the record)
TIMEOUT = 3600.0  # seconds one run may take (--timeout)
DESCRIPTION = ("Run two command lines (each in one argument) under stepdbg for N steps, recording a "
               "fingerprint of the batch, the parameters, every module call's inputs and outputs, the loss, "
               "the gradients and the update, and print where the runs first differ: the step, phase, module, "
               "call and line. Bitwise by default; --atol/--rtol compare the fingerprints' numbers instead.")
EPILOG = """\
examples:
  stepdbg diff "python train.py" "python train.py"            # is the run reproducible?
  stepdbg diff "python train.py --eps 1e-5" "python train.py --eps 1e-3" --steps 2
  stepdbg diff --json --atol 1e-6 --rtol 1e-5 "python a.py" "python b.py"
  stepdbg diff --keep-records runs "python a.py" "python b.py"  # then, with no run:
  stepdbg diff --atol 1e-6 runs/A.jsonl runs/B.jsonl          # (or runs/A.jsonl "python c.py")

exit codes: 0 the runs agree, 1 they differ, 2 a bad argument or a run that failed or ran
past --timeout, 128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM): the running job and
its workers are ended first."""


class RunFailed(Exception):
    """A run did not give a record to compare: one line, exit code 2."""


def _nonnegative(flag: str, what: str = "a number >= 0 (e.g. 1e-6)") -> Any:
    def parse(value: str) -> float:
        try:
            return nonnegative(flag, value, what)  # (the one check: the console's `diff ranks --atol` too)
        except ValueError as e:
            raise UsageError(str(e)) from None

    return parse


def _steps(value: str) -> int:
    n = steps(value)
    if n > FINGERPRINT_LIMIT:  # the recorder's own cap, refused before a job starts
        raise UsageError(f"--steps is at most {FINGERPRINT_LIMIT:,} (the steps a run records), not {value}")
    return n


def _max_calls(value: str) -> int:
    try:
        n = steps(value)
    except UsageError:
        raise UsageError(f"--max-calls needs a whole number >= 1, not {value!r}") from None
    if n > FINGERPRINT_LIMIT:
        raise UsageError(f"--max-calls is at most {FINGERPRINT_LIMIT:,} (module calls a step), not {value}")
    return n



def parser() -> Parser:
    p = Parser(prog="stepdbg diff", usage='%(prog)s [OPTIONS] "COMMAND A" "COMMAND B"\n       %(prog)s [OPTIONS] [--model MODULE:FACTORY] BUNDLE BUNDLE\n'
                     '       %(prog)s [OPTIONS] RECORD.jsonl "COMMAND B" | RECORD.jsonl RECORD.jsonl',
               description=textwrap.fill(DESCRIPTION, 88), epilog=EPILOG)
    p.add_argument("a", metavar="A", help='the first command line, in one argument: "python train.py --lr 3e-4"; '
                   "or an evidence bundle's folder; or a record --keep-records kept (a name ending in .jsonl)")
    p.add_argument("b", metavar="B", help="the second, the same")
    p.add_argument("--steps", type=_steps, default=1, metavar="N", help="how many steps to compare (default 1)")
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object, alone on stdout")
    p.add_argument("--atol", type=_nonnegative("--atol"), default=0.0, metavar="X",
                   help="absolute tolerance on the fingerprints' numbers (default 0: bitwise)")
    p.add_argument("--rtol", type=_nonnegative("--rtol"), default=0.0, metavar="Y",
                   help="relative tolerance on the fingerprints' numbers (default 0: bitwise)")
    p.add_argument("--max-calls", type=_max_calls, default=None, metavar="N",
                   help=f"module calls fingerprinted per step (default {MAX_CALLS}, or a kept record's); later ones "
                        "are left out, and said")
    p.add_argument("--model", metavar="MODULE:FACTORY",
                   help="bundles only: a function (or class) that builds the model with no arguments, as "
                        "`stepdbg replay --model` takes it (a model built inline in the script needs it)")
    p.add_argument("--keep-records", metavar="DIR",
                   help="keep each run's record in DIR as A.jsonl and B.jsonl (DIR made 0700 if missing; a "
                        "record there is never overwritten); a record given as A or B is compared with no run")
    p.add_argument("--timeout", type=_nonnegative("--timeout", "a number of seconds >= 0 (0: no limit)"),
                   default=TIMEOUT, metavar="SECONDS",
                   help=f"end a run that has not finished after SECONDS (default {TIMEOUT:g}, each run; 0: no "
                        "limit) and exit 2; a run that takes long says its steps recorded so far on stderr")
    return p


def is_bundle(line: str) -> bool:
    """An argument that names a folder is an evidence bundle (or a mistake, said by job)."""
    return os.path.isdir(line)


def job(label: str, line: str, folder: str, n: int, max_calls: int, model: str | None = None
        ) -> tuple[list[str], dict[str, str], str]:
    """The command, environment and record path of one run; UsageError naming A or B."""
    record = os.path.join(folder, f"{label}.jsonl")
    if is_bundle(line):
        if not (os.path.isfile(os.path.join(line, "meta.json")) and os.path.isfile(os.path.join(line, "tensors.pt"))):
            raise UsageError(f"{label}: {line} is a folder, not an evidence bundle (it needs meta.json and tensors.pt)")
        if n != 1:
            raise UsageError(f"{label}: a bundle holds one step: compare it with --steps 1")
        return (isolated.command("stepdbg.agent.diff.bundle_record", os.path.abspath(line), record, str(max_calls),
                                 *(["--model", model] if model else [])),
                dict(os.environ), record)
    if model:
        raise UsageError("--model is for bundles: a command line builds its own model")
    if looks_like_a_record(line):
        raise UsageError(f"{label}: {line.strip()} holds JSON, not a script to run: a kept record's name ends "
                         "in .jsonl")
    if not line.strip():
        raise UsageError(f'{label} is empty: give a command line in one argument, e.g. "python train.py"')
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise UsageError(f"{label}: {e} in {line!r}") from None
    p = Parser(prog=f"stepdbg diff ({label})")
    add_run_options(p, tui=False)
    try:
        cfg = run_config(p.parse_args(["-q", *words]))  # (quiet: a diff's errors are one line; its jobs say nothing)
    except UsageError as e:
        raise UsageError(f"{label}: {e}") from None
    if cfg.torchrun is not None:
        raise UsageError(f"{label}: torchrun jobs are not compared yet (stepdbg diff runs one process per command)")
    cfg.agent.breaks, cfg.agent.quiet, cfg.agent.stop_after = [], True, n
    cfg.agent.fingerprint = {"path": record, "steps": n, "max_calls": max_calls}
    from .run import command, job_env

    return command(cfg), job_env(cfg), record


def run_one(label: str, line: str, cmd: list[str], env: dict[str, str], record: str, n: int,
            folder: str, timeout: float, running: list[subprocess.Popen[bytes]]) -> Record:
    """Run one command to its end; its record, or RunFailed saying why there is none. The
    job is in `running` while it runs (main ends it if this process is stopped)."""
    say(f"running {label}: {line}")
    log = os.path.join(folder, f"{label}.log")
    with open(log, "wb") as out:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # a stop now would lose the child's pid
        try:
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=in_child)
            running.append(proc)
        except OSError as e:
            raise RunFailed(f"{label} could not start ({cmd[0]}: {e.strerror or e})") from None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    try:
        watch(label, proc, record, n, timeout)
    except TimedOut as e:
        raise RunFailed(str(e)) from None
    end_group(proc)  # what its group left behind (DataLoader workers), then the exit code
    running.remove(proc)
    code = proc.returncode
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"failed (exit code {code})"
        raise RunFailed(f"{label} {how}: {_last_line(log) or 'it printed nothing'}")
    if not os.path.exists(record):
        raise RunFailed(f"{label} ended before its script started under stepdbg: {_last_line(log) or 'no output'}")
    try:
        rec = read_record(record)
    except (RecordError, OSError) as e:
        raise RunFailed(f"{label}: its record cannot be read ({e})") from None
    enough(label, rec, n, ran=True)
    capped = sum(int(s.get("capped") or 0) for s in rec.step_lines.values())
    more = f"; {capped} module calls past --max-calls left out" if capped else ""
    say(f"{label}: {n} step{'s' if n != 1 else ''} recorded ({rec.entries()} fingerprints{more})")
    return rec


def enough(label: str, rec: Record, n: int, ran: bool) -> None:
    """RunFailed unless the record (of a run, or kept) holds the `n` steps to compare."""
    if rec.error:
        raise RunFailed(f"{label}: the fingerprint recorder failed inside the job ({rec.error})")
    done, did = len(rec.complete_steps()), f"{label} ran" if ran else f"{label}'s record holds"
    if done == 0:
        raise RunFailed(f"{did} no training step (no optimizer step after a forward and backward): "
                        "stepdbg diff compares training steps")
    if done < n:
        raise RunFailed(f"{did} {done} training step{'s' if done != 1 else ''} of the {n} asked "
                        f"(--steps {n}); ask for at most {done}")
    gap = next((s for s in range(n) if s not in rec.step_lines or not rec.steps.get(s)), None)
    if gap is not None:  # (a run's steps are numbered from 0 by its recorder; a kept record's are data)
        raise RunFailed(f"{did} no fingerprint of step {gap}" + (f" (--steps {n}: steps 0 to {n - 1})" if n > 1 else ""))


def _last_line(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 65536))
        lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


def answer(ns: Any, recs: dict[str, Record]) -> dict[str, Any]:
    """The JSON answer: the first divergence (or null) and what was compared how."""
    wanted = list(range(ns.steps))
    found = first_divergence(recs["A"], recs["B"], wanted, ns.atol, ns.rtol)
    bitwise = ns.atol == 0 and ns.rtol == 0
    tolerance = {"mode": "bitwise" if bitwise else "tolerance", "atol": ns.atol, "rtol": ns.rtol}
    capped = {k: sum(int(s.get("capped") or 0) for s in r.step_lines.values()) for k, r in recs.items()}
    if found is not None:
        found["tolerance"] = tolerance
    # What each run measured of the randomness in that step (its draws, by module), as the TUI's D says it
    drawn = records_randomness(recs["A"], recs["B"], found) if found is not None else None
    return {"first_divergence": found, "randomness": drawn, "steps": ns.steps, "tolerance": tolerance,
            "fingerprints": {k: r.entries() for k, r in recs.items()}, "calls_left_out": capped,
            "unreadable": {k: len(r.unreadable()) for k, r in recs.items()},
            "first_unreadable": {k: (r.unreadable() or [None])[0] for k, r in recs.items()},
            "max_calls": ns.max_calls, "a": ns.a, "b": ns.b}


def words(result: dict[str, Any]) -> str:
    t = result["tolerance"]
    tol = "bitwise (the fingerprints' hashes)" if t["mode"] == "bitwise" else f"atol {t['atol']:g}, rtol {t['rtol']:g}"
    d = result["first_divergence"]
    if d is None:
        n = result["steps"]
        first = (f"the runs agree: {n} step{'s' if n != 1 else ''}, "
                 f"{result['fingerprints']['A']} fingerprints each, no difference")
    else:
        first = "first divergence: " + d["summary"]
        if result.get("randomness") is not None:
            first += "\n" + randomness_words(result["randomness"])
    left = [f"{k}: {v} module calls past --max-calls ({result['max_calls']}) left out"
            for k, v in result["calls_left_out"].items() if v]
    left += [f"{k}: {v} tensor{'s' if v != 1 else ''} could not be read, compared by shape and dtype only "
             f"(first: {result['first_unreadable'][k]})" for k, v in result["unreadable"].items() if v]
    return "\n".join([first, f"tolerance: {tol}", *left, f"A: {result['a']}", f"B: {result['b']}"])


def main(argv: list[str]) -> int:
    ns = parser().parse_args(argv)
    stop = StopOnSignal()
    adopt_orphans()
    old = {sig: signal.signal(sig, stop) for sig in SIGNALS}
    try:
        code = _diff(ns, stop)
    except Stopped as e:
        code = 128 + e.signum
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if stop.signum is not None:
        say(f"stepdbg diff: stopped by {signal.Signals(stop.signum).name}: the running job was ended with its "
            "process group (its workers), and the temporary folder removed")
        return 128 + stop.signum
    return code


def _prepare(ns: Any, folder: str) -> tuple[dict[str, Record], dict[str, Any], Keeper | None]:
    """The kept records given as A or B (read and checked first: no run starts for a bad
    one), the runs' commands, and the folder their records are kept in."""
    lines = {"A": ns.a, "B": ns.b}
    recs = {label: read_kept(label, line) for label, line in lines.items() if names_a_record(line)}
    for label, rec in recs.items():
        enough(label, rec, ns.steps, ran=False)
    of_bundle = {label: recs[label].bundle if label in recs else is_bundle(line) for label, line in lines.items()}
    if of_bundle["A"] != of_bundle["B"]:
        raise UsageError("compare a bundle with a bundle, or a command line with a command line "
                         "(a bundle's record holds no loss nor update)")
    if ns.model and len(recs) == 2:
        raise UsageError("--model is for bundles: two kept records need no model")
    ns.max_calls = _same_cap(ns.max_calls, recs)
    jobs = {label: job(label, line, folder, ns.steps, ns.max_calls, ns.model)
            for label, line in lines.items() if label not in recs}
    if ns.keep_records is not None and not jobs:
        raise UsageError("--keep-records keeps the records of runs: A and B are kept records already")
    return recs, jobs, keep_folder(ns.keep_records, list(jobs)) if ns.keep_records is not None else None


def _same_cap(asked: int | None, recs: dict[str, Record]) -> int:
    """The module calls a step to record: a kept record's (its run's cut-off, which a run
    compared with it must share: past it one records what the other left out), else asked."""
    caps = {label: r.max_calls for label, r in recs.items()}
    if len(set(caps.values())) > 1:
        raise UsageError(f"A was recorded with --max-calls {caps['A']}, B with {caps['B']}: their records part "
                         "where the smaller stops")
    for label, cap in caps.items():
        if cap is not None and asked is not None and cap != asked:
            raise UsageError(f"{label}'s record was made with --max-calls {cap}: give the same, or leave it out")
    return next((c for c in caps.values() if c is not None), asked or MAX_CALLS)


def _diff(ns: Any, stop: StopOnSignal) -> int:
    running: list[subprocess.Popen[bytes]] = []
    folder = tempfile.mkdtemp(prefix="stepdbg-diff-")  # 0700, ours alone
    kept: Keeper | None = None
    try:
        recs, jobs, kept = _prepare(ns, folder)
        for label, (cmd, env, record) in jobs.items():
            recs[label] = run_one(label, getattr(ns, label.lower()), cmd, env, record, ns.steps, folder,
                                  ns.timeout, running)
            if kept:
                say(keep(label, record, kept))
    except (RunFailed, RecordUnusable) as e:
        say(f"stepdbg diff: {e}")
        return EXIT_BAD
    finally:
        stop.holding = True  # from here a signal waits: the jobs are ended and the folder removed first
        if kept:
            kept.close()
        for proc in running:
            end_group(proc)
        end_orphans()  # (what a job started in a session of its own: a server, a daemon)
        shutil.rmtree(folder, ignore_errors=True)
    if stop.signum is not None:
        return 128 + stop.signum
    stop.holding = False
    result = answer(ns, recs)
    if ns.json:
        print(json.dumps(result, indent=2))
    else:
        say(words(result), sys.stdout)  # (folded at a terminal: the answer was cut mid-word)
    return EXIT_AGREE if result["first_divergence"] is None else EXIT_DIFFER
