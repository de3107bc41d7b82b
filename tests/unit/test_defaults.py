"""The scheme a run gets without --code: the measured table's best worst case, for each kind
of job, planned as such; the README's table says the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpicoded import plan
from mpicoded.jobs.defaults import MEASURED, Scheme, default_scheme, table_for
from mpicoded.options import RunOptions

README = Path(__file__).resolve().parents[2] / "README.md"


def test_a_scheme_reads_as_the_benches_name_it():
    assert Scheme.parse("spread s=2 partial") == Scheme("spread", 2, True)
    assert Scheme.parse("frc s=1") == Scheme("frc", 1, False)
    assert Scheme.parse("uncoded") == Scheme("uncoded", None, False)
    assert str(Scheme.parse("gfrc s=2 partial")) == "gfrc s=2 partial"
    with pytest.raises(ValueError, match="expected CODE"):
        Scheme.parse("spread, s=2")


@pytest.mark.parametrize("kind", sorted(MEASURED))
def test_the_default_is_the_lowest_worst_case_of_its_table(kind):
    table = MEASURED[kind]
    assert table and all(tax > 0 for tax in table.values())  # times over a clean run
    assert all(str(Scheme.parse(name)) == name for name in table)  # every name reads back
    best = default_scheme(kind)
    assert all(table[str(best)] <= tax for tax in table.values())


def job_of(kind: str) -> object:
    """A small job of ``kind``'s table (torch: the model the tests define)."""
    from mpicoded.jobs.linreg import LinReg
    from mpicoded.jobs.logreg import LogReg
    from mpicoded.jobs.pagerank import PageRank

    if kind == "torch":
        pytest.importorskip("torch")
        import torch
        from torch_job import data, model

        from mpicoded import TorchJob

        return TorchJob(model(), torch.nn.CrossEntropyLoss(reduction="sum"), data())
    return {"gradient": LogReg(samples=2000, features=5), "linear": LinReg(samples=2000,
            features=5), "matvec": PageRank(nodes=3000)}[kind]


def planned(job: object, n_workers: int) -> plan.Plan:
    return plan.plan_run(job, RunOptions.from_keywords(delay="none"), n_workers)


@pytest.mark.parametrize("n_workers", [6, 20])
def test_a_run_without_code_gets_its_kinds_default(n_workers):
    for kind in sorted(MEASURED):
        job = job_of(kind)
        assert table_for(job) == kind
        got = planned(job, n_workers)
        best = default_scheme(kind)
        assert got.code.name == best.code
        if best.stragglers is not None:
            assert got.code.params["stragglers"] == best.stragglers
        assert got.options.partial == ("on" if best.partial else "off")


def test_a_world_too_small_for_the_defaults_stragglers_gets_fewer():
    from mpicoded.jobs.logreg import LogReg

    got = planned(LogReg(samples=2000, features=5), 2)
    assert got.code.name == default_scheme("gradient").code
    assert got.code.params["stragglers"] == 1


def test_the_readme_names_each_kinds_default():
    text = README.read_text(encoding="utf-8")
    for kind, label in (("gradient", "numpy gradient"), ("linear", "linear gradient"),
                        ("torch", "PyTorch model"), ("matvec", "matrix-vector")):
        row = re.search(rf"^\| {label} \| ([^|]+) \| ([^|]+) \|", text, re.M)
        assert row is not None, label
        best = default_scheme(kind)
        assert row[1].strip() == str(best), label
        assert row[2].strip() == f"{MEASURED[kind][str(best)]:.2f}", label
