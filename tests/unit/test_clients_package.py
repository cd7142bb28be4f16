"""The clients package imports its public names on first use (clients/__init__.py): its
table of where each name lives, its `__all__` and its type-checking imports must agree,
and every name must resolve to what its module defines."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import clients

INIT = Path(clients.__file__)


def test_every_public_name_is_in_the_table_and_resolves() -> None:
    assert sorted(clients.__all__) == sorted(clients._WHERE)
    for name, module in clients._WHERE.items():
        assert getattr(clients, name) is getattr(importlib.import_module(module), name)


def test_the_type_checking_imports_name_the_same_modules() -> None:
    tree = ast.parse(INIT.read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If))
    imported = {a.name: node.module for node in guarded.body
                if isinstance(node, ast.ImportFrom) for a in node.names}
    assert imported == clients._WHERE


def test_importing_the_package_imports_no_client() -> None:
    code = "import sys, clients; print(sorted(m for m in sys.modules if m.startswith('clients.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
