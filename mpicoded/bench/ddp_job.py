"""The model and data of ``bench ddp``, shared by its two sides: an MLP classifier on a seeded
synthetic data set (SGD with momentum), or the digits example's CNN on scikit-learn's digits
(Adam), each with held-out rows. mpicoded builds it by ``--job
mpicoded.bench.ddp_job:bench_job``; each DDP process runs this module (``python -m``) on its
share of each step's rows. Every rank inherits the set-up from the environment:
MPICODED_DDP_SHAPE=ROWS,FEATURES,HIDDEN (the MLP's), MPICODED_DDP_MODEL (mlp or cnn) and
MPICODED_DDP_BATCH (rows a step; 0: the whole data set)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable

import numpy as np
import torch

from ..jobs.batches import Batches
from ..jobs.torchjob import TorchJob

SHAPE_VAR, MODEL_VAR, BATCH_VAR = "MPICODED_DDP_SHAPE", "MPICODED_DDP_MODEL", "MPICODED_DDP_BATCH"
MLP_SHAPE = (60000, 100, 64)  # rows, features, hidden units: the MLP's default
CLASSES = 10
LR, MOMENTUM = 0.2, 0.9  # the MLP's SGD
CNN_LR = 0.01  # the CNN's Adam, as the digits example
BATCH_SEED = 0
Data = tuple[torch.Tensor, torch.Tensor]


def shape() -> tuple[int, int, int]:
    given = os.environ.get(SHAPE_VAR)
    if not given:
        return MLP_SHAPE
    rows, features, hidden = (int(v) for v in given.split(","))
    return rows, features, hidden


def kind() -> str:
    return os.environ.get(MODEL_VAR, "mlp")


def batch_size() -> int:
    return int(os.environ.get(BATCH_VAR, "0"))


def model() -> torch.nn.Module:
    if kind() == "cnn":
        from ..examples.torch_digits import model as cnn

        return cnn()
    _, features, hidden = shape()
    torch.manual_seed(0)  # one start for every process of both sides
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, CLASSES))


def split() -> tuple[Data, Data]:
    """(training rows, held-out rows). The MLP's: seeded inputs and labels from a random linear
    teacher (learnable, not separable), a fifth as many held out; the CNN's: the example's."""
    if kind() == "cnn":
        from ..examples.torch_digits import digits

        X, y, X_test, y_test = digits()
        return (X, y), (X_test, y_test)
    rows, features, _ = shape()
    extra = max(1, rows // 5)  # held out
    g = torch.Generator().manual_seed(7)
    X = torch.randn(rows + extra, features, generator=g)
    teacher = torch.randn(features, CLASSES, generator=g)
    y = (X @ teacher + 2.0 * torch.randn(rows + extra, CLASSES, generator=g)).argmax(1)
    return (X[:rows], y[:rows]), (X[rows:], y[rows:])


def data() -> Data:
    return split()[0]


def held_out() -> Data:
    return split()[1]


def optimizer(params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    if kind() == "cnn":
        return torch.optim.Adam(params, lr=CNN_LR)
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def bench_job() -> TorchJob:
    """mpicoded's side: the model, the summed loss, the data loaded on rank 0, and in
    mini-batches the held-out rows (full-batch, the target is a training loss: no evaluation
    at the run's end that DDP does not do)."""
    return TorchJob(model(), torch.nn.CrossEntropyLoss(reduction="sum"), data,
                    optimizer=optimizer, eval_data=held_out if batch_size() else None)


def accuracy(net: torch.nn.Module, theta: torch.Tensor, X: torch.Tensor,
             y: torch.Tensor) -> float:
    """The held-out accuracy at ``theta`` (in eval mode, as TorchJob evaluates)."""
    torch.nn.utils.vector_to_parameters(theta, net.parameters())
    net.eval()
    with torch.no_grad():
        return float((net(X).argmax(1) == y).double().mean())  # as TorchJob.evaluate


def ddp_main(steps: int, out: str) -> None:
    """One DDP process (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment). Each
    step's rows (all of them, or the step's batch as mpicoded's ``Batches`` draws it) are dealt
    out over the processes; each backpropagates its rows' summed loss over the step's rows and
    DDP's average makes the step's mean gradient. Rank 0 writes every step's wall time (and,
    full-batch, the loss: an all-reduce a step) to ``out``, its first line, the start, as soon
    as the group is up (the throttle's clock); in mini-batches, after the run and outside its
    time, each step's held-out accuracy; last, the run's makespan."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    X, y = data()
    batches = Batches(len(y), batch_size(), BATCH_SEED) if batch_size() else None
    total = len(y) if batches is None else batches.size
    mine = torch.from_numpy(np.array_split(np.arange(len(y)), world)[rank])
    inputs, labels = X[mine], y[mine]  # full batch: this process's rows, every step
    net = DistributedDataParallel(model())
    opt = optimizer(net.parameters())
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    thetas: list[torch.Tensor] = []  # rank 0's, in mini-batches: each step's, evaluated after
    dist.barrier()
    log = open(out, "w", buffering=1) if rank == 0 else None  # noqa: SIM115
    if log is not None:
        log.write(json.dumps({"record": "start"}) + "\n")
    start = time.perf_counter()
    for step in range(steps):
        if batches is not None:
            mine = torch.from_numpy(np.array_split(batches.ordered(step), world)[rank])
            inputs, labels = X[mine], y[mine]
        opt.zero_grad()
        loss = loss_fn(net(inputs), labels)
        (loss * world / total).backward()  # DDP averages over processes: the mean over rows
        opt.step()
        record: dict[str, float] = {"step": step}
        if batches is None:
            seen = loss.detach().clone()
            dist.all_reduce(seen)  # the loss at the theta this step started from
            record["loss"] = float(seen) / total
        if log is not None:
            if batches is not None:
                thetas.append(torch.nn.utils.parameters_to_vector(net.parameters()).detach()
                              .clone())
            log.write(json.dumps({"record": "step", **record,
                                  "at_s": time.perf_counter() - start}) + "\n")
    dist.barrier()
    if log is not None:
        makespan = time.perf_counter() - start
        (X_test, y_test), judge = held_out(), model()
        for step, theta in enumerate(thetas):
            log.write(json.dumps({"record": "evaluation", "step": step,
                                  "accuracy": accuracy(judge, theta, X_test, y_test)}) + "\n")
        log.write(json.dumps({"record": "run", "makespan_s": makespan}) + "\n")  # the end
        log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    ddp_main(int(sys.argv[1]), sys.argv[2])
