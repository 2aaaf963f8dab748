"""docs/failures.md row 7: one feature dominates; convergence is slow.

House prices from (rooms, area in square metres, year built, distance in metres):
features on scales from 1 to 10,000, fed raw.

    stepdbg doctor python demos/unscaled_features.py
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    n = 256
    rooms = torch.randint(1, 8, (n, 1)).float()
    area = 20 + 200 * torch.rand(n, 1)
    year = 1900 + 120 * torch.rand(n, 1)
    distance = 10_000 * torch.rand(n, 1)
    x = torch.cat([rooms, area, year, distance], dim=1)  # @raw-features
    y = 0.5 * rooms + 0.01 * area - 0.0001 * distance
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-9)
    for step in range(30):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
