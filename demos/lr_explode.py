"""docs/failures.md row 2: the loss explodes; the gradient norm rises without bound.

Plain SGD with a learning rate far too high for the data's scale, no warmup, no
clipping; a DataLoader loop with a StepLR scheduler. Lowering the LR (pinned, so the
scheduler does not undo it) lets the loss recover.

    stepdbg --no-tui --break 'grad_norm>200' --on-break pause python demos/lr_explode.py
    (at the pause: 'lr 0.01 pin', 'break rm grad_norm>200', then Enter; the TUI: l, c)
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.6)
    p.add_argument("--epochs", type=int, default=6)
    args = p.parse_args()
    torch.manual_seed(0)
    x = torch.randn(512, 16) * 3.0
    y = x @ torch.randn(16, 1) + 0.1 * torch.randn(512, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.9)
    step = 0
    for epoch in range(args.epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()  # @update
            step += 1
        # the LR this epoch's updates used, before the scheduler changes it
        print(f"epoch {epoch} step {step} loss {loss.item():.4g} lr {opt.param_groups[0]['lr']:.3g}")
        sched.step()


if __name__ == "__main__":
    main()
