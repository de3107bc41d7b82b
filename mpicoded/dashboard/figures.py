"""The dashboard's plots (Bokeh): the task stream, iteration time, loss, purged and stale work,
and each worker's speed and load. The live page and ``report --html`` build the same ones."""

from __future__ import annotations

import math
from typing import Any

from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, DataRange1d, HoverTool, LinearAxis
from bokeh.models.annotations import Legend, LegendItem
from bokeh.models.renderers import GlyphRenderer
from bokeh.plotting import figure

from .runlog import KEEP_TASKS, RunLog, loss_value, worker_summary

COLORS = {"used": "#2ca02c", "received": "#1f77b4", "purged": "#ff7f0e", "dropped": "#7f7f7f",
          "stale": "#d62728"}


def _task_columns(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rank": [int(r["worker"]) + 1 for r in rows],  # the MPI rank, as the flags name it
        "bottom": [int(r["worker"]) + 0.6 for r in rows],
        "top": [int(r["worker"]) + 1.4 for r in rows],
        "left": [float(r["start_s"]) for r in rows],
        "right": [float(r["end_s"]) for r in rows],
        "outcome": [str(r["outcome"]) for r in rows],
        "color": [COLORS.get(str(r["outcome"]), "black") for r in rows],
        "iteration": [int(r["iteration"]) for r in rows],
        "task": [int(r["task"]) for r in rows],
        "chunks": [int(r["chunks"]) for r in rows],
    }


def _iteration_columns(rows: list[dict[str, Any]], first: int) -> dict[str, Any]:
    return {
        "n": list(range(first, first + len(rows))),
        "iteration": [int(r["iteration"]) for r in rows],
        "job": [int(r["job"]) for r in rows],
        "wall_ms": [1e3 * float(r["wall_s"]) for r in rows],
        "decode_s": [float(r.get("started_s", 0.0)) + float(r["wall_s"]) for r in rows],
        "loss": [loss_value(r) for r in rows],
        "purged": [int(r.get("purged_tasks", 0)) for r in rows],
        "stale": [int(r.get("stale_results", 0)) for r in rows],
    }


class Panels:
    """The plots and their data sources; ``update(log)`` adds what the log read since, the
    task stream keeping the newest ``max_tasks`` (None: all)."""

    def __init__(self, title: str = "mpicoded", max_tasks: int | None = KEEP_TASKS,
                 follow_s: float | None = None) -> None:
        """``follow_s``: the task stream shows the newest that many seconds (a live page), else
        the whole run."""
        self.max_tasks = max_tasks
        self.tasks = ColumnDataSource(_task_columns([]), name="tasks")
        self.its = ColumnDataSource(_iteration_columns([], 0), name="iterations")
        self.workers = ColumnDataSource(worker_summary([]), name="workers")
        self.seen_tasks = self.seen_its = 0
        self.generation = 0

        stream = figure(name="task_stream", title=f"{title}: task stream (one row a worker rank; "
                        "vertical lines: decodes)", height=420, sizing_mode="stretch_width",
                        x_axis_label="seconds (rank 0's clock)", y_axis_label="rank",
                        tools="xpan,xwheel_zoom,box_zoom,reset,save")
        if follow_s is not None:
            stream.x_range = DataRange1d(follow="end", follow_interval=follow_s,
                                         range_padding=0.02)
        bars = stream.quad(left="left", right="right", bottom="bottom", top="top",
                           color="color", line_color="color", source=self.tasks)
        stream.vspan(x="decode_s", source=self.its, line_color="black", line_alpha=0.35)
        stream.add_tools(HoverTool(renderers=[bars], tooltips=[
            ("rank", "@rank"), ("iteration", "@iteration"), ("task", "@task"),
            ("outcome", "@outcome"), ("chunks", "@chunks"), ("start", "@left{0.0000} s"),
            ("end", "@right{0.0000} s")]))
        items = []  # by outcome: the bars share one source, so one invisible dot an outcome
        for name, color in COLORS.items():
            dot: GlyphRenderer[Any] = stream.scatter(x=[math.nan], y=[math.nan], color=color, size=8)
            items.append(LegendItem(label=name, renderers=[dot]))
        stream.add_layout(Legend(items=items), "right")

        def small(title: str, y_label: str) -> figure:
            return figure(title=title, height=250, sizing_mode="stretch_width",
                          x_axis_label="iteration (all jobs)", y_axis_label=y_label,
                          tools="pan,wheel_zoom,box_zoom,reset,save")

        wall = small("iteration time", "ms")
        wall.line("n", "wall_ms", source=self.its)
        loss = small("loss", "loss")
        loss.line("n", "loss", source=self.its, color="#9467bd")
        waste = small("purged tasks and stale results", "per iteration")
        waste.line("n", "purged", source=self.its, color=COLORS["purged"], legend_label="purged")
        waste.line("n", "stale", source=self.its, color=COLORS["stale"], legend_label="stale")
        speed = figure(title="workers: speed against the median worker's (row chunks a second) "
                       "and load (tasks, newest iteration)", height=250,
                       sizing_mode="stretch_width", x_axis_label="rank",
                       y_axis_label="x the median", tools="save")
        speed.add_layout(Legend(orientation="horizontal"), "below")  # off the bars
        speed.vbar(x="rank", top="speed", width=0.4, source=self.workers,
                   legend_label="speed", color="#17becf")
        loads = DataRange1d(start=0)  # tasks, on an axis of their own
        speed.extra_y_ranges = {"load": loads}
        speed.add_layout(LinearAxis(y_range_name="load", axis_label="tasks"), "right")
        dots: GlyphRenderer[Any] = speed.scatter(x="rank", y="load", source=self.workers, size=9,
                                            color="black", legend_label="load (tasks)",
                                            y_range_name="load")
        loads.renderers = [dots]
        self.layout = column(stream, row(wall, loss, sizing_mode="stretch_width"),
                             row(waste, speed, sizing_mode="stretch_width"),
                             sizing_mode="stretch_width")

    def update(self, log: RunLog) -> None:
        """Stream in the records ``log`` has that these plots do not show yet."""
        if log.generation != self.generation:  # the file was started again
            self.generation = log.generation
            self.seen_tasks = self.seen_its = 0
            self.tasks.data = _task_columns([])
            self.its.data = _iteration_columns([], 0)
        new = min(log.task_count - self.seen_tasks, len(log.tasks))
        if self.max_tasks is not None:  # a browser draws the newest 50,000 smoothly
            new = min(new, self.max_tasks)
        if new > 0:
            self.tasks.stream(_task_columns(log.tasks[-new:]), rollover=self.max_tasks)
            self.seen_tasks = log.task_count
            self.workers.data = log.workers()
        new_its = log.iterations[self.seen_its:]
        if new_its:
            self.its.stream(_iteration_columns(new_its, self.seen_its))
            self.seen_its = len(log.iterations)


def standalone_html(log: RunLog, title: str) -> str:
    """One self-contained HTML page (Bokeh's JavaScript inline) with the plots of every record
    ``log`` has read (every task too, if it kept them all): the shareable report."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    panels = Panels(title, max_tasks=None)
    panels.update(log)
    return str(file_html(panels.layout, INLINE, title=f"mpicoded: {title}"))
