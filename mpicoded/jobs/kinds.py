"""The two kinds of job a user brings: a gradient job (B applied to results) and a
matrix-vector job (B applied to data). Subclass one and pass it to ``mpicoded.run``.

A job object is built on every rank by the user's script, so its constructor must be cheap: data
is loaded in ``blocks`` / ``matrix`` (rank 0 only) or ``load_block`` (on the workers that need it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

import numpy as np

if TYPE_CHECKING:  # SciPy is not imported at start: a run on dense data never needs it
    from scipy.sparse import sparray, spmatrix

Matrix: TypeAlias = "np.ndarray | spmatrix | sparray"


class GradientJob:
    """Gradient descent over k data partitions; workers return coded sums of ``compute``.

    Define ``dim``, ``blocks(k)`` (or ``load_block(j, k)``), ``compute(block, theta)`` and
    ``step(theta, total, covered)``; optionally ``loss(theta)``, ``block_loss(block, theta)``
    with ``combine_loss`` (the loss decoded with the gradient; ``compute_with_loss`` to share
    work between the two), ``theta0()``, ``prepare_step()``, ``summary``, ``batch_rows``
    (mini-batch SGD; with ``partition_rows`` where workers load their blocks), ``evaluate``
    (held-out data), and ``state`` with ``restore``
    (checkpoints of an optimizer's state).
    ``compute`` must return an array of ``dim`` entries. When ``additive`` is true (a sum over
    rows, not a mean), a block that is an array, a sparse matrix or a tuple of arrays sharing
    their first dimension is computed in row chunks, so a purge interrupts it within one chunk.

    Which side B goes on follows linearity. A nonlinear ``compute`` is coded on its results: a
    task over d partitions computes all d of them, so codes whose tasks touch few partitions
    suit it. Set ``linear = True`` when ``compute(block, θ)`` is A θ − b for some matrix A and
    vector b of the block (least squares, ridge): the job is then coded on its data, each task
    holding Σ_j B[t, j] (A_j, b_j) and computing one product whatever the code's density, as
    papers 000 and 001 model it (``linear_form`` gives (A, b); mpicoded keeps results coding
    where that is cheaper, and for jobs whose workers load their own blocks).
    """

    dim: int
    measured_as: ClassVar[str] = "gradient"
    """Whose benches' table (``jobs/defaults.py``) names the scheme a run gets without --code."""
    additive: bool = True
    linear: bool = False
    result_dtype: str = "float64"
    """How results travel to rank 0: "float32" halves the bytes of every result (each value
    rounded to float32, about 7 digits, then decoded in float64): for a model that computes in
    float32 anyway (PyTorch's default) it loses nothing a float64 result would keep."""
    theta_dtype: str = "float64"
    """How θ travels to the workers: "float32" halves every ITERATE's bytes, θ rounded to
    float32 on the way: exact for a job whose θ is a float32 model's parameters."""
    workers_load: bool = False
    """True where the workers read their own partitions with ``load_block`` although
    ``blocks`` is defined (data every rank can read, e.g. a memory-mapped file): rank 0 ships
    partition ids only. A job that defines only ``load_block`` is loaded so anyway."""

    def blocks(self, k: int) -> Sequence[Any]:
        """The k data partitions (picklable), in order. Called on rank 0 only."""
        raise NotImplementedError(f"{type(self).__name__} defines neither blocks(k) nor "
                                  "load_block(j, k)")

    def load_block(self, j: int, k: int) -> Any:
        """Partition j of k, loaded on the worker that needs it (e.g. from shared storage)."""
        raise NotImplementedError

    def partitioned(self, k: int) -> None:
        """Called on rank 0 once the data are cut in k partitions, before ``blocks`` and any
        ``step``, whoever reads the blocks (a step that counts rows may need k)."""

    def partition_rows(self, k: int) -> Sequence[int]:
        """Each of the k partitions' rows, on rank 0, for a job whose workers load their own
        blocks (``load_block``): mini-batches number the rows without reading them."""
        raise NotImplementedError

    def prepare_step(self) -> None:
        """Optional: rank 0's one-off work for ``step`` (a default step size from the whole
        data set, say), done while the workers take in their data, so that no iteration waits
        for it. Default: nothing."""

    def compute(self, block: Any, theta: np.ndarray) -> np.ndarray:
        """One partition's value at theta, e.g. its partial gradient. Runs on workers."""
        raise NotImplementedError(f"{type(self).__name__} must define compute(block, theta)")

    def step(self, theta: np.ndarray, total: np.ndarray, covered: np.ndarray) -> np.ndarray:
        """The next theta from ``total``, the sum of ``compute`` over the partitions ``covered``
        (all k for an exact decode, fewer under a tolerance). Runs on rank 0."""
        raise NotImplementedError(f"{type(self).__name__} must define step(theta, total, covered)")

    def linear_form(self, block: Any) -> tuple[Matrix, np.ndarray]:
        """For a ``linear`` job: (A, b) with ``compute(block, θ) == A @ θ - b`` for every θ
        (A dim x dim, numpy or scipy.sparse). Runs on rank 0 once a partition, at placement.
        The default probes ``compute`` at 0 and at the dim unit vectors; override it where the
        form is known (least squares: XᵀX and Xᵀy)."""
        zero = np.zeros(self.dim)
        b = -np.asarray(self.compute(block, zero), dtype=np.float64).reshape(-1)
        A = np.empty((self.dim, self.dim))
        for i in range(self.dim):
            zero[i] = 1.0
            A[:, i] = np.asarray(self.compute(block, zero), dtype=np.float64).reshape(-1) + b
            zero[i] = 0.0
        return A, b

    def loss(self, theta: np.ndarray) -> float | None:
        """The training loss at theta on rank 0, or None (not reported)."""
        return None

    def block_loss(self, block: Any, theta: np.ndarray) -> float:
        """Optional: a partition's share of the loss at theta (a sum over its rows when
        ``additive``). When defined, workers return it coded beside ``compute``'s value and the
        master decodes the loss with the gradient, never touching the data."""
        raise NotImplementedError

    def compute_with_loss(self, block: Any, theta: np.ndarray) -> tuple[np.ndarray, float]:
        """``compute`` and ``block_loss`` of one block at once; override it where they share
        work (logistic regression's margins X θ). Runs on workers, when ``block_loss`` is
        defined."""
        return self.compute(block, theta), self.block_loss(block, theta)

    def combine_loss(self, theta: np.ndarray, total: float, covered: np.ndarray) -> float:
        """The loss at theta from ``total``, the sum of ``block_loss`` over the partitions in
        ``covered`` (all k, or fewer under a tolerance); default: the sum itself."""
        return float(total)

    def batch_rows(self, rows: np.ndarray) -> None:
        """Under mini-batches (``batch_size``): each partition's rows in the step about to be
        taken, told on rank 0 before ``combine_loss`` and ``step``, which then divide by the
        covered partitions' rows in the batch, not in the data. A job that does not define it
        trains on full batches only."""
        raise NotImplementedError

    def evaluate(self, theta: np.ndarray) -> dict[str, float] | None:
        """Optional: measures of theta on held-out data (``{"accuracy": ...}``), asked on rank 0
        every ``eval_every`` iterations and at the end, once the next iteration is out; the
        iteration records, progress lines and callbacks see them (``record.evaluation``)."""
        return None

    @property
    def evaluates(self) -> bool:
        """Whether ``evaluate`` has something to measure: it is defined."""
        return overrides(self, "evaluate", GradientJob)

    def state(self) -> np.ndarray | None:
        """Rank 0's state beside theta that later steps depend on (an optimizer's momentum),
        as one array, for checkpoints; None: the job has none."""
        return None

    def restore(self, state: np.ndarray) -> None:
        """Take back the ``state()`` of a checkpoint: a resumed run goes on as it would have."""

    @property
    def stateful(self) -> bool:
        """Whether later steps depend on ``state()`` (a failover then needs a checkpoint's):
        it is defined."""
        return overrides(self, "state", GradientJob)

    def theta0(self) -> np.ndarray:
        """Where descent starts: zeros of length ``dim``."""
        return np.zeros(self.dim)

    def summary(self, theta: np.ndarray) -> str | None:
        """A few lines the CLI prints about the trained model, or None."""
        return None


class MatVecJob:
    """An iteration x <- step(x, A @ x) whose products are coded: mpicoded splits A's rows into k
    blocks, places pre-encoded blocks (B applied to data) and decodes y = A @ x. Needs a code
    whose target is 'each' (mds, cpgc, ucmmc, mcc; sparse or uncoded with target 'each').

    Define ``matrix()`` (numpy or scipy.sparse, m x d, rank 0 only), ``start()`` and
    ``step(x, y)``; optionally ``loss(x)`` and ``summary(x)``. Under a tolerance, the rows of y
    in missed blocks are NaN and ``step`` decides what to do with them.
    """

    measured_as: ClassVar[str] = "matvec"  # the default scheme's table (``jobs/defaults.py``)

    def matrix(self) -> Matrix:
        raise NotImplementedError(f"{type(self).__name__} must define matrix()")

    def start(self) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must define start()")

    def step(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must define step(x, y)")

    def loss(self, x: np.ndarray) -> float | None:
        return None

    def summary(self, x: np.ndarray) -> str | None:
        return None


AnyJob = GradientJob | MatVecJob


def overrides(job: object, method: str, base: type) -> bool:
    """Whether ``job``'s class defines ``method`` itself rather than inheriting ``base``'s."""
    return getattr(type(job), method, None) is not getattr(base, method)


def job_name(job: object) -> str:
    """What progress lines call the job: its ``name`` attribute, else its class name."""
    return str(getattr(job, "name", "") or type(job).__name__)
