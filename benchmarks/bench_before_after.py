# SPDX-License-Identifier: Apache-2.0
"""The loss benchmarks on two checkouts side by side: a revision before a change
and this one.

Each configuration of bench_joint_loss (time and peak memory of one step)
and bench_rnnt_loss (time) runs as a worker process of each checkout, its own
Python code and its own compiled library (the worker starts in that
checkout's root, which comes first on its import path). The timing workers
of one configuration are asked for a step in turn, round after round, as
benchmarks/_harness.py does for one checkout, so that a change in the
machine's load hits both alike; the table gives each median and after /
before.

Usage (from the repository root, with the other revision built in its own
worktree):

  git worktree add /tmp/before REV
  (cd /tmp/before && $OLDPWD/.venv/bin/python setup.py build_ext --inplace)
  .venv/bin/python -m benchmarks.bench_before_after --before /tmp/before
"""

import json
import os
import subprocess
import sys

from absl import app
from absl import flags

from benchmarks import _harness

BEFORE = flags.DEFINE_string("before", None, "Root of the checkout to compare.")
ROUNDS = flags.DEFINE_integer("rounds", 5, "Timing rounds (the median is kept).")
JOINT_SHAPES = flags.DEFINE_string(
    "joint_shapes",
    "8,150,40,500,256;4,300,80,1024,512;2,500,100,4096,640",
    "bench_joint_loss shapes B,T,U,V,J; separated by ';'.",
)
UNFUSED_UP_TO = flags.DEFINE_integer(
    "unfused_up_to",
    2,
    "Time the unfused joint (TensorFlow's joiner + rnnt_loss) on the first "
    "this many joint shapes only (the larger ones' logits take gigabytes).",
)
PARTS = flags.DEFINE_list(
    "parts",
    ["joint_time", "joint_memory", "rnnt_time"],
    "Which tables: joint_time, joint_memory, rnnt_time.",
)
DTYPES = ("float32", "bfloat16")
JOINT = "benchmarks.bench_joint_loss"
RNNT = "benchmarks.bench_rnnt_loss"
RNNT_CASES = [  # bench_rnnt_loss workers: impl, B, T, U, V
    ("fused", 8, 150, 40, 500),
    ("fused", 4, 300, 80, 128),
    ("yardstick", 8, 150, 40, 500),
    ("full_additive", 8, 300, 60, 500),
    ("pruned_additive", 8, 300, 60, 500),
]


def start(root, module, worker):
    """A worker of `module` in checkout `root` (its code, its library)."""
    env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_TRANSDUCER_OPS_LIBRARY", None)
    return subprocess.Popen(
        [sys.executable, "-m", module, f"--worker={worker}"],
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def interleaved(workers, rounds):
    """{key: worker} -> {key: median seconds}, one timing each per round."""
    for key, proc in workers.items():
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"benchmark worker {key} failed to start")
    samples = {key: [] for key in workers}
    for _ in range(rounds):
        for key, proc in workers.items():
            proc.stdin.write("run\n")
            proc.stdin.flush()
            samples[key].append(float(proc.stdout.readline()))
    for proc in workers.values():
        proc.stdin.close()
        proc.stdout.readline()  # the worker's closing report
        proc.wait()
    return {key: sorted(v)[len(v) // 2] for key, v in samples.items()}


def one_shot(root, module, worker):
    """The JSON line a one-shot worker prints last (None if it died)."""
    proc = start(root, module, worker)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        return None
    return json.loads(out.strip().splitlines()[-1])


def joint_time(roots, shapes):
    print("| bench_joint_loss (B, T, U, V, J) | dtype | path | before ms | after ms "
          "| after / before |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for index, shape in enumerate(shapes):
        impls = ("fused", "unfused") if index < UNFUSED_UP_TO.value else ("fused",)
        for dtype in DTYPES:
            spec = ",".join(shape)
            workers = {
                (impl, side): start(root, JOINT, f"time,{impl},{dtype},{spec}")
                for impl in impls
                for side, root in roots.items()
            }
            med = interleaved(workers, ROUNDS.value)
            for impl in impls:
                b, a = med[impl, "before"], med[impl, "after"]
                print(f"| ({spec}) | {dtype} | {impl} | {b * 1e3:.1f} | "
                      f"{a * 1e3:.1f} | {a / b:.3f} |", flush=True)  # fmt: skip


def joint_memory(roots, shapes):
    print("| bench_joint_loss (B, T, U, V, J) | dtype | fused step's peak RSS "
          "above its inputs, before MiB | after MiB | after / before |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for shape in shapes:
        spec = ",".join(shape)
        for dtype in DTYPES:
            peaks = {
                side: one_shot(root, JOINT, f"memory,fused,{dtype},{spec}")
                for side, root in roots.items()
            }
            b, a = (peaks[side]["above"] / 2**20 for side in ("before", "after"))
            print(f"| ({spec}) | {dtype} | {b:.1f} | {a:.1f} | {a / b:.3f} |",
                  flush=True)  # fmt: skip


def rnnt_time(roots):
    print("| bench_rnnt_loss case | (B, T, U, V) | before ms | after ms | "
          "after / before |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    workers = {
        (case, side): start(root, RNNT, ",".join(map(str, case)))
        for case in RNNT_CASES
        for side, root in roots.items()
    }
    med = interleaved(workers, ROUNDS.value)
    for case in RNNT_CASES:
        b, a = med[case, "before"], med[case, "after"]
        print(f"| {case[0]} | {case[1:]} | {b * 1e3:.1f} | {a * 1e3:.1f} | "
              f"{a / b:.3f} |", flush=True)  # fmt: skip


def main(argv):
    del argv
    if not BEFORE.value:
        raise app.UsageError("--before names the checkout to compare")
    roots = {"before": os.path.abspath(BEFORE.value), "after": _harness.ROOT}
    shapes = [s.split(",") for s in JOINT_SHAPES.value.split(";")]
    print(f"medians of {ROUNDS.value} interleaved rounds, 2 threads")
    tables = {
        "joint_time": lambda: joint_time(roots, shapes),
        "joint_memory": lambda: joint_memory(roots, shapes),
        "rnnt_time": lambda: rnnt_time(roots),
    }
    for part in PARTS.value:
        if part not in tables:
            raise app.UsageError(f"--parts: {part!r} is not one of {list(tables)}")
        print()
        tables[part]()


if __name__ == "__main__":
    app.run(main)
