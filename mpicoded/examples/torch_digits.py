"""A PyTorch MLP on scikit-learn's bundled digits, trained with coded gradients and Adam:
``mpirun -n 7 python -m mpicoded.examples.torch_digits``. The model, loss and optimizer are plain
torch; mpicoded computes the full-batch gradient over the workers, straggler or not. Needs
``pip install mpicoded[torch,examples]``.
"""

import numpy as np
import torch

import mpicoded


def digits(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train inputs, train labels, test inputs, test labels): 1500 rows to train on."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    X, y = torch.from_numpy(X[order] / 16.0).float(), torch.from_numpy(y[order])
    return X[:1500], y[:1500], X[1500:], y[1500:]


def model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)  # the same start on every rank
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))


if __name__ == "__main__":
    X, y, X_test, y_test = digits()
    net = model()
    job = mpicoded.TorchJob(net, torch.nn.CrossEntropyLoss(reduction="sum"), (X, y),
                            optimizer=lambda params: torch.optim.Adam(params, lr=0.01))
    result = mpicoded.run(job, code="gfrc", stragglers=1, iterations=150, delay="none",
                          quiet=True)
    if result is not None:
        torch.nn.utils.vector_to_parameters(torch.from_numpy(result.theta).float(),
                                            net.parameters())
        with torch.no_grad():
            accuracy = float((net(X_test).argmax(1) == y_test).float().mean())
        print(f"torch mlp on digits: loss {result.losses[-1]:.4f}, test accuracy "
              f"{accuracy:.3f}, makespan {result.makespan_s:.2f} s")
