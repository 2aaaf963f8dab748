"""docs/failures.md row 10: "one of the variables needed for gradient computation has been
modified by an inplace operation".

A block rescales the output of a sigmoid in place; sigmoid saved that output for its
backward, so the backward fails. The error names SigmoidBackward0 but not where.

    stepdbg --break exception --on-break replay python demos/inplace_error.py
"""

import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(self.proj(x))  # @saved
        g.mul_(2.0)  # @inplace
        return x * g


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), Gate(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _step in range(10):
        x, y = torch.randn(32, 8), torch.randn(32, 1)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
