"""A save is atomic (issue 43): on a full disk nothing of the bundle is left, the message
says the disk is full and the job's own next checkpoint still fits; a signal that lands
during a save reaches the job as it would without stepdbg (its SystemExit or
KeyboardInterrupt, not torch's RuntimeError), and nothing of the save is left either."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import torch
from torch import nn

from stepdbg.agent.replay import bundle


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB filesystem of its own (tmpfs; root only), unmounted after."""
    where = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def big_model() -> nn.Module:
    return nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 1))  # 1 MiB of weights: over the disk


def test_a_save_on_a_full_disk_leaves_nothing_says_so_and_the_jobs_checkpoint_still_fits(session_factory,
                                                                                         small_disk, tmp_path):
    report = tmp_path / "r.jsonl"
    s = session_factory("nan", actions=("save",), bundle_dir=str(small_disk), report=str(report))
    model = big_model()
    x = torch.randn(4, 512)
    x[0, 0] = float("nan")
    model(x).sum().backward()
    s.stop()
    (record,) = [e for e in map(json.loads, report.read_text().splitlines()) if e["event"] == "bundle"]
    assert record["saved"] is False and record["error"].startswith("No space left on device"), record
    assert list(small_disk.iterdir()) == []  # no partial tensors.pt, no temporary folder
    torch.save(nn.Linear(64, 64).state_dict(), small_disk / "ckpt.pt")  # the job's own save: 17 KB fits


def write_one(directory: Path) -> Path:
    model = nn.Sequential(nn.Linear(2048, 2048), nn.Linear(2048, 1))  # 16 MiB: a save of some milliseconds
    x = torch.randn(2, 2048)
    cap = {"step": 3, "args": (x,), "kwargs": {}, "batch": x, "rng": {"cpu": torch.get_rng_state()}}
    return bundle.write(directory, "stepdbg-step3", model, cap, {"phase": "after_backward"}, {})


@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt])
def test_a_signal_during_a_save_reaches_the_job_as_itself_and_leaves_nothing(tmp_path, raised):
    """The job's own SIGTERM handler (save and sys.exit(143)) or Ctrl-C, landing in the
    write: torch.save wraps it in a RuntimeError; the job must get it back as itself."""
    fired: list[bool] = []

    def handler(signum, frame):
        fired.append(True)
        raise raised(143) if raised is SystemExit else raised()

    old = signal.signal(signal.SIGALRM, handler)
    writes = 0
    real = bundle._Recorded.write

    def counted(self, data):  # the alarm is armed at the first write: it lands inside torch.save
        nonlocal writes
        writes += 1
        if writes == 1:
            signal.setitimer(signal.ITIMER_REAL, 0.0005)
        return real(self, data)

    bundle._Recorded.write = counted  # type: ignore[method-assign]
    try:
        with pytest.raises(raised):
            write_one(tmp_path)
    finally:
        bundle._Recorded.write = real  # type: ignore[method-assign]
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert fired and list(tmp_path.iterdir()) == []


class FullyShardedDataParallel(nn.Module):  # named as FSDP's wrapper is: its parameters count as sharded
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_a_sharded_models_bundle_reads_back_and_replays_its_inputs(tmp_path):
    """What the writer says of a sharded model (why no parameters were saved) is what the
    reader accepts: a CI run of FSDP2 on 2 ranks found the reader wanting a boolean."""
    from stepdbg.agent.replay import offline

    x = torch.randn(2, 4)
    x[1, 2] = float("nan")
    cap = {"step": 3, "args": (x,), "kwargs": {}, "batch": x, "rng": {"cpu": torch.get_rng_state()}}
    path = bundle.write(tmp_path, "stepdbg-step3", FullyShardedDataParallel(), cap, {"phase": "after_backward"}, {})
    meta, _ = bundle.read(path)
    assert meta["parameters"] == "sharded" and meta["sharded"] == "its parameters are sharded by FSDP"
    result = offline.replay_bundle(path)
    assert result["first_nonfinite"] and result["reproduced"] is True, result
