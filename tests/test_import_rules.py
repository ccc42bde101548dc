# SPDX-License-Identifier: Apache-2.0
"""The package's import arrows, as ../shared/STYLE.md draws them.

Every `import` and `from ... import` of every module under tf_transducer/
is parsed, those inside functions and methods included (an upward import
hidden in a method is still an upward import), and checked against:

- audio flows data -> layers -> models -> losses -> ops: `models` use
  `layers`, `losses` (and what those rest on); `losses` use `ops` and
  `lattice`; `ops` and `lattice` import nothing else of ours;
- `data` imports no model code and `layers` no `data`;
- `decoding`, `export`, `training` and `cli` sit on top, in that order;
- the bottom modules (`tf_transducer._checks`, `tf_transducer._optional`)
  import nothing of ours and every package may import them;
- no `_`-name (a private module or a private function) of one package is
  imported by another;
- `layers` do no file I/O (no `open`, `os`, `shutil`, `pathlib`,
  `tf.io.gfile`, `soundfile`).

Nothing here imports TensorFlow: the rules are read off the source text.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "tf_transducer"
BOTTOM = {"_checks", "_console", "_optional", "_version"}

# package -> the packages of ours it may import (besides itself and BOTTOM).
BELOW = {
    "ops": set(),
    "lattice": set(),
    "data": set(),
    "layers": {"ops"},
    "losses": {"ops", "lattice"},
    "models": {"layers", "losses", "ops", "lattice"},
    "decoding": {"models", "layers", "losses", "ops", "lattice", "data"},
    "export": {"decoding", "models", "layers", "losses", "ops", "lattice", "data"},
    "training": {
        "export",
        "decoding",
        "models",
        "layers",
        "losses",
        "ops",
        "lattice",
        "data",
    },  # fmt: skip
    "cli": {
        "training",
        "export",
        "decoding",
        "models",
        "layers",
        "losses",
        "ops",
        "lattice",
        "data",
    },  # fmt: skip
}
FILE_IO_MODULES = {"os", "shutil", "pathlib", "io", "tempfile", "soundfile", "glob"}


def modules():
    """(dotted module name, path) of every module of the package."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def package_of(module):
    """The top-level part of tf_transducer a module belongs to ("" for the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports(module, path):
    """(line, imported module, imported names) of every import, nested ones too."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target, tuple(a.name for a in node.names)


def ours(module):
    return module == "tf_transducer" or module.startswith("tf_transducer.")


def violations():
    """Every broken rule, as "module:line: what"."""
    found = []
    for module, path in modules():
        mine = package_of(module)
        for line, target, names in imports(module, path):
            where = f"{module}:{line}"
            if mine == "layers" and target.split(".")[0] in FILE_IO_MODULES:
                found.append(f"{where}: layers do no file I/O (imports {target})")
            if not ours(target):
                continue
            targets = [target]
            if target == "tf_transducer":  # `from tf_transducer import losses`
                targets = [f"tf_transducer.{n}" for n in names]
            for full in targets:
                theirs = package_of(full)
                if theirs == "" or theirs in BOTTOM:
                    if mine in BOTTOM:
                        found.append(f"{where}: bottom module imports {full}")
                    continue
                if mine in BOTTOM:
                    found.append(f"{where}: bottom module imports {full}")
                    continue
                if mine == "" or theirs == mine:
                    continue
                if theirs not in BELOW.get(mine, set()):
                    found.append(f"{where}: {mine} may not import {theirs} ({full})")
                private = [p for p in full.split(".")[2:] if p.startswith("_")]
                private += [
                    n for n in names if n.startswith("_") and not n.startswith("__")
                ]
                if private:
                    found.append(
                        f"{where}: private name {private} of {theirs} imported "
                        f"by {mine}"
                    )
    return found


def file_io_calls():
    """`open(...)` and `tf.io.gfile` uses inside layers/."""
    found = []
    for module, path in modules():
        if package_of(module) != "layers":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "open"
            ):
                found.append(f"{module}:{node.lineno}: open() in a layer")
            if isinstance(node, ast.Attribute) and node.attr == "gfile":
                found.append(f"{module}:{node.lineno}: tf.io.gfile in a layer")
    return found


def test_imports_follow_the_arrows():
    assert violations() == []


def test_layers_do_no_file_io():
    assert file_io_calls() == []


def test_every_package_has_a_rule():
    packages = {package_of(m) for m, _ in modules()} - {""} - BOTTOM
    assert packages == set(BELOW)


@pytest.mark.parametrize(
    "source, module, expected",
    [
        ("from tf_transducer.models import Transducer", "tf_transducer.ops.x", "ops"),
        (
            "def f():\n    from tf_transducer import decoding",
            "tf_transducer.models.m",
            "decoding",
        ),
        (
            "from tf_transducer.ops._validation import require",
            "tf_transducer.layers.l",
            "private",
        ),
        ("import os", "tf_transducer.layers.l", "file I/O"),
    ],
)
def test_the_check_catches_breaches(tmp_path, monkeypatch, source, module, expected):
    # A guard against a vacuous pass: planted breaches are reported.
    package = module.split(".")[1]
    folder = tmp_path / "tf_transducer" / package
    folder.mkdir(parents=True)
    (tmp_path / "tf_transducer" / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    (folder / f"{module.split('.')[-1]}.py").write_text(source + "\n")
    monkeypatch.setattr(
        __import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path / "tf_transducer"
    )
    found = violations()
    assert any(expected in line for line in found), found
