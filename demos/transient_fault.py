"""docs/failures.md row 14: a NaN that does not come back (a flaky device, a race).

Once, at step 20, a layer's output has a NaN that no input, weight or op explains: what a
bit flip in a GPU's memory or a race in a kernel looks like from the training loop. The
replay runs the step again from the same state, finds everything finite, and says so:
not reproduced, a transient fault. (The demo stands in for the hardware: its `flaky`
layer corrupts the 20th training forward it runs, and only that one.)

    stepdbg --no-tui --break nan --on-break replay --on-break skip python demos/transient_fault.py

Saved and replayed later (docs/replay.md, "Evidence: save, skip, replay later"), the step is not
reproduced either: the rebuilt `flaky` layer has not counted 20 calls.

    stepdbg --no-tui --break nan --on-break save --on-break skip python demos/transient_fault.py
    stepdbg replay --model demos/transient_fault.py:build stepdbg-step20
"""

import argparse

import torch
from torch import nn


class Flaky(nn.Module):
    """The identity, except on one call: a stand-in for a device that flips a bit once."""

    def __init__(self, bad_call: int) -> None:
        super().__init__()
        self.calls, self.bad_call = 0, bad_call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled():
            return x
        self.calls += 1
        if self.calls == self.bad_call:
            x = x.clone()
            x[0, 0] = float("nan")  # @flip
        return x


def build(bad_step: int = 20) -> nn.Module:
    """The model (`stepdbg replay --model demos/transient_fault.py:build` rebuilds it)."""
    return nn.Sequential(nn.Linear(8, 32), Flaky(bad_step + 1), nn.ReLU(), nn.Linear(32, 1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--bad-step", type=int, default=20)
    args = p.parse_args()
    torch.manual_seed(0)
    model = build(args.bad_step)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(args.steps):
        x = torch.randn(16, 8)
        loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print("done")


if __name__ == "__main__":
    main()
