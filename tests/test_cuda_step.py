"""A training step on a GPU, as issue 24 lists it: the NaN break and replay under bf16
autocast (the replay runs the attention kernel the step ran) and under GradScaler fp16,
rewind with pinned snapshots, torch.compile, the syncs the default watch adds, and losses
unchanged. Skipped where there is no GPU (`pytest -m cuda`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")]

DEVICE = "cuda"


class Attention(nn.Module):
    """nanoGPT's attention: one qkv projection, SDPA with a causal mask. `nodes`: the
    autograd node of each SDPA call, which names the kernel that ran."""

    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads
        self.nodes: list[str] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        self.nodes.append(y.grad_fn.name())
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def test_bf16_nan_break_and_the_replay_names_the_attention_kernel_the_step_ran(session_factory):
    """nanoGPT-style bf16 autocast; the pause is outside the autocast block. A float32
    replay picked another attention kernel (EfficientAttention for the step's cuDNN one);
    the replay runs under the step's autocast, so its node is the real step's."""
    torch.manual_seed(0)
    s = session_factory("nan", actions=("replay",))
    model = Attention().to(DEVICE)
    with torch.no_grad():
        model.qkv.weight.mul_(1e20)  # the scores overflow: the attention makes the NaN
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = model(torch.randn(4, 16, 64, device=DEVICE))
    out.float().pow(2).mean().backward()
    assert len(s.breaks) == 1
    first = s.views.replays[0]["first_nonfinite"]
    assert (first["where"], first["op"]) == ("forward", "scaled_dot_product_attention"), s.views.replays[0]["summary"]
    real, replayed = model.nodes[:2]
    assert first["node"] == replayed == real, model.nodes  # the step's own kernel


def test_gradscaler_fp16_skips_are_amp_at_work_and_a_real_nan_is_data(session_factory):
    """GradScaler starts at 2**40: its first steps overflow and are skipped (no break, the
    record says skipped_by_scaler). A NaN in the batch at step 6 breaks and is born in the data."""
    torch.manual_seed(0)
    s = session_factory("nan", actions=("replay",))
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1)).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(DEVICE, init_scale=2.0**40)
    for step in range(8):
        x = torch.randn(16, 32, device=DEVICE)
        if step == 6:
            x[3, 5] = float("nan")
        with torch.autocast(DEVICE, dtype=torch.float16):
            loss = model(x).pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert any(h["skipped_by_scaler"] for h in list(s.model.history)[:6])
    (brk,) = s.breaks
    assert brk.step == 6
    first = s.views.replays[0]["first_nonfinite"]
    assert (first["where"], first["index"]) == ("input", [3, 5]), first


def test_rewind_with_pinned_snapshots_restores_the_cuda_tensors_bit_for_bit(session_factory):
    s = session_factory("step==12", actions=("rewind",))
    s.rewinder.configure(every=5)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.ReLU(), nn.Linear(64, 1)).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    seen: dict[int, dict[str, torch.Tensor]] = {}
    for step in range(14):
        if step in (10, 13):  # the state step 10 starts from, and where the loop is after the rewind
            seen[step] = {k: v.clone() for k, v in model.state_dict().items()}
            seen[step].update({f"{i}.{k}": v.clone() for i, p in enumerate(model.parameters())
                               for k, v in opt.state[p].items()})
        loss = model(torch.randn(32, 16, device=DEVICE)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    (rewind,) = [c for c in s.bus.changes if c["what"] == "rewind"]
    assert (rewind["step"], rewind["to_step"]) == (12, 10)
    for k, v in seen[10].items():
        assert torch.equal(v, seen[13][k]), k
    copies = [host for snap in s.rewinder.snapshots for live, host in snap.pairs if live.is_cuda]
    assert copies and all(h.is_pinned() for h in copies)  # copied to pinned memory on a side stream


def test_torch_compile_on_cuda_breaks_at_a_nan_and_names_the_module(session_factory):
    torch.manual_seed(0)
    s = session_factory("nan", actions=("replay",))
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(DEVICE)
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(6):
        if step == 4:
            with torch.no_grad():
                model[2].weight.fill_(float("inf"))
        loss = compiled(torch.randn(8, 16, device=DEVICE)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s.breaks:
            break
    (brk,) = s.breaks
    assert brk.step == 4
    first = s.views.replays[0]["first_nonfinite"]
    assert first["where"] == "parameter" and "2.weight" in first["tensor"], first


def _syncs(step, n: int = 3) -> int:
    """Host-device syncs in `n` steps, counted by CUDA's sync debug mode."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(n):
                step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum("synchroniz" in str(w.message) for w in caught)


class MLPStep:
    """A small classifier's training step on the GPU; `nan` puts a NaN in the next batch."""

    def __init__(self, fused: bool = False) -> None:
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 10)).to(DEVICE)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=fused)
        self.nan = False

    def __call__(self) -> None:
        x, y = torch.randn(32, 64, device=DEVICE), torch.randint(0, 10, (32,), device=DEVICE)
        if self.nan:
            x[0, 0], self.nan = float("nan"), False
        loss = F.cross_entropy(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def test_the_default_watch_adds_at_most_one_sync_a_step(session_factory):
    """The loss stays on the GPU until the gradient norm is measured; both come back in
    one copy (step/host_reads.py; the same count is checked on the CPU with
    defer_reads in test_step_model)."""
    step = MLPStep()
    for _ in range(3):
        step()
    plain = _syncs(step)
    session_factory("nan", "grad_norm>1e9", "data_wait>60")
    for _ in range(3):
        step()  # the first step under stepdbg finds the roots
    watched = _syncs(step)
    assert watched - plain <= 3, (plain, watched)  # at most one added per step, over 3 steps


def test_skip_on_device_adds_no_sync_and_skips_the_nan_step_on_the_gpu(session_factory):
    """--skip-on-device with fused AdamW: the watch adds no sync a step (the step's values go
    to pinned memory behind an event), the NaN step's update is skipped by the fused kernel,
    and the break comes before the next update (test_device_skip runs the same on the CPU)."""
    step = MLPStep(fused=True)
    for _ in range(3):
        step()
    plain = _syncs(step)
    s = session_factory("nan", "grad_norm>1e9", skip_on_device=True)
    for _ in range(3):
        step()
    assert _syncs(step) == plain
    before = [p.detach().clone() for p in step.model.parameters()]
    step.nan = True
    step()
    assert all(torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    step()
    torch.cuda.synchronize()
    step()  # (the event has surely passed by now)
    assert s.breaks and "skipped_on_device" in s.breaks[0].details, s.breaks


LOSSES = textwrap.dedent("""
    import torch
    from torch import nn
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    model = nn.Sequential(nn.Linear(64, 256), nn.LayerNorm(256), nn.GELU(), nn.Linear(256, 1)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(20):
        x = torch.randn(64, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = (model(x).float() - x.mean(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        print(repr(loss.item()))
""")


def test_losses_under_the_default_watch_are_those_of_a_plain_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LOSSES)
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}  # deterministic cuBLAS
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env)
    watched = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "-q", "--break", "nan",
                              "--break", "grad_norm>1e9", sys.executable, str(script)],
                             capture_output=True, text=True, timeout=240, env=env)
    assert plain.returncode == 0 and watched.returncode == 0, (plain.stderr, watched.stderr)
    assert plain.stdout.splitlines() == watched.stdout.splitlines()
    assert len(plain.stdout.splitlines()) == 20
