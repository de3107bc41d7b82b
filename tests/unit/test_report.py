"""python -m mpicoded.report on a metrics file."""

from __future__ import annotations

import json

import pytest

from mpicoded.report import main

ITERATION = {"record": "iteration", "job": 0, "wall_s": 0.01, "results_used": 3,
             "results_received": 4, "stale_results": 1, "purged_tasks": 2, "messages": 4,
             "volume": 4.0, "missing_partitions": 0}


def test_summary_and_plot(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    rows = [{**ITERATION, "iteration": i, "loss": 1.0 / (i + 1)} for i in range(5)]
    rows.append({"record": "job", "job": 0, "arrival_s": 0.0, "start_s": 0.0, "done_s": 0.09,
                 "in_order_delay_s": 0.09, "final_loss": 0.2})
    rows.append({"record": "run", "code": {"name": "frc", "n_tasks": 6}, "n_workers": 6,
                 "makespan_s": 0.1, "job_done_s": 0.09, "failed_workers": 1, "recodes": 0,
                 "genie_mean_in_order_delay_s": 0.0})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main([str(path), "--out", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "iterations               5" in out and "1.000000 -> 0.200000" in out
    assert "failed workers" in out and "job done" in out and "0.090 s" in out
    assert "jobs" not in out and "genie" not in out  # one job: no stream to sum up
    pytest.importorskip("matplotlib")
    assert (tmp_path / "plots" / "run.png").stat().st_size > 1000


def test_the_loss_starts_before_the_first_step_as_train_prints_it(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    rows = [{**ITERATION, "iteration": i, "loss": 0.5 / (i + 1)} for i in range(3)]
    rows.append({"record": "run", "code": {"name": "frc", "n_tasks": 6}, "n_workers": 6,
                 "makespan_s": 0.1, "initial_loss": 0.693147})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main([str(path), "--out", str(tmp_path)]) == 0
    assert "0.693147 -> 0.166667" in capsys.readouterr().out


def test_not_a_metrics_file(tmp_path, capsys):
    path = tmp_path / "x.jsonl"
    path.write_text("hello\n")
    assert main([str(path)]) == 2
    assert "not a mpicoded metrics file" in capsys.readouterr().err


def test_html_report_is_one_self_contained_page_with_the_task_stream(tmp_path, capsys):
    pytest.importorskip("bokeh")
    path = tmp_path / "run.jsonl"
    rows = [{**ITERATION, "iteration": 0, "started_s": 0.0, "loss": 0.5}]
    rows += [{"record": "task", "worker": w, "job": 0, "iteration": 0, "epoch": 0, "task": w,
              "start_s": 0.001, "end_s": 0.002 * (w + 1), "chunks": 1, "outcome": "used"}
             for w in range(3)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main([str(path), "--out", str(tmp_path), "--html"]) == 0
    assert f"html: {tmp_path / 'run.html'}" in capsys.readouterr().out
    page = (tmp_path / "run.html").read_text()
    assert "task_stream" in page and "<script src=" not in page  # Bokeh's JS inline, no CDN


def test_the_summary_tells_where_an_iteration_went_from_the_trace(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    rows = []
    for i in range(3):  # sent out at 10i ms, decoded 6 ms later
        rows.append({**ITERATION, "iteration": i, "started_s": 0.01 * i, "wall_s": 0.006})
        rows += [{"record": "task", "worker": w, "job": 0, "iteration": i, "epoch": 0,
                  "task": w, "start_s": 0.01 * i + 0.001 * (w + 1),
                  "end_s": 0.01 * i + 0.001 * (w + 1) + 0.002,
                  "chunks": 1, "outcome": "used" if w < 2 else "purged"} for w in range(3)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main([str(path), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "used 6, received 0, purged 3, dropped 0, stale 0" in out
    assert "first 1.000, median 2.000, last 3.000 ms" in out
    assert "task, start to end          median 2.000 ms" in out
    assert "last used result -> decode  median 2.000 ms" in out  # the second ends at 4 ms
    assert "decode -> next send-out     median 4.000 ms" in out
