"""The generated tables in the docs: the CLI reference from the real parsers and the option
table, the wire layouts from the protocol's table.

Each table sits in its page between ``<!-- begin NAME -->`` and ``<!-- end NAME -->``, committed,
so it reads on GitHub as on the site: ``python docs/generate.py`` rewrites them, and
``tests/unit/test_docs.py`` fails while one is stale. ``subcommands`` is
``mpicoded.cli.SUBCOMMANDS``; ``train-flags`` the flags of ``python -m mpicoded.train``, one
table per ``--help`` group (the job flags from ``mpicoded.train.build_parser``, then every run
option from ``mpicoded.options.RunOptions`` with its ``mpicoded.run`` keyword);
``unused-flags`` is ``mpicoded.unused.COUNTS``; ``wire-layouts`` is
``mpicoded.core.layouts.LAYOUTS``, a row a tag; the ``api-*`` sections of the API page and
the ``codes-*`` ones of the codes page are signatures and docstrings read from the sources
(``API``). None of these modules loads MPI on import, so this runs without MPI.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Callable
from dataclasses import fields
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: no pipe, which GitHub and MkDocs escape
    differently inside code."""
    return " ".join(text.split()).replace(" | ", " or ").replace("|", "/").replace("<", "&lt;")


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
    """The flag's default, and the keyword's where it differs; where the code settles it, what
    the help says the default is."""
    value = action.default
    if action.nargs == "?" and action.const is not None and value is None:
        return f"off (given alone: `{action.const}`)"  # --dashboard [PORT]
    if value is None:
        said = re.search(r"(?:^|[;(:] ?)default:? ([^;]*)", action.help or "")
        return _cell(_balanced(said.group(1))) if said else ""
    if value is False or value in ([], ()) or value == argparse.SUPPRESS:
        return ""  # a switch that is off, or none to show (--help, --version)
    if keyword is not None and keyword != value:
        return f"`{value}` (`mpicoded.run`: `{keyword}`)"
    return f"`{value}`"


def _balanced(text: str) -> str:
    """``text`` up to its first closing parenthesis that it did not open."""
    depth = 0
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return text[:at]
    return text


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
            out += [f"| {_flag(a)} | `{a.dest}`: {_cell(types[a.dest])} | "
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
    """Every message kind's wire layout, from ``mpicoded.core.layouts.LAYOUTS``."""
    from mpicoded.core.layouts import LAYOUTS

    rows = ["| tag | direction | what it carries | header | payload, in order |", "|---|---|---|---|---|"]
    for tag, layout in LAYOUTS.items():
        if layout.body == "float64":
            used = ["`job`, `iteration`, `epoch`"] if layout.key else []
            used += [f"`{slot}`: {what}" for slot, what in (
                ("worker", layout.worker), ("task", layout.task), ("count", layout.count))
                if what is not None]
            header = "; ".join(used) or "none used"
            payload = "; ".join(f"{s.name} [{s.size.value}]" for s in layout.payload) or "none"
        else:  # no header: the sections are the whole message
            header = f"none ({layout.body})"
            payload = "; ".join(s.name for s in layout.payload)
        rows.append(f"| `{tag.name}` ({int(tag)}) | {layout.direction} | {_cell(layout.carries)} "
                    f"| {_cell(header)} | {_cell(payload)} |")
    return "\n".join(rows) + "\n"


API = {  # the API page's sections: the objects each documents, by where they are defined
    "api-run": ("mpicoded.run", "mpicoded.core.result.RunResult",
                "mpicoded.core.result.IterationRecord", "mpicoded.options.RunOptions",
                "mpicoded.options.UsageError"),
    "api-jobs": ("mpicoded.jobs.kinds.GradientJob", "mpicoded.jobs.kinds.MatVecJob"),
    "api-torch": ("mpicoded.jobs.torchjob.TorchJob", "mpicoded.jobs.batches.ShardSampler"),
    "api-log": ("mpicoded.log.log_to_stderr",),
    "codes-api": ("mpicoded.codes.make_code", "mpicoded.codes.available_codes",
                  "mpicoded.codes.code_parameters", "mpicoded.codes._base.Code",
                  "mpicoded.codes._base.Decoder"),
    "codes-decoders": ("mpicoded.codes.decoders.IntervalDecoder",
                       "mpicoded.codes.decoders.PeelingDecoder",
                       "mpicoded.codes.decoders.GenericDecoder"),
    "codes-partial": ("mpicoded.codes.partial.partial_code", "mpicoded.codes.partial.PieceDecoder",
                      "mpicoded.codes.partial.range_code", "mpicoded.codes.partial.RangeDecoder"),
    "codes-constructors": tuple(f"mpicoded.codes.{m}" for m in (
        "uncoded.make_uncoded", "frc.make_frc", "frc.make_gfrc", "cyclic.make_cyclic",
        "cpgc.make_ucmmc", "cpgc.make_cpgc", "cpgc.make_mcc", "mds.make_mds",
        "sparse.make_sparse", "spread.make_spread")),
}
OWN_FIELDS = {"RunOptions"}  # one field a flag: the CLI reference lists them, not this page


def _source(dotted: str) -> tuple[ast.Module, str]:
    """The module ``dotted`` names a member of, parsed (read, not imported: no MPI, no torch)."""
    module = dotted.rsplit(".", 1)[0]
    path = ROOT / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8")), module


def _signature(node: ast.FunctionDef) -> str:
    args = ast.unparse(node.args)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{node.name}({args}){returns}"


def _doc(node: ast.AST) -> list[str]:
    text = ast.get_docstring(node)  # type: ignore[arg-type]
    return [text, ""] if text else []


def api_markdown(name: str) -> str:
    """One section of the API page: each object's signature and docstring, a class's public
    methods and fields after it, from the sources."""
    out: list[str] = []
    for dotted in API[name]:
        tree, module = _source(dotted)
        short = dotted.rsplit(".", 1)[1]
        node = next(n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
                    and n.name == short)
        public = ".".join(p for p in module.split(".") if not p.startswith("_"))
        out += [f"### `{public}.{short}`", ""]
        if isinstance(node, ast.FunctionDef):
            out += ["```python", _signature(node), "```", "", *_doc(node)]
            continue
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        out += ["```python", f"class {short}({bases})" if bases else f"class {short}", "```", "",
                *_doc(node)]
        fields_ = [n for n in node.body if isinstance(n, ast.AnnAssign)
                   and isinstance(n.target, ast.Name) and not n.target.id.startswith("_")]
        if fields_ and short not in OWN_FIELDS:
            out += ["| field | type |", "|---|---|"]
            out += [f"| `{n.target.id}` | {_cell(ast.unparse(n.annotation))} |"  # type: ignore[union-attr]
                    for n in fields_] + [""]
        for method in node.body:
            if isinstance(method, ast.FunctionDef) and (
                    not method.name.startswith("_") or method.name == "__init__"):
                if method.name == "__init__" and not ast.get_docstring(method):
                    continue
                out += [f"#### `{short}.{method.name}`", "", "```python",
                        _signature(method), "```", "", *_doc(method)]
    return "\n".join(out)


def unused_markdown() -> str:
    """``mpicoded.unused.COUNTS``: each flag refused where it would do nothing, and what it
    needs."""
    from mpicoded.unused import COUNTS

    rows = ["| flag | refused unless |", "|---|---|"]
    rows += [f"| `--{name.replace('_', '-')}` | {_cell(needs)} |"
             for name, (_, needs) in COUNTS.items()]
    return "\n".join(rows)


TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "unused-flags": ("reference/cli.md", unused_markdown),
    "subcommands": ("reference/cli.md", subcommands_markdown),
    "train-flags": ("reference/cli.md", flags_markdown),
    "wire-layouts": ("architecture.md", layouts_markdown),
    **{name: ("reference/codes.md" if name.startswith("codes") else "reference/api.md",
              partial(api_markdown, name)) for name in API},
}


def refreshed(page: str, text: str) -> str:
    """``text`` of docs/``page`` with each of its tables generated anew."""
    for name, (where, make) in TABLES.items():
        if where != page:
            continue
        begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
        if begin not in text or end not in text:
            raise SystemExit(f"docs/{page} has no {begin} ... {end}")
        before, rest = text.split(begin, 1)
        text = before + begin + "\n" + make().rstrip("\n") + "\n" + end + rest.split(end, 1)[1]
    return text


def main() -> None:
    """Rewrite every page's generated tables."""
    sys.path.insert(0, str(ROOT))
    for page in sorted({where for where, _ in TABLES.values()}):
        path = ROOT / "docs" / page
        path.write_text(refreshed(page, path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
