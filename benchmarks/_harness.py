# SPDX-License-Identifier: Apache-2.0
"""Side-by-side timing of configurations that each need their own process.

The parent starts one worker process per configuration (TensorFlow fixes its
thread counts, and a process's peak memory only grows, so each case gets a
fresh interpreter), then asks them for one timing each, in turn, round after
round: a change in the machine's load hits every configuration alike.

A worker keeps its cores busy for 0.1 s before each timing (on a virtual
machine an idle core sleeps, and waking it would be timed too) and reports
the median of three calls.
"""

import json
import os
import resource
import subprocess
import sys
import time

# The repository root: `python -m benchmarks.<name>` runs from here, and so do
# the worker processes the benchmarks start.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tensorflow_with_threads(threads):
    """TensorFlow, quiet (C++ warnings off) and on `threads` threads."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    return tf


def self_command(spec):
    """argv that runs the benchmark module of `spec` (its `__spec__`) again.

    The child runs `python -m benchmarks.<name>`, so it needs the repository
    root as its working directory: the parent's, when the parent was started
    the same way (`run_interleaved` sets it in any case).
    """
    return [sys.executable, "-m", spec.name]


def serve(step, inner=1, report=None):
    """Worker side: answers each line on stdin with a timing (seconds/inner).

    `step()` runs `inner` repetitions of the work and blocks until done.
    Prints "ready" first; on EOF prints, as JSON, `report()` if given, else
    {"peak_rss": the process's peak RSS in bytes}.
    """
    for _ in range(3):  # tracing and warm-up
        step()
    print("ready", flush=True)
    for _ in sys.stdin:
        until = time.perf_counter() + 0.1
        while time.perf_counter() < until:
            step()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            step()
            times.append((time.perf_counter() - start) / inner)
        print(sorted(times)[1], flush=True)
    if report is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps({"peak_rss": peak}), flush=True)
    else:
        print(json.dumps(report()), flush=True)


def run_interleaved(commands, rounds):
    """Parent side: {key: argv} -> ({key: median seconds}, {key: report}).

    A report is the JSON object a worker prints when its stdin closes.
    """
    workers = {
        key: subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for key, argv in commands.items()
    }
    for key, proc in workers.items():
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"benchmark worker {key} failed to start")
    samples = {key: [] for key in workers}
    for _ in range(rounds):
        for key, proc in workers.items():
            proc.stdin.write("run\n")
            proc.stdin.flush()
            samples[key].append(float(proc.stdout.readline()))
    reports = {}
    for key, proc in workers.items():
        proc.stdin.close()
        reports[key] = json.loads(proc.stdout.readline())
        proc.wait()
    medians = {key: sorted(v)[len(v) // 2] for key, v in samples.items()}
    return medians, reports


def serve_measuring_memory(tf, step):
    """serve(step) after one traced call; reports the peak tensor bytes above
    what was held before it ({"extra_bytes": ...}, BFC allocator on the CPU)."""
    step()  # trace before measuring memory
    base = tf.config.experimental.get_memory_info("CPU:0")["current"]
    tf.config.experimental.reset_memory_stats("CPU:0")

    def report():
        peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
        return {"extra_bytes": peak - base}

    serve(step, report=report)
