"""docs/failures.md row 4: the loss is stuck; deep layers learn nothing.

Twelve sigmoid layers with a small init: each layer multiplies the gradient by at most
0.25 times its weights, so the first layers get gradients under 1e-7.

    stepdbg doctor python demos/vanishing_sigmoid.py
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        lin = nn.Linear(32, 32)
        nn.init.normal_(lin.weight, std=0.1)  # @small-init
        layers += [lin, nn.Sigmoid()]
    model = nn.Sequential(*layers, nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(30):
        x = torch.randn(64, 32)
        y = x[:, :1]
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
