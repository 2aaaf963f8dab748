"""`stepdbg attach slurm:JOBID`: the nodes of a running SLURM job, asked of SLURM's own
tools (``squeue`` for the job's node list and state, ``scontrol show hostnames`` to expand
it), then the job's ranks through ssh to its nodes (remote.py), which find each other.

On a node, a rank's session is the job's when the job id its agent recorded is the SLURM
job id (torchrun started with ``--rdzv-id=$SLURM_JOB_ID``, or no torchrun), else when it
is the only distributed job there.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

from .remote import SshTarget, host_name_ok, job_rows
from .targets import TargetError, printable

_JOB = re.compile(r"[0-9]+(?:[_+][0-9]+)?")  # 1234, an array task 1234_7, a het component 1234+0
SLURM_TIMEOUT = 30.0


def _slurm(*cmd: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=SLURM_TIMEOUT, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise TargetError(f"slurm: targets need SLURM's {cmd[0]} on this machine: run stepdbg on a login or "
                          "compute node of the cluster, or attach to a node with ssh://NODE/JOB") from None
    except subprocess.TimeoutExpired:
        raise TargetError(f"{shlex.join(cmd)} did not answer in {SLURM_TIMEOUT:.0f}s") from None
    if out.returncode != 0:
        said = printable(out.stderr or out.stdout).strip()
        raise TargetError(f"{shlex.join(cmd)} failed (exit code {out.returncode})" + (f": {said}" if said else ""))
    return out.stdout


def nodes(job: str) -> list[str]:
    """The nodes SLURM job `job` runs on, in SLURM's order."""
    if not _JOB.fullmatch(job):
        raise TargetError(f"{job!r} is not a SLURM job id (slurm:1234, slurm:1234_7)")
    rows = [line.split() for line in _slurm("squeue", "-h", "-j", job, "-o", "%T %N").splitlines() if line.strip()]
    if not rows:
        raise TargetError(f"SLURM job {job} is not in the queue: it ended, or it is not yours to see (squeue -j {job})")
    state, *nodelist = rows[0]
    if state != "RUNNING" or not nodelist:
        raise TargetError(f"SLURM job {job} is {state.lower()}: no node runs it yet")
    names = [n for n in _slurm("scontrol", "show", "hostnames", nodelist[0]).split() if n]
    for n in names:  # they go to ssh: 'mallory@node1' would be its user, 'node1:2222' a port
        if not host_name_ok(n):
            raise TargetError(f"SLURM names a node of job {job} {printable(n)!r}, which is not a host name; "
                              "refusing to pass it to ssh")
    return names


def job_rows_of(job: str) -> tuple[SshTarget, list[dict[str, Any]]]:
    """The rows of the job's ranks on the first of its nodes that has them (remote.job_rows)."""
    names = nodes(job)
    for node in names:
        found = job_rows(f"ssh://{node}/{job}") or job_rows(f"ssh://{node}")
        if found is not None:
            return found
    raise TargetError(f"no stepdbg session of SLURM job {job} on its nodes ({', '.join(names)}): is the job "
                      "running under stepdbg (STEPDBG_AUTOSTART in its script, docs/ranks.md)?")
