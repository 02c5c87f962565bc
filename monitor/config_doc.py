"""The configuration model as a commented TOML document, generated from monitor/config/.

``depeg-monitor config --defaults`` prints it (values set), and the shipped
``depeg-monitor.example.toml`` is the same text with the values commented out, so neither
can drift from the model: the comments are the ``#:`` lines above each field and each
section's docstring; ``tests/test_config_example.py`` fails when the file is stale
(regenerate it with ``depeg-monitor config --example > depeg-monitor.example.toml``).
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache

import msgspec

from . import config as config_module
from .config import Config

HEADER = """\
# depeg-monitor configuration: every setting with its default.
# Use: depeg-monitor --config this-file.toml COMMAND (or DEPEG_CONFIG=this-file.toml).
# Uncomment what you change. Any setting can also come from the environment as
# DEPEG_<SECTION>__<FIELD>, e.g. DEPEG_API__PORT=8081 or DEPEG_KAFKA__BOOTSTRAP_SERVERS=kafka:9092;
# the environment wins over the file. Generated from monitor/config/: do not edit by hand
# (depeg-monitor config --example > depeg-monitor.example.toml).
"""


@cache
def _comments(module_name: str) -> dict[str, tuple[str, dict[str, list[str]]]]:
    """class name -> (docstring, field -> its ``#:`` comment lines), from the source of the
    module that defines the section (monitor/config/model.py, monitor/vaults/config.py, ...)."""
    module = sys.modules.get(module_name, config_module)
    source = inspect.getsource(module)
    lines = source.splitlines()
    found: dict[str, tuple[str, dict[str, list[str]]]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, list[str]] = {}
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                above: list[str] = []
                n = item.lineno - 2
                while n >= 0 and lines[n].strip().startswith("#:"):
                    above.insert(0, lines[n].strip()[2:].strip())
                    n -= 1
                fields[item.target.id] = above
        found[node.name] = (ast.get_docstring(node) or "", fields)
    return found


def _value(value: object) -> str:
    # JSON scalars, lists and {} are valid TOML values as written.
    return msgspec.json.encode(value).decode()


def render(*, commented_values: bool = False, header: bool = False) -> str:
    """Every section and setting with its default and comments."""
    out: list[str] = [HEADER] if header else []
    prefix = "# " if commented_values else ""

    def emit(section: str, struct: msgspec.Struct) -> None:
        cls = type(struct)
        doc, notes = _comments(cls.__module__).get(cls.__name__, ("", {}))
        nested: list[tuple[str, msgspec.Struct]] = []
        out.extend(f"# {line}".rstrip() for line in doc.splitlines())
        out.append(f"[{section}]")
        for field in msgspec.structs.fields(struct):
            value = getattr(struct, field.name)
            if isinstance(value, msgspec.Struct):
                nested.append((f"{section}.{field.name}", value))
                continue
            out.extend(f"# {line}".rstrip() for line in notes.get(field.name, []))
            if value is None:  # TOML has no null: an unset optional stays commented out
                out.append(f"# {field.name} = (unset)")
            else:
                out.append(f"{prefix}{field.name} = {_value(value)}")
        out.append("")
        for name, child in nested:
            emit(name, child)

    defaults = Config()
    for field in msgspec.structs.fields(Config):
        emit(field.name, getattr(defaults, field.name))
    return "\n".join(out).rstrip("\n") + "\n"


def example() -> str:
    """The text of depeg-monitor.example.toml."""
    return render(commented_values=True, header=True)
