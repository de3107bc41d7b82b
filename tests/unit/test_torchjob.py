"""TorchJob without MPI: partition gradients add up to the full-batch one, row chunks to the
whole partition, and a step is the optimizer's step on the mean gradient."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mpicoded.jobs import kernel_for  # noqa: E402 - after the skip
from mpicoded.jobs.task import run_task  # noqa: E402
from mpicoded.jobs.torchjob import TorchJob  # noqa: E402


def mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 3)).double()


def data(rows: int = 90, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 8, generator=g, dtype=torch.float64), torch.randint(
        0, 3, (rows,), generator=g)


def full_batch_grad(model: torch.nn.Module, X, y) -> np.ndarray:
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(X), y, reduction="sum").backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()


def test_partition_gradients_sum_to_the_full_batch_gradient():
    X, y = data()
    job = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y))
    theta = job.theta0()
    blocks = job.blocks(7)
    assert job.sizes == [13, 13, 13, 13, 13, 13, 12] and job.dim == 8 * 16 + 16 + 16 * 3 + 3
    total = sum(job.compute(b, theta) for b in blocks)
    np.testing.assert_allclose(total, full_batch_grad(mlp(), X, y), rtol=1e-12, atol=1e-12)
    losses = sum(job.block_loss(b, theta) for b in blocks)
    assert job.combine_loss(theta, losses, np.arange(7)) == pytest.approx(
        float(torch.nn.functional.cross_entropy(mlp()(X), y).detach()), rel=1e-12)


def test_row_chunks_add_up_to_the_whole_partition():
    """mpicoded's chunked kernel (the one a purge interrupts) gives the whole block's sum."""
    X, y = data()
    job = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y))
    block = job.blocks(1)[0]
    theta = job.theta0()
    whole = job.compute(block, theta)
    value, fraction, chunks = run_task(kernel_for(job), {0: block}, [(0, 1.0)], theta,
                                       job.dim + 1, 7, 1, lambda: False)  # + the loss
    assert fraction == 1.0 and chunks == 13
    np.testing.assert_allclose(value[:job.dim], whole, rtol=1e-12, atol=1e-12)
    assert value[-1] == pytest.approx(job.block_loss(block, theta), rel=1e-12)


def test_a_step_is_the_optimizers_step_on_the_mean_gradient():
    """Adam with its state on rank 0: two TorchJob steps equal two steps of plain torch."""
    X, y = data()
    job = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), lambda: (X, y),
                   optimizer=lambda ps: torch.optim.Adam(ps, lr=0.01))
    blocks = job.blocks(3)
    theta = job.theta0()
    ref = mlp()
    opt = torch.optim.Adam(ref.parameters(), lr=0.01)
    for _ in range(2):
        total = sum(job.compute(b, theta) for b in blocks)
        theta = job.step(theta, total, np.arange(3))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(X), y).backward()
        opt.step()
    expected = torch.nn.utils.parameters_to_vector(ref.parameters()).detach().numpy()
    np.testing.assert_allclose(theta, expected, rtol=1e-10, atol=1e-12)
    assert not np.array_equal(job.theta0(), theta)  # every job still starts where it was built


def test_a_dataset_and_bad_arguments():
    X, y = data(20)
    ds = torch.utils.data.TensorDataset(X, y)
    job = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), ds)
    inputs, targets = job.arrays()
    np.testing.assert_array_equal(inputs, X.numpy())
    np.testing.assert_array_equal(targets, y.numpy())
    with pytest.raises(ValueError, match="reduction='sum'.*got reduction='mean'"):
        TorchJob(mlp(), torch.nn.CrossEntropyLoss(), (X, y))
    with pytest.raises(ValueError, match="20 inputs but 19 targets"):
        TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y[:19])).arrays()


def test_regression_targets_take_the_models_dtype_and_each_job_starts_afresh():
    """A float32 model with float64 targets (MSE) computes; theta0 resets the parameters and
    the optimizer's state, so each job of a stream is plain full-batch training."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 1)
    X = np.random.default_rng(0).standard_normal((30, 4))
    y = X @ np.arange(1.0, 5.0)[:, None]  # float64 targets, a float32 model
    job = TorchJob(net, torch.nn.MSELoss(reduction="sum"), (X.astype(np.float32), y),
                   optimizer=lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9))
    blocks = job.blocks(2)
    runs = []
    for _ in range(2):
        theta = job.theta0()
        for _ in range(3):
            theta = job.step(theta, sum(job.compute(b, theta) for b in blocks), np.arange(2))
        runs.append(theta)
    np.testing.assert_array_equal(runs[0], runs[1])  # no momentum carried into job 2
    assert not np.array_equal(runs[0], job.theta0())


def test_the_optimizers_and_schedulers_state_survive_a_checkpoint(tmp_path):
    """state() after some steps, restored into a job built afresh, makes its next step the
    same as the first job's (momentum and the learning rate's schedule included); a checkpoint
    file keeps it, and one written without a state reads as None."""
    from mpicoded import checkpoint as ckpt

    def build() -> TorchJob:
        return TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), data(),
                        optimizer=lambda ps: torch.optim.SGD(ps, lr=0.3, momentum=0.9),
                        scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 2, 0.5))

    job = build()
    blocks = job.blocks(3)
    theta = job.theta0()
    for _ in range(3):
        theta = job.step(theta, sum(job.compute(b, theta) for b in blocks), np.arange(3))
    assert job.optimizer.param_groups[0]["lr"] == pytest.approx(0.15)  # halved at step 2
    ckpt.save(tmp_path, ckpt.Checkpoint(0, 3, theta, "f", job.state()))
    point = ckpt.load(tmp_path, "f")
    again = build()
    again.blocks(3)
    again.restore(point.state)
    gradient = sum(job.compute(b, theta) for b in blocks)
    np.testing.assert_array_equal(again.step(theta, gradient, np.arange(3)),
                                  job.step(theta, gradient, np.arange(3)))
    fresh = build()
    fresh.blocks(3)
    assert not np.array_equal(fresh.step(theta, gradient, np.arange(3)), job.flat())
    ckpt.save(tmp_path, ckpt.Checkpoint(0, 3, theta, "f"))
    assert ckpt.load(tmp_path, "f").state is None


def test_only_plain_sgd_without_a_scheduler_is_stateless():
    """A failover needs a checkpoint's state only for a job whose later steps depend on it:
    momentum, Adam's moments, a schedule; a GradientJob that defines state() is stateful."""
    from mpicoded.jobs.sample import SampleJob

    def stateful(optimizer=None, scheduler=None) -> bool:
        return TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), data(),
                        optimizer=optimizer, scheduler=scheduler).stateful

    assert not stateful()
    assert not stateful(lambda ps: torch.optim.SGD(ps, lr=0.1))
    assert stateful(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9))
    assert stateful(lambda ps: torch.optim.Adam(ps))
    assert stateful(scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 2))
    assert not SampleJob.__new__(SampleJob).stateful

    class Kept(SampleJob):
        def state(self) -> np.ndarray:
            return np.zeros(1)

    assert Kept.__new__(Kept).stateful


def test_a_step_leaves_the_theta_it_was_given_alone():
    """The parameters are loaded from a copy: a float64 model's once viewed theta, and the
    optimizer's step wrote the next theta into the caller's array (a callback's, say)."""
    X, y = data()
    job = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y))
    blocks = job.blocks(2)
    theta = job.theta0()
    kept = theta.copy()
    after = job.step(theta, sum(job.compute(b, theta) for b in blocks), np.arange(2))
    np.testing.assert_array_equal(theta, kept)
    assert not np.array_equal(after, kept)


def test_held_out_data_give_the_mean_loss_and_the_accuracy():
    X, y = data()
    X_test, y_test = data(rows=40, seed=7)
    job = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y),
                   eval_data=(X_test, y_test))
    theta = job.theta0()
    with torch.no_grad():
        scores = mlp()(X_test)
    got = job.evaluate(theta)
    assert job.evaluates and set(got) == {"eval_loss", "accuracy"}
    assert got["eval_loss"] == pytest.approx(
        float(torch.nn.functional.cross_entropy(scores, y_test)), rel=1e-12)
    assert got["accuracy"] == float((scores.argmax(1) == y_test).double().mean())
    plain = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y))
    assert not plain.evaluates and plain.evaluate(theta) is None


def test_a_float32_model_sends_float32_and_a_float64_one_float64():
    """Results and θ travel in the model's dtype unless told: a float32 model's gradient
    comes back as it was computed (no widened copy), its θ as float32 values."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    X = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    job = TorchJob(net, torch.nn.CrossEntropyLoss(reduction="sum"), (X, np.arange(10) % 2))
    assert (job.result_dtype, job.theta_dtype) == ("float32", "float32")
    grad = job.compute(job.blocks(1)[0], job.theta0())
    assert grad.dtype == np.float32
    theta = job.theta0()
    assert np.array_equal(theta.astype(np.float32).astype(np.float64), theta)
    assert TorchJob(net, torch.nn.CrossEntropyLoss(reduction="sum"), (X, np.arange(10) % 2),
                    result_dtype="float64").result_dtype == "float64"
    wide = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), data())
    assert (wide.result_dtype, wide.theta_dtype) == ("float64", "float64")


def test_the_theta_loaded_last_is_not_copied_again_and_a_step_holds_its_own():
    """Chunks of one iteration pass the same θ: it is loaded once. A step moves the
    parameters to the θ it returns, which the next step then starts from without a load; the
    old θ after it is loaded again (its gradient is θ's, not the stepped parameters')."""
    X, y = data()
    job = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y),
                   optimizer=lambda ps: torch.optim.SGD(ps, lr=0.5, momentum=0.9))
    block = job.blocks(1)[0]
    theta = job.theta0()
    first = job.compute(block, theta)
    assert job._loaded is theta
    stepped = job.step(theta, first, np.arange(1))
    assert job._loaded is stepped
    np.testing.assert_array_equal(job.flat(), stepped)
    np.testing.assert_array_equal(job.compute(block, theta), first)
    fresh = TorchJob(mlp(), torch.nn.CrossEntropyLoss(reduction="sum"), (X, y))
    fresh.blocks(1)
    np.testing.assert_array_equal(job.compute(block, stepped), fresh.compute(block, stepped))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_narrow_models_gradient_is_divided_in_float64_and_rounded_once(dtype):
    """The decoded sum (float64) over the rows, rounded once into the model's dtype: what
    the optimizer steps with, for a dtype numpy has (float32) and one it lacks (bfloat16)."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3).to(dtype)
    X = np.random.default_rng(0).standard_normal((10, 4))
    job = TorchJob(net, torch.nn.CrossEntropyLoss(reduction="sum"), (X, np.arange(10) % 3),
                   optimizer=lambda ps: torch.optim.SGD(ps, lr=1.0))
    job.blocks(2)
    theta = job.theta0()
    total = np.random.default_rng(1).standard_normal(job.dim) * 1e3 + 1 / 3
    stepped = job.step(theta, total, np.arange(2))
    grad = torch.from_numpy(total / 10).to(dtype)
    want = torch.from_numpy(theta).to(dtype) - grad
    np.testing.assert_array_equal(stepped, want.to(torch.float64).numpy())
