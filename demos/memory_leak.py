"""docs/failures.md row 9: out of memory at step 500 (a leak).

`total_loss += loss` keeps every step's autograd graph, and its saved activations,
alive: memory grows by the activations of one step, every step.

    stepdbg doctor --steps 40 python demos/memory_leak.py
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    total_loss = 0.0
    for _ in range(60):
        x, y = torch.randn(512, 512), torch.randn(512, 1)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward(retain_graph=True)
        opt.step()
        total_loss += loss  # @leak: keeps the graph; loss.item() would not
    print(f"mean loss {float(total_loss) / 60:.3f}")


if __name__ == "__main__":
    main()
