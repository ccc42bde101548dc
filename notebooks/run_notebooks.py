# SPDX-License-Identifier: Apache-2.0
"""Executes the notebooks, or checks that they are committed without outputs.

    python notebooks/run_notebooks.py                  # execute every notebook
    python notebooks/run_notebooks.py 02_spec_augment.ipynb
    python notebooks/run_notebooks.py --check-stripped # outputs left in? (exit 1)
    python notebooks/run_notebooks.py --strip          # remove them

Each notebook runs top to bottom in a fresh kernel of this Python (the one
running the script: the kernel spec is written to a scratch folder, so a
fresh clone with only `.venv` needs no `ipykernel install`), with the
working directory a scratch folder that is deleted afterwards: nothing is
left in the tree. A cell that raises, or a notebook that runs past
--timeout seconds, fails the run (exit code 1, the error printed); every
notebook's time is printed. --output_dir keeps the executed copies (with
their plots) for reading.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import nbformat

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL_NAME = "tf_transducer_notebooks"
# What nbclient or Jupyter write into a cell's metadata when it runs.
RUN_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")


def notebook_paths(names):
    """The notebooks to run: names (paths, or file names in notebooks/), or
    every notebooks/*.ipynb in order."""
    if not names:
        found = sorted(f for f in os.listdir(HERE) if f.endswith(".ipynb"))
        if not found:
            raise SystemExit(f"no notebooks in {HERE}")
        return [os.path.join(HERE, f) for f in found]
    paths = []
    for name in names:
        path = name if os.path.exists(name) else os.path.join(HERE, name)
        if not (os.path.isfile(path) and path.endswith(".ipynb")):
            raise SystemExit(f"notebook {name!r} not found (in . or {HERE})")
        paths.append(path)
    return paths


def unstripped_cells(notebook):
    """[(cell number, what is left in it)] of the cells holding outputs, an
    execution count or run metadata; empty for a stripped notebook."""
    problems = []
    for number, cell in enumerate(notebook.cells, 1):
        found = []
        if cell.cell_type == "code":
            if cell.get("outputs"):
                found.append(f"{len(cell.outputs)} output(s)")
            if cell.get("execution_count") is not None:
                found.append(f"execution count {cell.execution_count}")
        leftover = sorted(k for k in RUN_METADATA if k in cell.get("metadata", {}))
        if leftover:
            found.append("metadata " + ", ".join(leftover))
        if found:
            problems.append((number, "; ".join(found)))
    return problems


def strip(notebook):
    """Removes outputs, execution counts and run metadata (in place)."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in RUN_METADATA:
            cell.get("metadata", {}).pop(key, None)
    return notebook


def check_stripped(paths):
    """Prints every notebook that is not stripped; returns how many."""
    bad = 0
    for path in paths:
        problems = unstripped_cells(nbformat.read(path, as_version=4))
        if problems:
            bad += 1
            where = ", ".join(f"cell {n}: {what}" for n, what in problems)
            print(f"{os.path.relpath(path)}: not stripped ({where})")
    if bad:
        print(
            f"{bad} notebook(s) hold outputs: run "
            f"`python {os.path.relpath(__file__)} --strip` before committing"
        )
    else:
        print(f"{len(paths)} notebook(s) stripped")
    return bad


def write_kernel_spec(root):
    """A kernel spec named KERNEL_NAME that starts this Python's ipykernel,
    under root/kernels; returns root (a JUPYTER_PATH entry)."""
    folder = os.path.join(root, "kernels", KERNEL_NAME)
    os.makedirs(folder)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})",
        "language": "python",
    }
    with open(os.path.join(folder, "kernel.json"), "w") as f:
        json.dump(spec, f)
    return root


def execute(path, timeout, scratch, output_dir=None):
    """Runs one notebook in a fresh kernel with cwd = scratch; raises on an
    error or when the whole notebook takes more than timeout seconds."""
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    deadline = time.monotonic() + timeout
    client = NotebookClient(
        notebook,
        kernel_name=KERNEL_NAME,
        resources={"metadata": {"path": scratch}},
        record_timing=False,
        # Each cell may use what is left of the notebook's time.
        timeout_func=lambda cell: max(1, round(deadline - time.monotonic())),
    )
    client.execute()
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
        nbformat.write(notebook, os.path.join(output_dir, os.path.basename(path)))


def run(paths, timeout, output_dir=None):
    """Executes the notebooks one by one; returns the number that failed."""
    from nbclient.exceptions import CellExecutionError
    from nbclient.exceptions import CellTimeoutError
    from nbclient.exceptions import DeadKernelError

    failed, total = [], 0.0
    with tempfile.TemporaryDirectory(prefix="tt_notebooks_") as root:
        # The kernel spec, Jupyter's runtime files and IPython's profile live
        # in the scratch folder, not in the user's home.
        os.environ["JUPYTER_PATH"] = write_kernel_spec(os.path.join(root, "jupyter"))
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(root, "runtime")
        os.environ["IPYTHONDIR"] = os.path.join(root, "ipython")
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        for path in paths:
            name = os.path.basename(path)
            print(f"{name} ...", flush=True)
            scratch = tempfile.mkdtemp(prefix=name.split(".")[0] + "_", dir=root)
            start = time.perf_counter()
            try:
                execute(path, timeout, scratch, output_dir)
                status = "ok"
            except (
                CellExecutionError,
                CellTimeoutError,
                DeadKernelError,
                RuntimeError,  # the kernel did not start
            ) as error:
                status = "FAILED"
                failed.append(name)
                print(f"{name}: {error}", file=sys.stderr)
            seconds = time.perf_counter() - start
            total += seconds
            print(f"{name}: {status} in {seconds:.1f} s", flush=True)
    print(f"{len(paths) - len(failed)}/{len(paths)} notebooks ran in {total:.1f} s")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return len(failed)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", help="default: notebooks/*.ipynb")
    parser.add_argument(
        "--check-stripped",
        action="store_true",
        help="only check that no notebook holds outputs or execution counts",
    )
    parser.add_argument(
        "--strip", action="store_true", help="remove outputs and execution counts"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per notebook"
    )
    parser.add_argument(
        "--output_dir", help="write the executed notebooks (with outputs) here"
    )
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout must be > 0, got {args.timeout}")
    paths = notebook_paths(args.notebooks)
    if args.strip:
        for path in paths:
            notebook = nbformat.read(path, as_version=4)
            if unstripped_cells(notebook):
                nbformat.write(strip(notebook), path)
                print(f"stripped {os.path.relpath(path)}")
        return 0
    if args.check_stripped:
        return 1 if check_stripped(paths) else 0
    return 1 if run(paths, args.timeout, args.output_dir) else 0


if __name__ == "__main__":
    sys.exit(main())
