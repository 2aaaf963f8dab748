"""docs/failures.md row 13: a model that should overfit one batch cannot.

The body was frozen for fine-tuning and never unfrozen, and the head's learning rate
is tiny: only 33 parameters learn, barely.

    stepdbg overfit python demos/cannot_overfit.py
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = torch.randint(0, 4, (512,))
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    body = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
    head = nn.Linear(32, 4)
    for p in body.parameters():
        p.requires_grad = False  # @frozen
    model = nn.Sequential(body, head)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for epoch in range(10):
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
