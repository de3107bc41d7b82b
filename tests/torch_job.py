"""A PyTorch user's script, defined only in the tests: an MLP (float64, so that decoding is
checked to rounding) trained by mpicoded under mpirun, and the same by one process."""

import json
import sys

import numpy as np
import torch

import mpicoded

ITERATIONS = 12


def model() -> torch.nn.Module:
    torch.manual_seed(0)  # the same start on every rank
    return torch.nn.Sequential(torch.nn.Linear(10, 24), torch.nn.Tanh(),
                               torch.nn.Linear(24, 4)).double()


def data():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(1200, 10, generator=g, dtype=torch.float64)
    return X, (X[:, :4] * torch.arange(1.0, 5.0, dtype=torch.float64)).argmax(1)


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


if __name__ == "__main__":  # the script a user would write; argv: the code's name
    result = mpicoded.run(job(), code=sys.argv[1], stragglers=2, delay="compute",
                          slow_workers=[2], slow_factor=30, chunk_rows=20,
                          iterations=ITERATIONS, quiet=True)
    if result is not None:
        print("RESULT", json.dumps({"theta": result.theta.tolist(),
                                    "purged": result.totals["purged_tasks"],
                                    "loss": result.losses[-1]}))
