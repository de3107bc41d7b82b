"""A PyTorch user's script, defined only in the tests: an MLP (float64, so that decoding is
checked to rounding; float32, PyTorch's default, with TORCH_JOB_DTYPE=float32) trained by
mpicoded under mpirun, and the same by one process; in mini-batches, the same by PyTorch DDP
over ``mpicoded.ShardSampler`` (``ddp`` argv)."""

import json
import os
import sys

import numpy as np
import torch

import mpicoded

ITERATIONS = 12
DTYPE = getattr(torch, os.environ.get("TORCH_JOB_DTYPE", "float64"))  # every rank inherits it
BATCH, BATCH_SEED = 120, 5  # 10 steps a pass over the 1200 rows: the 12 steps cross into a second


def model() -> torch.nn.Module:
    torch.manual_seed(0)  # the same start on every rank
    return torch.nn.Sequential(torch.nn.Linear(10, 24), torch.nn.Tanh(),
                               torch.nn.Linear(24, 4)).to(DTYPE)


def data():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(1200, 10, generator=g, dtype=torch.float64)
    return X.to(DTYPE), (X[:, :4] * torch.arange(1.0, 5.0, dtype=torch.float64)).argmax(1)


def optimizer(params):
    return torch.optim.SGD(params, lr=0.5, momentum=0.9)


def job() -> mpicoded.TorchJob:
    return mpicoded.TorchJob(model(), torch.nn.CrossEntropyLoss(reduction="sum"), data,
                             optimizer=optimizer)


def single_process(iterations: int = ITERATIONS) -> np.ndarray:
    """Full-batch training by torch alone: what mpicoded must give."""
    net, (X, y) = model(), data()
    opt = optimizer(net.parameters())
    for _ in range(iterations):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(X), y).backward()
        opt.step()
    return torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy()


def ddp(rank: int, world: int, out: str) -> None:
    """One DDP process (gloo; MASTER_ADDR and MASTER_PORT from the environment) of a user's
    mini-batch loop, mpicoded's sampler in place of DistributedSampler: rank 0 writes the
    parameters after every step to ``out`` (.npy)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    X, y = data()
    sampler = mpicoded.ShardSampler(len(y), BATCH, BATCH_SEED, rank, world)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y),
                                         batch_size=BATCH // world, sampler=sampler)
    net = DistributedDataParallel(model())
    opt = optimizer(net.parameters())
    thetas, epoch = [], 0
    while len(thetas) < ITERATIONS:
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(inputs), targets).backward()
            opt.step()
            thetas.append(torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy())
            if len(thetas) == ITERATIONS:
                break
        epoch += 1
    if rank == 0:
        np.save(out, np.array(thetas))
    dist.destroy_process_group()


def main(code: str, batch_size: int, iterations: int = ITERATIONS,
         checkpoint: str | None = None, resume: bool = False) -> None:
    """The script a user would write: full-batch, or in mini-batches; every iteration's
    parameters are printed (those of the iterations this run did, if it resumed)."""
    thetas: list[list[float]] = []
    saving = {} if checkpoint is None else {"checkpoint": checkpoint, "checkpoint_every": 7,
                                            "resume": resume}
    result = mpicoded.run(job(), code=code, stragglers=2, delay="compute", slow_workers=[2],
                          slow_factor=30, chunk_rows=20, iterations=iterations, quiet=True,
                          batch_size=batch_size, batch_seed=BATCH_SEED, **saving,
                          callbacks=[lambda record, loss, theta: thetas.append(theta.tolist())])
    if result is not None:
        print("RESULT", json.dumps({"theta": result.theta.tolist(), "thetas": thetas,
                                    "purged": result.totals["purged_tasks"],
                                    "loss": result.losses[-1]}))


if __name__ == "__main__":  # argv: CODE [BATCH [ITERATIONS CHECKPOINT [resume]]], or
    if sys.argv[1] == "ddp":  # ddp RANK WORLD OUT
        ddp(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        args = sys.argv[1:]
        main(args[0], int(args[1]) if len(args) > 1 else 0,
             int(args[2]) if len(args) > 2 else ITERATIONS, args[3] if len(args) > 3 else None,
             args[4:] == ["resume"])
