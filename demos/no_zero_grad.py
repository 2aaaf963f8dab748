"""docs/failures.md row 3: training "fails on the second iteration"; updates are erratic.

`optimizer.zero_grad()` is missing, so every backward adds to the previous steps'
gradients.

    stepdbg --break stale_grad python demos/no_zero_grad.py
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(20):
        x = torch.randn(16, 10)
        target = torch.randint(0, 2, (16,))
        loss = nn.functional.cross_entropy(model(x), target)
        loss.backward()  # @accumulates
        opt.step()
        # the missing line: opt.zero_grad()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
