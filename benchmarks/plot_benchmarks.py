# SPDX-License-Identifier: Apache-2.0
"""Plots the measurements of benchmarks/BENCHMARKS.md into docs/img/.

The numbers are read from the tables of BENCHMARKS.md (each found by its
header row), never typed in here: rerun a benchmark, paste its table, run
this script. A table that is missing or changed its header is an error
naming it.

Usage: python -m benchmarks.plot_benchmarks [--out docs/img]
(needs matplotlib: the `docs` extra)
"""

import argparse
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.join(HERE, "BENCHMARKS.md")
OUT = os.path.join(os.path.dirname(HERE), "docs", "img")

# The tables plotted, by their header rows.
MI = ("what", "(B, S, T)", "threads", "ms per fwd + bwd")
RNNT = ("(B, T, U, V)", "what", "ms", "/ yardstick", "peak memory above logits")
RSS = ("(B, T, U, V)", "what", "peak RSS of a step above the logits")
HALF = (
    "(B, T, U, V)",
    "logits",
    "path",
    "fwd+bwd ms",
    "peak RSS above the logits",
)
LATTICE = ("what", "time", "vs LAST (jax.jit)", "peak tensors", "goal")


def read_tables(path=BENCHMARKS):
    """{header tuple: [row tuples]} of every markdown table in the file."""
    tables, block = {}, []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines() + [""]
    for line in lines:
        if line.strip().startswith("|"):
            block.append(line.strip())
            continue
        if len(block) >= 2:
            header, *rows = [
                tuple(cell.strip() for cell in row.strip("|").split("|"))
                for row in block
            ]
            tables[header] = rows[1:]  # rows[0]: the --- row
        block = []
    return tables


def table(tables, header):
    if header not in tables:
        raise ValueError(
            f"{BENCHMARKS} has no table with the header {' | '.join(header)}"
        )
    return tables[header]


def number(cell):
    """14.5, '1.37x', '60.6 ms', '35.3 MiB' -> float."""
    found = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(x|ms|MiB)?\s*$", cell)
    if not found:
        raise ValueError(f"{BENCHMARKS}: not a number: {cell!r}")
    return float(found.group(1))


def data(tables):
    """What each figure shows, from the tables."""
    mi = [(r[0], r[1], int(r[2]), number(r[3])) for r in table(tables, MI)]
    rnnt = [(r[0], r[1], number(r[2]), number(r[4])) for r in table(tables, RNNT)]
    rss = [(r[0], r[1], number(r[2])) for r in table(tables, RSS)]
    half = [(r[0], r[1], r[2], number(r[3]), number(r[4])) for r in table(tables, HALF)]
    lattice = [
        (r[0], number(r[1]), number(r[3]) if r[3] else None)
        for r in table(tables, LATTICE)
    ]
    return {"mi": mi, "rnnt": rnnt, "rss": rss, "half": half, "lattice": lattice}


def _grouped_bars(ax, groups, series, values, log=False):
    """Bars of values[(group, series)] by group, one colour per series."""
    width = 0.8 / len(series)
    for i, name in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [values.get((group, name), 0.0) for group in groups]
        bars = ax.bar(xs, heights, width, label=name)
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=1)
    ax.set_xticks(range(len(groups)), groups)
    if log:
        ax.set_yscale("log")


def _panel(ax, groups, series, values, title, xlabel, ylabel, log=False, legend_size=8):
    """Grouped bars with their title, named axes and legend."""
    _grouped_bars(ax, groups, series, values, log=log)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=legend_size)


def plot_rnnt(plt, d, out):
    shapes = list(dict.fromkeys(r[0] for r in d["rnnt"]))
    names = list(dict.fromkeys(r[1] for r in d["rnnt"]))
    time = {(r[0], r[1]): r[2] for r in d["rnnt"]}
    memory = {(r[0], r[1]): r[2] for r in d["rss"]}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    axis = "(B, T, U, V), float32 logits"
    _panel(
        left,
        shapes,
        names,
        time,
        "RNN-T loss, forward + backward (2 CPU threads)",
        axis,
        "time per step (ms, log scale)",
        log=True,
    )
    _panel(
        right,
        shapes,
        names,
        memory,
        "Peak memory of one step",
        axis,
        "peak RSS above the logits (x logits' size)",
    )
    return _save(plt, fig, out, "rnnt_loss.png")


def plot_mi(plt, d, out):
    rows = [
        r for r in d["mi"] if r[0] in ("op + tape.gradient", "pure TF + tape.gradient")
    ]
    labels = list(
        dict.fromkeys(f"{r[0]}, {r[2]} thread{'s' * (r[2] > 1)}" for r in rows)
    )
    shapes = list(dict.fromkeys(r[1] for r in rows))
    values = {(r[1], f"{r[0]}, {r[2]} thread{'s' * (r[2] > 1)}"): r[3] for r in rows}
    fig, ax = plt.subplots(figsize=(9, 4))
    _panel(
        ax,
        shapes,
        labels,
        values,
        "Mutual-information recursion with its gradient (float32)",
        "(B, S, T)",
        "time per forward + backward (ms, log scale)",
        log=True,
    )
    return _save(plt, fig, out, "mutual_information.png")


def plot_half(plt, d, out):
    shapes = list(dict.fromkeys(r[0] for r in d["half"]))
    names = list(dict.fromkeys(f"{r[1]}, {r[2]}" for r in d["half"]))
    time = {(r[0], f"{r[1]}, {r[2]}"): r[3] for r in d["half"]}
    memory = {(r[0], f"{r[1]}, {r[2]}"): r[4] for r in d["half"]}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    _panel(
        left,
        shapes,
        names,
        time,
        "rnnt_loss on 16-bit logits, forward + backward",
        "(B, T, U, V)",
        "time per step (ms)",
        legend_size=7,
    )
    _panel(
        right,
        shapes,
        names,
        memory,
        "Peak memory of one step",
        "(B, T, U, V)",
        "peak RSS above the logits (x 16-bit logits' size)",
        legend_size=7,
    )
    return _save(plt, fig, out, "half_logits.png")


def _barh(ax, labels, values, colours, unit):
    ax.barh(range(len(values)), values, color=colours)
    ax.set_yticks(range(len(values)), [v.replace("`", "") for v in labels])
    ax.tick_params(axis="y", labelsize=8)
    ax.invert_yaxis()
    for i, value in enumerate(values):
        ax.annotate(f"{value:g} {unit}", (value, i), xytext=(2, 0), fontsize=7,
                    textcoords="offset points", va="center")  # fmt: skip
    ax.set_xlim(0, max(values) * 1.15)


def plot_lattice(plt, d, out):
    rows = d["lattice"]
    measured = [r for r in rows if r[2] is not None]
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(9, 6.5),
        gridspec_kw={"height_ratios": [len(rows), len(measured)]},
    )
    colours = ["tab:orange" if r[0].startswith("LAST") else "tab:blue" for r in rows]
    _barh(top, [r[0] for r in rows], [r[1] for r in rows], colours, "ms")
    top.set_xlabel("time (ms)")
    top.set_title(
        "Recognition lattice, B=4, T=20 (2 CPU threads):\n"
        "ours (blue) vs LAST under jax.jit (orange)",
        fontsize=10,
    )
    _barh(bottom, [r[0] for r in measured], [r[2] for r in measured], "tab:blue", "MiB")
    bottom.set_xlabel("peak tensor memory of ours (MiB)")
    return _save(plt, fig, out, "lattice_vs_last.png")


def _save(plt, fig, out, name):
    fig.tight_layout()
    path = os.path.join(out, name)
    # No timestamp in the file: the same tables give the same bytes.
    fig.savefig(path, dpi=80, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=OUT, help="folder for the PNG files")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = data(read_tables())
    os.makedirs(args.out, exist_ok=True)
    for plot in (plot_rnnt, plot_mi, plot_half, plot_lattice):
        print("wrote", plot(plt, d, args.out))


if __name__ == "__main__":
    main()
