"""`diff ranks` over a DDP job that accumulates gradients under no_sync() but the last
micro-batch (tests/fixtures/ddp_accum.py, real torchrun, gloo): at the last micro-batch's
after_forward and before_backward, outside no_sync(), each rank's gradients are the local
sums of its earlier micro-batches; they are not compared there (it named module.0.weight.grad
and rank 1 on this healthy job), and are compared, equal, once the last backward synced them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT
from test_ranks import WAIT, finish, ranks_of, run_to_end

from stepdbg.client import replicas
from stepdbg.client.job import Job

pytestmark = pytest.mark.slow  # a real torchrun job

ACCUM = ROOT / "tests" / "fixtures" / "ddp_accum.py"


def test_gradients_mid_accumulation_are_not_compared_and_agree_once_synced(tmp_path, private_runtime_dir):
    cmd = [sys.executable, "-m", "stepdbg", "serve", "--report", str(tmp_path / "r.jsonl"), "--break", "step==2",
           "torchrun", "--standalone", "--nproc_per_node=2", str(ACCUM), "--steps", "4"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    with ranks_of(proc) as clients:
        job = Job(clients)
        brk = [c.wait_paused(WAIT) for c in clients][0]
        said = {}
        while (brk["step"], brk["phase"]) != (3, "before_optimizer_step"):
            r = replicas.diff_ranks(job)
            assert r["first_divergence"] is None, (brk["step"], brk["phase"], r["summary"])
            said.setdefault((brk["step"], brk["phase"]), []).append(r)
            job.next_phase()
            pauses = [c.wait_paused(WAIT) for c in clients]
            assert len({(b["step"], b["phase"]) for b in pauses}) == 1, pauses
            brk = pauses[0]
        for phase in ("after_forward", "before_backward"):  # the second micro-batch's: outside no_sync()
            last = said[(3, phase)][-1]
            assert (last["grads_local"] or "").startswith("the step's gradients are mid-accumulation"), last
        synced = said[(3, "after_backward")][-1]
        assert synced["grads_local"] is None and synced["gradients"] == 4, synced
        run_to_end(*clients)
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]
