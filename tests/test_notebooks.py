# SPDX-License-Identifier: Apache-2.0
"""notebooks/run_notebooks.py: the strip check, and a run in a fresh kernel.

The notebooks themselves run with `make notebooks` (minutes); here the
runner is checked on tiny notebooks (a kernel starts in a few seconds).
"""

import importlib.util
import os
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "notebooks", "run_notebooks.py")


def _runner():
    spec = importlib.util.spec_from_file_location("run_notebooks", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = _runner()


def _notebook(path, *sources, executed=False):
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    if executed:
        for count, cell in enumerate(cells, 1):
            cell.execution_count = count
            cell.outputs = [nbformat.v4.new_output("stream", text="hello\n")]
    notebook = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(notebook, str(path))
    return str(path)


def test_the_committed_notebooks_are_stripped_and_numbered():
    paths = runner.notebook_paths([])
    names = [os.path.basename(p) for p in paths]
    assert names == sorted(names) and len(names) == 6
    assert runner.check_stripped(paths) == 0


def test_check_stripped_names_the_notebook_and_cells(tmp_path, capsys):
    clean = _notebook(tmp_path / "clean.ipynb", "x = 1")
    dirty = _notebook(tmp_path / "dirty.ipynb", "x = 1", "y = 2", executed=True)
    assert runner.main(["--check-stripped", clean]) == 0
    assert runner.main(["--check-stripped", clean, dirty]) == 1
    out = capsys.readouterr().out
    assert "dirty.ipynb: not stripped" in out and "clean.ipynb" not in out
    assert "cell 1: 1 output(s); execution count 1" in out
    assert "cell 2: 1 output(s); execution count 2" in out


def test_strip_removes_outputs_counts_and_run_metadata(tmp_path):
    path = _notebook(tmp_path / "dirty.ipynb", "x = 1", executed=True)
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[0].metadata["execution"] = {"iopub.status.idle": "2024"}
    nbformat.write(notebook, path)
    assert runner.unstripped_cells(nbformat.read(path, as_version=4)) == [
        (1, "1 output(s); execution count 1; metadata execution")
    ]
    assert runner.main(["--strip", path]) == 0
    stripped = nbformat.read(path, as_version=4)
    assert runner.unstripped_cells(stripped) == []
    assert stripped.cells[0].source == "x = 1"


def test_unknown_notebook_is_an_error_naming_it():
    with pytest.raises(SystemExit, match="no_such.ipynb"):
        runner.main(["--check-stripped", "no_such.ipynb"])


def test_run_executes_in_a_scratch_folder_and_reports_failures(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    good = _notebook(
        tmp_path / "good.ipynb",
        "import os, sys\nopen('left.txt', 'w').write('x')\n"
        "print(os.getcwd())\nprint(sys.executable)",
    )
    bad = _notebook(tmp_path / "bad.ipynb", "x = 1", "raise ValueError('boom 42')")
    outputs = tmp_path / "executed"
    assert runner.run([good, bad], timeout=120, output_dir=str(outputs)) == 1
    captured = capsys.readouterr()
    assert "good.ipynb: ok in" in captured.out
    assert "bad.ipynb: FAILED in" in captured.out
    assert "boom 42" in captured.err
    # It ran in this Python, in a folder that is gone, leaving nothing here.
    executed = nbformat.read(str(outputs / "good.ipynb"), as_version=4)
    text = "".join(o.text for o in executed.cells[0].outputs)
    cwd, python = text.split()
    assert python == sys.executable
    assert not os.path.exists(cwd) and cwd != str(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["bad.ipynb", "executed", "good.ipynb"]
