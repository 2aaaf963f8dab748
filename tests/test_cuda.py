"""The CUDA paths, on a GPU: memory by category beside the allocator's view, a real CUDA
out-of-memory break, the --record-memory snapshot file, and a data wait that does not
count the host waiting for the GPU. Skipped where there is no GPU (`pytest -m cuda`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")]

WAIT = 60
ROOT = Path(__file__).resolve().parents[1]


def test_categories_and_the_allocator_view_on_cuda(session_factory):
    s = session_factory("nan", actions=("pause",))
    s.attach()
    model = nn.Sequential(nn.Linear(256, 4096), nn.ReLU(), nn.Linear(4096, 256)).cuda()
    opt = torch.optim.AdamW(model.parameters())

    def train() -> None:
        for step in range(4):
            x = torch.randn(512, 256, device="cuda")
            opt.zero_grad(set_to_none=False)
            loss = model(x).pow(2).mean()
            if step == 3:
                s.breaker.breakpoint(sys._getframe())
            loss.backward()
            opt.step()

    t = threading.Thread(target=train, daemon=True)
    t.start()
    s.controls.wait_paused(WAIT)
    mem = s.views.memory()
    s.detach("continue")
    t.join(WAIT)
    params = sum(p.numel() for p in model.parameters()) * 4
    cats = mem["by_device"]["cuda:0"]
    assert cats["parameters"] == params and cats["gradients"] == params
    assert cats["optimizer_state"] == pytest.approx(2 * params, rel=0.01)
    assert cats["activations"] == pytest.approx(512 * 4096 * 4 + 512 * 256 * 4, rel=0.05)
    (dev,) = mem["cuda"]
    assert dev["allocated"] >= sum(cats.values()) and dev["unattributed"] >= 0 and dev["fragmented"] is not None


def test_a_real_cuda_oom_names_the_batch_jump(session_factory):
    s = session_factory("exception", actions=("pause",))
    s.attach()
    model = nn.Linear(64, 64).cuda()
    free, _ = torch.cuda.mem_get_info()
    rows = int(free // (64 * 4)) * 2  # twice what the GPU has free

    def train() -> None:
        for step in range(4):
            try:
                x = torch.empty(rows if step == 3 else 64, 64, device="cuda", dtype=torch.uint8).float()
                model(x).sum().backward()
            except torch.OutOfMemoryError as e:
                s.breaker.post_mortem(e)
                return

    t = threading.Thread(target=train, daemon=True)
    t.start()
    brk = s.controls.wait_paused(WAIT)
    got = brk.details["oom"]
    s.detach("continue")
    t.join(WAIT)
    assert got["asked"] and got["asked"] > free / 2
    assert got["cause"]["rule"] in ("batch_jump", "size"), got["cause"]


def test_record_memory_writes_a_snapshot_at_a_break(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\nm = nn.Linear(64, 64).cuda()\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(4):\n    opt.zero_grad()\n    m(torch.randn(32, 64, device='cuda')).sum().backward()\n"
        "    opt.step()\n")
    report = tmp_path / "r.jsonl"
    proc = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "-q", "--record-memory", "--break", "step==2",
                           "--report", str(report), sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    (brk,) = [e for e in map(json.loads, report.read_text().splitlines()) if e["event"] == "break"]
    path = Path(brk["details"]["memory_snapshot"])
    assert path == tmp_path / "memory-2.pickle" and path.stat().st_size > 0


def test_the_gpu_data_wait_leaves_out_the_host_waiting_for_the_gpu(session_factory):
    """A get_batch loop that logs loss.item() after the optimizer step: the host then waits
    for the step's own queued kernels in the gap, which is not data time. The watch reads
    the loss and gradient norm before the update (one sync), so what is left queued at the
    gap is the update: AdamW over 134M parameters (an H200 ran SGD's in 0.3 ms, less than
    Python's own time in the gap, and the test measured nothing)."""
    s = session_factory("nan")
    model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(8)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    for _ in range(12):
        x = torch.randn(4096, 4096, device="cuda")  # the data: made on the GPU
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        loss.item()  # waits for this step's forward, backward and update
    torch.cuda.synchronize()
    rows = [h for h in s.model.history if "gpu_data_wait" in h]
    assert len(rows) >= 8
    host = sorted(h["data_wait"] for h in rows)[len(rows) // 2]
    gpu = sorted(h["gpu_data_wait"] for h in rows)[len(rows) // 2]
    assert gpu < 0.5 * host, (gpu, host)
