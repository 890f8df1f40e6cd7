"""The configuration reference (docs/configuration.md), generated from the typed config.

Every key of `solrl.config.Config` with its type, its default and its help. The help is the comment
written beside the field in solrl/config.py (read with `tokenize`, so the source stays the one place it
is written), continued by comment-only lines indented under it; a section's help is its class docstring."""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import tokenize
import typing
from pathlib import Path

from .. import config as config_module
from ..config import Config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
COMMAND = "solrl docs"


def field_comments(source: str) -> dict[tuple[str, str], str]:
    """(class name, field name) -> the comment beside the field, joined with the comment-only lines
    right under it that are indented past the field's name (a continued comment)."""
    comments: dict[int, tuple[int, str]] = {}  # line -> (column, text)
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip())
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.add(tok.start[0])
    found = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            parts = [comments[line][1] for line in range(item.lineno, item.end_lineno + 1) if line in comments]
            line = item.end_lineno + 1
            while line in comments and line not in code_lines and comments[line][0] > item.col_offset:
                parts.append(comments[line][1])
                line += 1
            found[(node.name, item.target.id)] = " ".join(parts)
    return found


def type_text(hint) -> str:
    """A type as a reader writes it in YAML: a Literal's values, `null` for None."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)):
        return " | ".join("null" if a is type(None) else type_text(a) for a in args)
    if origin in (list, tuple):
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {type_text(args[0])} to {type_text(args[1])}" if args else "mapping"
    if hint is typing.Any:
        return "any"
    return getattr(hint, "__name__", str(hint))


def default_text(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(default_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {default_text(v)}" for k, v in value.items()) + "}"
    return str(value)


@functools.lru_cache(maxsize=1)
def _config_source_notes() -> tuple[dict, dict]:
    """(field comments, class docstrings) of solrl/config.py, read once."""
    source = inspect.getsource(config_module)
    docs = {node.name: ast.get_docstring(node) or "" for node in ast.parse(source).body if isinstance(node, ast.ClassDef)}
    return field_comments(source), docs


def reference_rows(cls=Config, instance=None, prefix: str = "", comments=None) -> list[dict]:
    """One row per setting: key, type, default, help; a nested section's rows follow its own row."""
    comments = comments if comments is not None else _config_source_notes()[0]
    instance = instance if instance is not None else cls()
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        key, hint, value = prefix + f.name, hints[f.name], getattr(instance, f.name)
        help_text = comments.get((cls.__name__, f.name), "")
        if dataclasses.is_dataclass(hint):
            own_doc = _config_source_notes()[1].get(hint.__name__)  # the class's own docstring, not dataclass's made-up one
            rows.append({"key": key, "section": True, "help": own_doc or help_text})
            rows.extend(reference_rows(hint, value, key + ".", comments))
        else:
            rows.append({"key": key, "section": False, "type": type_text(hint), "default": default_text(value),
                         "help": help_text})
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def config_reference_markdown() -> str:
    """The whole of docs/configuration.md."""
    rows = reference_rows()
    lines = ["# Configuration reference", "",
             f"<!-- Generated from solrl/config.py by `{COMMAND}`; edit the comments there, not this page. -->", "",
             "Every setting of a run, with its type and default. A preset in `configs/` states only what differs "
             "from these defaults; `key.sub=value` on the command line overrides either (`solrl train "
             "configs/toy_nft.yaml train.lr=3e-4`). A key that does not exist, or a value of the wrong type, stops "
             "the run with one line naming the key and the closest valid one. The help below is the comment "
             "beside each field in `solrl/config.py`.", ""]
    top = [r for r in rows if "." not in r["key"] and not r["section"]]
    sections = [r for r in rows if r["section"]]
    lines += ["Sections: " + ", ".join(f"[`{s['key']}`](#{s['key'].replace('.', '')})" for s in sections), ""]

    def table(section_rows):
        out = ["| key | type | default | what it does |", "|---|---|---|---|"]
        out += [f"| `{r['key']}` | {_cell(r['type'])} | `{_cell(r['default'])}` | {_cell(r['help'])} |"
                for r in section_rows]
        return out + [""]

    lines += ["## Top level", ""] + table(top)
    for section in sections:
        depth = section["key"].count(".")
        members = [r for r in rows if not r["section"] and r["key"].rsplit(".", 1)[0] == section["key"]]
        lines += [f"{'#' * (2 + depth)} {section['key']}", ""]
        if section["help"]:
            lines += [section["help"], ""]
        lines += table(members)
    return "\n".join(lines).rstrip("\n") + "\n"


def fields_without_help() -> list[str]:
    """Keys whose field in solrl/config.py has no comment (the house rule: every field has one)."""
    return [r["key"] for r in reference_rows() if not r["section"] and not r["help"]]
