"""docs/failures.md row 5, the nanoGPT way: no DataLoader, a get_batch() on the training thread
that takes as long as the step (reading and decoding a shard; `--slow` seconds a batch).

    stepdbg doctor --steps 4 python demos/slow_get_batch.py
"""

import argparse
import time

import torch
from torch import nn

TOKENS = torch.randint(0, 65, (100_000,))


def get_batch(slow: float, block: int = 32, batch: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    time.sleep(slow)  # @read-shard
    ix = torch.randint(len(TOKENS) - block - 1, (batch,))
    x = torch.stack([TOKENS[i:i + block] for i in ix])
    y = torch.stack([TOKENS[i + 1:i + 1 + block] for i in ix])
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--slow", type=float, default=0.1)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(65, 32), nn.Linear(32, 65))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for it in range(args.iters):
        x, y = get_batch(args.slow)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if it % 10 == 0:
            print(f"iter {it}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
