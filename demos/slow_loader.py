"""docs/failures.md row 5: training stalls; steps slow down or hang in the DataLoader.

A dataset with a heavy transform: every 40th sample takes `--slow` seconds; with
`--hang`, sample 100 never returns (a stuck worker). Two workers.

    stepdbg --break 'data_wait>0.3' python demos/slow_loader.py
    stepdbg --break 'stall>2' --on-break abort python demos/slow_loader.py --hang
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, n: int, slow: float, hang: bool) -> None:
        self.n, self.slow, self.hang = n, slow, hang

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.hang and i == 100:
            time.sleep(3600)  # @stuck-worker
        if i % 40 == 39:
            time.sleep(self.slow)  # @heavy-transform
        g = torch.Generator().manual_seed(i)
        x = torch.randn(8, generator=g)
        return x, x.sum().unsqueeze(0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--slow", type=float, default=0.6)
    p.add_argument("--hang", action="store_true")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(SlowDataset(160, args.slow, args.hang), batch_size=8, num_workers=args.workers)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    for x, y in loader:  # @loader-loop
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        steps += 1
    print(f"done after {steps} steps")


if __name__ == "__main__":
    main()
