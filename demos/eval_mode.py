"""docs/failures.md row 12: validation worse than it should be, or dropout off in training.

After the first validation pass the loop never calls model.train() again, so from
epoch 1 on it trains with dropout and batchnorm in eval mode.

    stepdbg doctor python demos/eval_mode.py
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x.sum(1, keepdim=True) > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=64)
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()  # @train-once
    for epoch in range(3):
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            val = nn.functional.binary_cross_entropy_with_logits(model(x[:64]), y[:64])
        print(f"epoch {epoch} val loss {val.item():.3f}")
        # the missing line: model.train()


if __name__ == "__main__":
    main()
