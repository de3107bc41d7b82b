"""Linear least squares (a linear GradientJob): partition j's value is X_jᵀ(X_j θ − y_j) =
W_j θ − X_jᵀy_j with W_j = X_jᵀX_j, so it is coded on its data (paper 001's model)."""

from __future__ import annotations

from typing import cast

import numpy as np

from .sample import SampleJob, gram_top_eigenvalue


class LinReg(SampleJob):
    """Linear regression by gradient descent; the step size is n / λ_max(XᵀX)."""

    name = "linreg"
    linear = True

    def linear_form(self, block: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(W_j, X_jᵀy_j): the partition's Gram matrix and right-hand side."""
        X, y = block
        return X.T @ X, X.T @ y

    def default_lr(self) -> float:
        return self.data.n_samples / gram_top_eigenvalue(self.data.X)

    def compute(self, block: tuple[np.ndarray, np.ndarray], theta: np.ndarray) -> np.ndarray:
        X, y = block
        return cast(np.ndarray, X.T @ (X @ theta - y))

    def step(self, theta: np.ndarray, total: np.ndarray, covered: np.ndarray) -> np.ndarray:
        return theta - self.step_size * total / max(1, self.rows_covered(covered))

    def block_loss(self, block: tuple[np.ndarray, np.ndarray], theta: np.ndarray) -> float:
        """Half the partition's summed squared residuals: decoded with the gradient."""
        X, y = block
        r = X @ theta - y
        return 0.5 * float(r @ r)

    def compute_with_loss(self, block: tuple[np.ndarray, np.ndarray],
                          theta: np.ndarray) -> tuple[np.ndarray, float]:
        """Both from one residual X θ − y."""
        X, y = block
        r = X @ theta - y
        return X.T @ r, 0.5 * float(r @ r)

    def combine_loss(self, theta: np.ndarray, total: float, covered: np.ndarray) -> float:
        return total / max(1, self.rows_covered(covered))

    def loss(self, theta: np.ndarray) -> float:
        r = self.data.X @ theta - self.data.y
        return float(0.5 * np.mean(r * r))
