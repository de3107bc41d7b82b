"""MkDocs hook: generate the CLI reference from the real parsers and the option table, and the
wire layouts from the protocol's table.

``docs/reference/cli.md`` holds two marker lines. ``<!-- subcommands -->`` becomes the table of
``mpicoded.cli.SUBCOMMANDS`` and ``<!-- train-flags -->`` the flags of ``python -m
mpicoded.train``, one table per ``--help`` group: the job flags from
``mpicoded.train.build_parser``, then every run option from ``mpicoded.options.RunOptions``
with its ``mpicoded.run`` keyword. ``docs/architecture.md`` holds ``<!-- wire-layouts -->``,
which becomes ``mpicoded.core.protocol.LAYOUTS``, a row a tag. None of these modules loads
MPI on import (``mpicoded.train`` imports it inside ``main`` only), so the docs build without
MPI.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SUBCOMMANDS_MARKER = "<!-- subcommands -->"
FLAGS_MARKER = "<!-- train-flags -->"
LAYOUTS_MARKER = "<!-- wire-layouts -->"

log = logging.getLogger("mkdocs.hooks.cli")


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _flag(action: argparse.Action) -> str:
    """The option strings with their argument, as ``--help`` shows them."""
    if action.nargs == 0:
        arg = ""
    elif action.choices is not None:
        arg = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        arg = action.metavar or action.dest.upper()
    if arg and action.nargs == "?":
        arg = f"[{arg}]"
    return ", ".join(f"`{opt} {arg}`" if arg else f"`{opt}`" for opt in action.option_strings)


def _default(action: argparse.Action, keyword: object = None) -> str:
    """The flag's default, and the keyword's where it differs."""
    value = action.default
    if value is None or value is False or value in ([], ()) or value == argparse.SUPPRESS:
        return ""  # no default, a switch that is off, or none to show (--help, --version)
    if keyword is not None and keyword != value:
        return f"`{value}` (`mpicoded.run`: `{keyword}`)"
    return f"`{value}`"


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog}
    return _cell(text)


def flags_markdown() -> str:
    """Every flag of ``python -m mpicoded.train``, a table per argument group; a run option's
    row names its ``mpicoded.run`` keyword and that keyword's type."""
    from mpicoded.options import DEFAULTS, RunOptions
    from mpicoded.train import build_parser

    parser = build_parser()
    types = {f.name: str(f.type) for f in fields(RunOptions)}
    out = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.option_strings]
        if not actions:
            continue
        options = [a for a in actions if a.dest in types]
        if not options:  # the job's own flags: the CLI's alone
            out += [f"### {group.title}", "", "| flag | default | meaning |", "|---|---|---|"]
            out += [f"| {_flag(a)} | {_default(a)} | {_help(a, parser.prog)} |" for a in actions]
        else:
            out += [f"### {group.title}", "", "| flag | keyword | default | meaning |",
                    "|---|---|---|---|"]
            out += [f"| {_flag(a)} | `{a.dest}: {_cell(types[a.dest])}` | "
                    f"{_default(a, DEFAULTS[a.dest])} | {_help(a, parser.prog)} |"
                    for a in options]
        out.append("")
    return "\n".join(out)


def subcommands_markdown() -> str:
    """The ``mpicoded`` subcommands, from ``mpicoded.cli.SUBCOMMANDS``."""
    from mpicoded.cli import SUBCOMMANDS

    rows = ["| command | runs | what it does |", "|---|---|---|"]
    rows += [f"| `mpicoded {name}` | `python -m {module.removesuffix('.__main__')}` | {_cell(what)} |"
             for name, (module, what) in SUBCOMMANDS.items()]
    return "\n".join(rows) + "\n"


def layouts_markdown() -> str:
    """Every message kind's wire layout, from ``mpicoded.core.protocol.LAYOUTS``."""
    from mpicoded.core.protocol import LAYOUTS

    rows = ["| tag | direction | what it carries | header | payload, in order |", "|---|---|---|---|---|"]
    for tag, layout in LAYOUTS.items():
        if layout.body == "float64":
            used = ["`job`, `iteration`, `epoch`"] if layout.key else []
            used += ["`worker`: the sender's"] if layout.worker else []
            used += [f"`{slot}`: {what}" for slot, what in (("task", layout.task), ("count", layout.count))
                     if what is not None]
            header = "; ".join(used) or "none used"
            payload = "; ".join(f"{s.name} [{s.size.value}]" for s in layout.payload) or "none"
        else:  # no header: the sections are the whole message
            header = f"none ({layout.body})"
            payload = "; ".join(s.name for s in layout.payload)
        rows.append(f"| `{tag.name}` ({int(tag)}) | {layout.direction} | {_cell(layout.carries)} "
                    f"| {_cell(header)} | {_cell(payload)} |")
    return "\n".join(rows) + "\n"


PAGES = {"reference/cli.md": ((SUBCOMMANDS_MARKER, subcommands_markdown), (FLAGS_MARKER, flags_markdown)),
         "architecture.md": ((LAYOUTS_MARKER, layouts_markdown),)}


def on_page_markdown(markdown: str, page, config, files) -> str:
    markers = PAGES.get(page.file.src_uri)
    if markers is None:
        return markdown
    if str(ROOT) not in sys.path:  # here, not on import: MkDocs restores sys.path after loading a hook
        sys.path.insert(0, str(ROOT))
    for marker, make in markers:
        lines = markdown.split("\n")
        if marker not in (line.strip() for line in lines):
            log.warning("%s has no marker line %s", page.file.src_uri, marker)
            continue
        markdown = "\n".join(make() if line.strip() == marker else line for line in lines)
    return markdown
