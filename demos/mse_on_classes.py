"""docs/failures.md row 6: poor, erratic learning in classification.

A 10-class problem trained with MSE between one output and the class index, as if
class 9 were 'far' from class 1.

    stepdbg doctor python demos/mse_on_classes.py
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(30):
        x = torch.randn(64, 20)
        y = torch.randint(0, 10, (64,))  # class indices
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x).squeeze(-1), y.float())  # @wrong-loss
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
