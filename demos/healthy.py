"""A healthy training loop: what `stepdbg doctor` must find nothing in.

DataLoader, standardized inputs, cross-entropy on logits, zero_grad every step,
model.train()/model.eval() around a validation pass, dropout and batchnorm.

    stepdbg doctor python demos/healthy.py        # no findings
    stepdbg overfit python demos/healthy.py       # reaches near zero
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(1024, 16)
    y = (x[:, :4].sum(1) > 0).long() + (x[:, 4:8].sum(1) > 0).long()
    train = DataLoader(TensorDataset(x[:896], y[:896]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[896:], y[896:]), batch_size=128)
    model = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        model.train()
        for xb, yb in train:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val) / 128
        print(f"epoch {epoch} loss {loss.item():.3f} val acc {acc:.2f}")


if __name__ == "__main__":
    main()
