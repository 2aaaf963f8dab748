"""docs/failures.md row 11: same seed, different results.

torch is seeded, but the model adds noise drawn from Python's `random`, which is not:
two runs differ, and so do two replays of one step from the same torch state.

    stepdbg doctor python demos/nondeterministic.py
"""

import random

import torch
from torch import nn


class NoisyLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + random.gauss(0.0, 0.1)  # @python-rng


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(NoisyLinear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(10):
        x, y = torch.randn(32, 8), torch.randn(32, 1)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
