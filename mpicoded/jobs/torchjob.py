"""PyTorch models as gradient jobs: a ``torch.nn.Module``, a summed loss and a data set,
partitioned by rows; workers compute a partition's summed gradient with autograd (in row
chunks, so a purge stops them within one chunk), rank 0 applies any ``torch.optim`` optimizer.

The flattened gradient travels and is decoded like any result, so the trained parameters are
those of single-process full-batch training, up to floating-point reassociation (exactly so in
float64: ``model.double()``). Needs ``pip install mpicoded[torch]``; torch is imported only
where a TorchJob is built.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, TypeAlias, cast

import numpy as np
import torch

from .kinds import GradientJob

Data: TypeAlias = tuple[Any, Any] | torch.utils.data.Dataset[Any]


class TorchJob(GradientJob):
    """Training of ``model`` under ``loss`` (``reduction="sum"``: a sum over rows, so partitions'
    gradients add up) on ``data``: (inputs, targets) as tensors or arrays, a
    ``torch.utils.data.Dataset`` of (input, target) pairs, or a callable returning either
    (called on rank 0 only, at placement); full-batch, or in mini-batches (``batch_size``: the
    rows numbered as ``data``'s, as ``ShardSampler`` deals them to DDP). Each step rank 0 sets
    the parameters' gradients to the decoded sum over the rows it covers (of the step's batch)
    divided by their number (the mean loss's gradient), and calls ``optimizer.step()``:
    ``optimizer`` builds one from the parameters (default: SGD at ``lr``); it lives on rank 0
    for the whole run, momentum and all, and checkpoints keep its state. ``scheduler`` builds a
    learning-rate scheduler from the optimizer (``torch.optim.lr_scheduler``), stepped after
    every optimizer step: give a per-pass schedule in steps (steps a pass are in the banner).
    ``eval_data`` (as ``data``) is held out: ``evaluate`` gives its mean loss and, for class
    labels, the accuracy (``--eval-every``).

    Build the job on every rank with the same model (the same seed): rank 0's parameters are
    where descent starts. A model whose rows interact (batch norm in training mode) is not a
    sum over rows: put it in eval mode or give ``additive=False`` semantics by not using it.
    ``threads`` caps torch's intra-op threads on each rank (one: ranks share the cores).
    Gradients and θ travel in the model's dtype (``result_dtype``: float32 for a float32
    model, half the bytes of float64; its parameters, θ, are float32 values, so θ loses
    nothing); ``result_dtype="float64"`` sends a float32 model's chunked sums unrounded.
    """

    additive = True
    measured_as: ClassVar[str] = "torch"  # a call costs more than numpy's: its own benches

    def __init__(self, model: torch.nn.Module, loss: torch.nn.Module | Callable[..., Any],
                 data: Data | Callable[[], Data],
                 optimizer: Callable[[Iterable[torch.nn.Parameter]], Any] | None = None,
                 lr: float = 0.1, threads: int | None = 1,
                 result_dtype: str | None = None,
                 scheduler: Callable[[Any], Any] | None = None,
                 eval_data: Data | Callable[[], Data] | None = None) -> None:
        reduction = getattr(loss, "reduction", "sum")
        if reduction != "sum":
            raise ValueError(f"TorchJob: the loss must sum over rows (reduction='sum'), got "
                             f"reduction={reduction!r}: partitions' gradients must add up")
        if threads is not None:
            torch.set_num_threads(threads)
        self.model, self.loss_fn, self.data, self.eval_data = model, loss, data, eval_data
        self._held_out: tuple[np.ndarray, np.ndarray] | None = None  # eval_data, loaded
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("TorchJob: the model has no parameter that requires a gradient")
        self.dim = sum(p.numel() for p in self.params)
        self.dtype = self.params[0].dtype
        native = "float32" if self.dtype == torch.float32 else "float64"
        self.result_dtype = native if result_dtype is None else result_dtype
        self.theta_dtype = native
        self.optimizer = (optimizer or (lambda ps: torch.optim.SGD(ps, lr=lr)))(self.params)
        self.scheduler = None if scheduler is None else scheduler(self.optimizer)
        self.start = self.flat()  # where every job's descent starts, and with what state
        self.fresh = self._states()
        self.sizes: list[int] = []
        self._counted: np.ndarray | None = None  # under mini-batches: the step's rows a partition
        self.placed: list[tuple[np.ndarray, np.ndarray]] = []
        self._loaded: np.ndarray | None = None  # the θ the parameters hold (``_load``)
        self._grad: torch.Tensor | None = None  # the step's gradient: the parameters' grads

    def arrays(self, given: Data | Callable[[], Data] | None = None) -> tuple[np.ndarray,
                                                                             np.ndarray]:
        """The whole data set (or ``given``) as (inputs, targets) numpy arrays, rows first."""
        given = self.data if given is None else given
        data = given() if callable(given) else given
        if isinstance(data, torch.utils.data.Dataset):
            pairs = [data[i] for i in range(len(data))]  # type: ignore[arg-type, unused-ignore]
            data = (torch.stack([torch.as_tensor(x) for x, _ in pairs]),
                    torch.stack([torch.as_tensor(y) for _, y in pairs]))
        inputs, targets = (t.detach().cpu().numpy() if isinstance(t, torch.Tensor)
                           else np.asarray(t) for t in data)
        if len(inputs) != len(targets):
            raise ValueError(f"TorchJob: {len(inputs)} inputs but {len(targets)} targets")
        return inputs, targets

    def blocks(self, k: int) -> Sequence[tuple[np.ndarray, np.ndarray]]:
        inputs, targets = self.arrays()
        rows = np.array_split(np.arange(len(inputs)), k)
        self.sizes = [len(r) for r in rows]
        self._counted = None  # full batches until a run's batch_rows says otherwise
        self.placed = [(inputs[r], targets[r]) for r in rows]  # for loss() on rank 0
        return self.placed

    def _load(self, theta: np.ndarray) -> None:
        """The model's parameters from the flat vector ``theta``, copied: parameters that
        viewed it (float64) made the optimizer's step write into the caller's theta. Not
        again for the θ loaded last (every chunk and piece of a worker's iteration passes the
        same one, and a step's θ from the step): a copy of the model each call, at millions
        of parameters."""
        if theta is self._loaded:
            return
        vector = torch.tensor(np.asarray(theta), dtype=self.dtype)
        torch.nn.utils.vector_to_parameters(vector, self.params)
        self._loaded = theta

    def _tensors(self, block: tuple[np.ndarray, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """A block's inputs and targets as tensors, floating ones in the model's dtype."""
        inputs, targets = (torch.from_numpy(np.ascontiguousarray(a)) for a in block)
        if inputs.is_floating_point():
            inputs = inputs.to(self.dtype)
        if targets.is_floating_point():  # regression targets: the model's dtype too
            targets = targets.to(self.dtype)
        return inputs, targets

    def _forward(self, block: tuple[np.ndarray, np.ndarray]) -> torch.Tensor:
        inputs, targets = self._tensors(block)
        return cast(torch.Tensor, self.loss_fn(self.model(inputs), targets))

    def compute_with_loss(self, block: Any, theta: np.ndarray) -> tuple[np.ndarray, float]:
        """The block's summed gradient (in the model's dtype) and summed loss at ``theta``."""
        self._load(theta)
        for p in self.params:
            p.grad = None
        loss = self._forward(block)
        grads = torch.autograd.grad(loss, self.params)
        flat = torch.cat([g.reshape(-1) for g in grads])
        return flat.detach().numpy(), float(loss.detach())

    def compute(self, block: Any, theta: np.ndarray) -> np.ndarray:
        return self.compute_with_loss(block, theta)[0]

    def block_loss(self, block: Any, theta: np.ndarray) -> float:
        self._load(theta)
        with torch.no_grad():
            return float(self._forward(block))

    def loss(self, theta: np.ndarray) -> float | None:
        """The mean loss over the whole data set, on rank 0 (the run's last, and where the
        workers do not return it)."""
        if not self.placed:
            return None
        return sum(self.block_loss(b, theta) for b in self.placed) / sum(self.sizes)

    def batch_rows(self, rows: np.ndarray) -> None:
        self._counted = rows

    @property
    def evaluates(self) -> bool:
        return self.eval_data is not None

    def evaluate(self, theta: np.ndarray) -> dict[str, float] | None:
        """The mean loss on ``eval_data`` and, for class labels, the accuracy (the largest
        output's index against the target); None without eval_data."""
        if self.eval_data is None:
            return None
        if self._held_out is None:
            self._held_out = self.arrays(self.eval_data)
        self._load(theta)
        inputs, targets = self._tensors(self._held_out)
        training = self.model.training
        self.model.eval()  # dropout off, batch norm's running statistics left alone
        try:
            with torch.no_grad():
                scores = self.model(inputs)
        finally:
            self.model.train(training)
        measures = {"eval_loss": float(self.loss_fn(scores, targets)) / max(1, len(targets))}
        if scores.ndim == 2 and targets.ndim == 1 and not targets.is_floating_point():
            measures["accuracy"] = float((scores.argmax(1) == targets).double().mean())
        return measures

    def rows(self, covered: np.ndarray) -> int:
        """The rows the covered partitions' sum is over: in the step's batch, or in the data."""
        covered = np.asarray(covered).reshape(-1)
        if self._counted is not None:
            return int(self._counted[covered].sum())
        return sum(self.sizes[j] for j in covered)

    def combine_loss(self, theta: np.ndarray, total: float, covered: np.ndarray) -> float:
        """The mean loss over the covered rows."""
        return float(total) / max(1, self.rows(covered))

    def step(self, theta: np.ndarray, total: np.ndarray, covered: np.ndarray) -> np.ndarray:
        """One optimizer step on the mean gradient of the covered rows (divided in float64,
        then each parameter's share in its own dtype: views of one tensor, no copy each)."""
        self._load(theta)
        if self._grad is None:
            self._grad = torch.empty(self.dim, dtype=self.dtype)
        rows = max(1, self.rows(covered))  # divided in float64, rounded once to the dtype
        if self.dtype in (torch.float32, torch.float64):  # one pass, no temporary
            np.divide(total, rows, out=self._grad.numpy(), casting="same_kind")
        else:  # a dtype numpy lacks (bfloat16)
            self._grad.copy_(torch.from_numpy(np.asarray(total, dtype=np.float64) / rows))
        start = 0
        for p in self.params:
            p.grad = self._grad[start:start + p.numel()].view(p.shape)
            start += p.numel()
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        stepped = self.flat()
        self._loaded = stepped  # what the parameters hold: the next step starts from it
        return stepped

    def _states(self) -> dict[str, Any]:
        """The optimizer's and the scheduler's states, copied."""
        states = {"optimizer": self.optimizer.state_dict()}
        if self.scheduler is not None:
            states["scheduler"] = self.scheduler.state_dict()
        return copy.deepcopy(states)

    def _load_states(self, states: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(states["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(states["scheduler"])

    def state(self) -> np.ndarray:
        """The optimizer's state (momentum, Adam's moments, the step) and the scheduler's, as
        ``torch.save`` bytes: a checkpoint's."""
        buffer = io.BytesIO()
        torch.save(self._states(), buffer)
        state: np.ndarray = np.frombuffer(buffer.getvalue(), dtype=np.uint8).copy()
        return state

    def restore(self, state: np.ndarray) -> None:
        self._load_states(torch.load(io.BytesIO(state.tobytes()), weights_only=True))

    @property
    def stateful(self) -> bool:
        """Whether later steps depend on the optimizer's or a scheduler's state: all but plain
        SGD without momentum and without a scheduler."""
        plain = type(self.optimizer) is torch.optim.SGD and not any(
            group.get("momentum", 0) for group in self.optimizer.param_groups)
        return self.scheduler is not None or not plain

    def theta0(self) -> np.ndarray:
        """The model's parameters as the job was built (the optimizer's and scheduler's state
        reset: each job of a stream starts afresh). A resumed run takes them back from its
        checkpoint, and so does a failed-over one given --checkpoint (else they restart: they
        lived on the dead rank 0)."""
        self._load_states(copy.deepcopy(self.fresh))
        return cast(np.ndarray, self.start.copy())

    def flat(self) -> np.ndarray:
        """The model's parameters now, flattened (float64)."""
        flat = np.empty(self.dim)
        into, start = torch.from_numpy(flat), 0
        for p in self.params:  # widened as copied: one pass over each
            into[start:start + p.numel()].copy_(p.detach().reshape(-1))
            start += p.numel()
        return flat
