"""docs/failures.md row 9: out of memory at step 12 (sizing): one batch far larger than the rest.

Every batch has 64 rows, until step 12's length comes out 62,500x larger (a bad length
read from the data, a collate that let a whole shard through). Its first layer's output
alone would need 65 GB: the allocator refuses it, on the CPU as on a GPU.

    stepdbg --break exception python demos/oom_batch.py
"""

import torch
from torch import nn


def batch_rows(step: int) -> int:
    return 64 * 62_500 if step == 12 else 64  # @jump: a length from the data, unchecked


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 4096), nn.ReLU(), nn.Linear(4096, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(20):
        x = torch.randn(batch_rows(step), 16)  # @batch
        y = x.sum(dim=1, keepdim=True)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)  # @oom
        loss.backward()
        opt.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
