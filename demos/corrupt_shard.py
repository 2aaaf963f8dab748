"""Recover a run: one corrupt batch ruins the weights a step *before* the NaN shows.

The batch of step 40 comes from a corrupt shard (its features are 1e5 times too large).
Its loss is large but finite, so nothing breaks there; its update throws the weights far
off, and step 41's loss is inf, NaN after. Skipping step 41 changes nothing: the damage
is in the weights. A rewind puts them back to a snapshot from before step 40 and goes on.

    python demos/corrupt_shard.py                                   # NaN to the end
    stepdbg --break nan --on-break rewind --keep-every 5 python demos/corrupt_shard.py
"""

import argparse

import torch
from torch import nn


def get_batch(step: int, bad_step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(64, 16, generator=g)
    y = x @ torch.linspace(-1, 1, 16).unsqueeze(1)
    if step == bad_step:
        x = x * 1e5  # a corrupt shard: the features are scaled wrong, the targets are not
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--bad-step", type=int, default=40)
    args = p.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.5)
    for step in range(args.steps):
        x, y = get_batch(step, args.bad_step, g)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step} loss {loss.item():.4f}")
    print("done")


if __name__ == "__main__":
    main()
