"""A small PyTorch CNN on scikit-learn's bundled digits, trained in mini-batches with coded
gradients, Adam and a learning-rate schedule, evaluated on held-out digits as it goes:
``mpirun -n 7 python -m mpicoded.examples.torch_digits``. The model, loss, optimizer and
scheduler are plain torch; mpicoded computes each step's exact batch gradient over the workers,
straggler or not. Needs ``pip install mpicoded[torch,examples]``.
"""

import numpy as np
import torch

import mpicoded

BATCH = 128  # 1500 training digits: 11 steps a pass
PASSES = 15


def digits(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train inputs, train labels, test inputs, test labels): 1500 rows to train on."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    X, y = torch.from_numpy(X[order] / 16.0).float(), torch.from_numpy(y[order])
    return X[:1500], y[:1500], X[1500:], y[1500:]


def model(seed: int = 0) -> torch.nn.Module:
    """8x8 images in, ten scores out: one convolution, a pooling, a linear layer."""
    torch.manual_seed(seed)  # the same start on every rank
    return torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 8, 8)), torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10))


def job() -> mpicoded.TorchJob:
    X, y, X_test, y_test = digits()
    steps = len(y) // BATCH
    return mpicoded.TorchJob(
        model(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y),
        optimizer=lambda params: torch.optim.Adam(params, lr=0.01),
        scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 5 * steps, 0.5),
        eval_data=(X_test, y_test))


if __name__ == "__main__":
    result = mpicoded.run(job(), code="gfrc", stragglers=1, batch_size=BATCH,
                          iterations=PASSES * (1500 // BATCH), eval_every=1500 // BATCH,
                          delay="none", quiet=True)
    if result is not None:
        measured = [r.evaluation for r in result.records if r.evaluation]
        print(f"torch cnn on digits: {len(measured)} evaluations, test accuracy "
              f"{measured[-1]['accuracy']:.3f}, held-out loss {measured[-1]['eval_loss']:.4f}, "
              f"makespan {result.makespan_s:.2f} s")
