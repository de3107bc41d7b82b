"""A small neural network (one tanh layer, softmax) on scikit-learn's bundled digits, trained
with coded gradients: ``mpirun -n 7 python -m mpicoded.examples.mlp``. The loss is not convex;
the decoded gradient is still exactly the full-batch one. Needs ``pip install mpicoded[examples]``.
"""

import numpy as np

import mpicoded

Block = tuple[np.ndarray, np.ndarray]  # a partition: its inputs and one-hot labels

FEATURES, HIDDEN, CLASSES = 64, 32, 10
SHAPES = [(FEATURES, HIDDEN), (HIDDEN,), (HIDDEN, CLASSES), (CLASSES,)]


def unpack(theta: np.ndarray) -> list[np.ndarray]:
    """W1, b1, W2, b2 as views of the flat parameter vector."""
    parts: list[np.ndarray] = []
    start = 0
    for shape in SHAPES:
        size = int(np.prod(shape))
        parts.append(theta[start:start + size].reshape(shape))
        start += size
    return parts


def forward(theta: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    W1, b1, W2, b2 = unpack(theta)
    H = np.tanh(X @ W1 + b1)
    Z = H @ W2 + b2
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    return H, P / P.sum(axis=1, keepdims=True)


class DigitsMLP(mpicoded.GradientJob):
    dim = sum(int(np.prod(s)) for s in SHAPES)

    def __init__(self, lr: float = 0.5, seed: int = 0) -> None:
        self.lr, self.seed = lr, seed

    def blocks(self, k: int) -> list[Block]:
        """Rank 0: load the digits, hold out a test set, cut the rest in k."""
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        order = np.random.default_rng(self.seed).permutation(len(y))
        X, y = X[order] / 16.0, y[order]
        self.X, self.y, self.X_test, self.y_test = X[:1500], y[:1500], X[1500:], y[1500:]
        rows = np.array_split(np.arange(1500), k)
        self.sizes = [len(r) for r in rows]
        return [(self.X[r], np.eye(CLASSES)[self.y[r]]) for r in rows]

    def compute(self, block: Block, theta: np.ndarray) -> np.ndarray:
        """Workers: the cross-entropy gradient summed over the block's rows."""
        X, Y = block
        W1, _, W2, _ = unpack(theta)
        H, P = forward(theta, X)
        dZ = P - Y
        dH = (dZ @ W2.T) * (1.0 - H * H)
        return np.concatenate([(X.T @ dH).ravel(), dH.sum(0), (H.T @ dZ).ravel(), dZ.sum(0)])

    def step(self, theta: np.ndarray, total: np.ndarray,
             covered: np.ndarray) -> np.ndarray:
        rows = sum(self.sizes[j] for j in covered)
        return np.asarray(theta - self.lr * (total / rows + 1e-4 * theta))

    def theta0(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        return np.concatenate([rng.standard_normal(int(np.prod(s))) / np.sqrt(s[0])
                               if len(s) == 2 else np.zeros(s) for s in SHAPES])

    def loss(self, theta: np.ndarray) -> float:
        _, P = forward(theta, self.X)
        return float(-np.mean(np.log(P[np.arange(len(self.y)), self.y] + 1e-12)))

    def accuracy(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(forward(theta, X)[1].argmax(axis=1) == y))


if __name__ == "__main__":
    job = DigitsMLP()
    result = mpicoded.run(job, code="frc", stragglers=1, iterations=300, delay="seed001",
                          time_scale=0.05, loss_every=50, quiet=True)
    if result is not None:
        print(f"mlp on digits: loss {result.losses[-1]:.4f}, train accuracy "
              f"{job.accuracy(result.theta, job.X, job.y):.3f}, test accuracy "
              f"{job.accuracy(result.theta, job.X_test, job.y_test):.3f}, "
              f"makespan {result.makespan_s:.2f} s")
