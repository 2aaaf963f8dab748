"""Two ranks, one bad record: DDP on gloo (CPU), each rank reading its shard of a dataset
through a DistributedSampler, and one row of the dataset holds a NaN. The rank whose
batch holds it breaks; every rank pauses at that step, after the all-reduce (which has
carried the NaN into every rank's gradients) and before the update.

    stepdbg --break nan torchrun --standalone --nproc_per_node=2 demos/ddp_nan.py

At the pause, 0 shows both ranks; r replays on every rank: the rank that broke names the
input and the dataset index; the other says its own step made no non-finite value.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--bad-index", type=int, default=201, help="the dataset row that holds a NaN")
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(640, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    x[args.bad_index, 3] = float("nan")  # @bad-record
    data = TensorDataset(x, y)
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=False))

    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for step, (xb, yb) in enumerate(loader):
        if step == args.steps:
            break
        loss = nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
