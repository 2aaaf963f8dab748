"""docs/failures.md row 1: the loss is fine for a while, then NaN, and everything after.

A layer takes the log of its input; one bad sample at step 30 has a zero feature, the
log makes -inf, and the next Linear turns it into NaN. A get_batch() loop (no
DataLoader) with gradient clipping, as in nanoGPT.

    stepdbg --break nan --on-break replay --on-break abort python demos/nan_log.py

With --fused (fused AdamW), ``--skip-on-device`` skips the bad step's update and the run
goes on healthy (docs/step-model.md).
"""

import argparse

import torch
from torch import nn


class LogFeatures(nn.Module):
    """log-scaled features: fine for positive inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)  # @nan-here


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = LogFeatures()
        self.head = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def get_batch(step: int, bad_step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(64, 8, generator=g) + 0.05
    if step == bad_step:
        x[3, 2] = 0.0  # a bad sample: one feature is exactly zero
    return x, x.log().sum(1, keepdim=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--bad-step", type=int, default=30)
    p.add_argument("--fused", action="store_true", help="fused AdamW (it takes found_inf: --skip-on-device)")
    args = p.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=args.fused or None)
    for step in range(args.steps):
        x, y = get_batch(step, args.bad_step, g)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print("done")


if __name__ == "__main__":
    main()
