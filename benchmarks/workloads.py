"""The workloads: a small MLP, a 4-layer transformer encoder (d=128), a GPT-style
character model shaped like nanoGPT's small config (scaled to run on CPU), and a deep,
narrow residual MLP (100 blocks: ~500 modules, ~600 parameter tensors) where any cost per
module call shows."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def transformer() -> nn.Module:
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
    return nn.Sequential(nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False), nn.Linear(128, 1))


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class CharGPT(nn.Module):
    """nanoGPT's shakespeare_char shape at a CPU-sized scale: 4 layers, 4 heads, 128 wide."""

    def __init__(self, vocab: int = 65, block: int = 64, d: int = 128, layers: int = 4, heads: int = 4) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


class Residual(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm, self.fc1, self.act, self.fc2 = nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


def deep() -> nn.Module:
    return nn.Sequential(*[Residual(32) for _ in range(100)], nn.Linear(32, 1))


def step_fn(name: str, device: str = "cpu", fused: bool = False,
            small: bool = False) -> tuple[nn.Module, Callable[[], None]]:
    """A model and one training step on it (fresh random data each step); `fused`: AdamW's
    fused implementation (the one that takes found_inf: --skip-on-device); `small`: the same
    model on a batch of 2 (quick mode: the suite only checks that a benchmark runs)."""
    torch.manual_seed(0)
    n = 2 if small else None
    if name == "mlp":
        model = mlp().to(device)

        def batch() -> tuple[torch.Tensor, torch.Tensor, Callable]:
            return (torch.randn(n or 128, 64, device=device), torch.randint(0, 10, (n or 128,), device=device),
                    F.cross_entropy)
    elif name == "deep":
        model = deep().to(device)

        def batch() -> tuple[torch.Tensor, torch.Tensor, Callable]:
            return torch.randn(n or 32, 32, device=device), torch.randn(n or 32, 1, device=device), F.mse_loss
    elif name == "transformer":
        model = transformer().to(device)

        def batch() -> tuple[torch.Tensor, torch.Tensor, Callable]:
            return (torch.randn(n or 16, 32, 128, device=device), torch.randn(n or 16, 32, 1, device=device),
                    F.mse_loss)
    else:
        model = CharGPT().to(device)

        def batch() -> tuple[torch.Tensor, torch.Tensor, Callable]:
            idx = torch.randint(0, 65, (n or 16, 65), device=device)
            return idx[:, :-1], idx[:, 1:], lambda out, y: F.cross_entropy(out.flatten(0, 1), y.flatten())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused or None)

    def step() -> None:
        x, y, loss_fn = batch()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device != "cpu":
            torch.cuda.synchronize()

    return model, step


WORKLOADS = ("mlp", "transformer", "gpt", "deep")


def workloads(quick: bool) -> tuple[str, ...]:
    """The workloads a benchmark runs: quick mode (the suite only checks that it runs) leaves
    out the deep one, the slowest to step (1c, deep_floor, still steps its 96 blocks)."""
    return tuple(w for w in WORKLOADS if w != "deep") if quick else WORKLOADS
