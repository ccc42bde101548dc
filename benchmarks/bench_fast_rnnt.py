# SPDX-License-Identifier: Apache-2.0
"""Our RNN-T losses side by side with k2's fast_rnnt 1.3 (PyTorch, CPU).

At (B, T, S, V) = (8, 300, 60, 500), float32, 2 threads, forward + backward,
reduction "sum", boundary rows (0, 0, S, T), blank 0:

  * simple: rnnt_loss_simple(lm [B, S + 1, V], am [B, T, V]), gradients of
    am and lm;
  * pruned: the pruned recipe, s_range 5: rnnt_loss_simple with
    return_grad, get_rnnt_prune_ranges, do_rnnt_pruning, a joiner that is a
    plain add (am_pruned + lm_pruned, to isolate the loss), rnnt_loss_pruned;
    loss 0.5 * simple + pruned, gradients of am and lm;
  * full: rnnt_loss on logits [B, T, S + 1, V], gradient of the logits.

The inputs are made once (seeded numpy, a temporary .npz) and read by every
worker, so both sides compute the same thing: the losses and the gradients
(norm, and dot product with the input) must agree to 1e-4 relative, and
the pruning ranges in all but a few frames (float32 near-ties), else the
run fails (exit status 1). Workers are interleaved round by round
(benchmarks/_harness.py); the share of the CPUs other processes used
meanwhile is printed, since torch's OpenMP threads slow down many-fold
(20x seen) when another process takes one of the two cores.

fast_rnnt runs in its own venv (build it with `bash
benchmarks/fast_rnnt_env.sh`), whose python comes from --fast_rnnt_python
or FAST_RNNT_PYTHON; without it the benchmark says so and skips. This
module runs in both interpreters (the fast_rnnt venv has no TensorFlow and
no absl), so it parses flags with argparse.

--profile then times the stages of each loss in each library (cumulative
forward prefixes with autograd on, as in training, then forward + backward;
and the recursion alone on given px, py), one library after the other.

Usage: python -m benchmarks.bench_fast_rnnt [--rounds 10] [--profile]
       [--fast_rnnt_python /work/fast_rnnt_venv/bin/python]
"""

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks import _harness

SHAPE = (8, 300, 60, 500)  # (B, T, S, V)
S_RANGE = 5
BLANK = 0
THREADS = 2
RTOL = 1e-4
WHATS = {
    "simple": "rnnt_loss_simple",
    "pruned": f"pruned recipe (s_range {S_RANGE}, additive joiner)",
    "full": "rnnt_loss, logits [B, T, S + 1, V]",
}


def make_inputs(path):
    """Writes am, lm, logits, symbols and boundary (seeded) to `path`."""
    B, T, S, V = SHAPE
    rng = np.random.default_rng(0)
    np.savez(
        path,
        am=rng.standard_normal((B, T, V), dtype=np.float32),
        lm=rng.standard_normal((B, S + 1, V), dtype=np.float32),
        logits=rng.standard_normal((B, T, S + 1, V), dtype=np.float32),
        symbols=rng.integers(1, V, size=(B, S), dtype=np.int64),
        boundary=np.tile(np.array([[0, 0, S, T]], dtype=np.int64), (B, 1)),
    )


def _summary(values, grads, inputs):
    """JSON-able results of one step: values, ranges, gradient norms and dots."""
    out = {}
    for key, value in values.items():
        value = np.asarray(value)
        out[key] = value.tolist() if value.dtype.kind in "iu" else float(value)
    for key, grad in grads.items():
        grad = np.asarray(grad, dtype=np.float64)
        out[f"|d {key}|"] = float(np.linalg.norm(grad))
        out[f"d {key} . {key}"] = float(np.sum(grad * inputs[key]))
        out[f"|{key}|"] = float(np.linalg.norm(inputs[key].astype(np.float64)))
    return out


# --- fast_rnnt (PyTorch) --------------------------------------------------


def _torch_functions(data):
    """{name: fn(upto)}: fn runs the loss up to a stage, returns (values, grads).

    upto: "logprobs" / "ranges" / "pruning" (forward prefixes), "forward",
    or "backward" (forward + backward). Autograd is on throughout.
    """
    import fast_rnnt
    import torch

    torch.set_num_threads(THREADS)
    torch.set_num_interop_threads(THREADS)
    am = torch.from_numpy(data["am"]).requires_grad_()
    lm = torch.from_numpy(data["lm"]).requires_grad_()
    logits = torch.from_numpy(data["logits"]).requires_grad_()
    symbols = torch.from_numpy(data["symbols"])
    boundary = torch.from_numpy(data["boundary"])

    def backward(loss, values, **inputs):
        for x in inputs.values():
            x.grad = None
        loss.backward()
        return values, {key: x.grad.numpy() for key, x in inputs.items()}

    def simple(upto):
        if upto == "logprobs":
            px, py = fast_rnnt.get_rnnt_logprobs(
                lm, am, symbols, BLANK, "regular", boundary
            )
            return {"px[0, 0, 0]": px[0, 0, 0].item()}, {}
        loss = fast_rnnt.rnnt_loss_simple(
            lm, am, symbols, BLANK, boundary, reduction="sum"
        )
        values = {"simple": loss.item()}
        if upto == "forward":
            return values, {}
        return backward(loss, values, am=am, lm=lm)

    def pruned(upto):
        loss_s, (px_grad, py_grad) = fast_rnnt.rnnt_loss_simple(
            lm, am, symbols, BLANK, boundary, reduction="sum", return_grad=True
        )
        values = {"simple": loss_s.item()}
        if upto == "logprobs":
            return values, {}
        ranges = fast_rnnt.get_rnnt_prune_ranges(px_grad, py_grad, boundary, S_RANGE)
        values["ranges"] = ranges.numpy()
        if upto == "ranges":
            return values, {}
        am_pruned, lm_pruned = fast_rnnt.do_rnnt_pruning(am, lm, ranges)
        joined = am_pruned + lm_pruned
        if upto == "pruning":
            return values, {}
        loss_p = fast_rnnt.rnnt_loss_pruned(
            joined, symbols, ranges, BLANK, boundary, reduction="sum"
        )
        values["pruned"] = loss_p.item()
        if upto == "forward":
            return values, {}
        return backward(0.5 * loss_s + loss_p, values, am=am, lm=lm)

    def full(upto):
        loss = fast_rnnt.rnnt_loss(logits, symbols, BLANK, boundary, reduction="sum")
        values = {"full": loss.item()}
        if upto == "forward":
            return values, {}
        return backward(loss, values, logits=logits)

    def recursion():
        px, py = fast_rnnt.get_rnnt_logprobs(
            lm.detach(), am.detach(), symbols, BLANK, "regular", boundary
        )
        return lambda: (
            fast_rnnt.mutual_information_recursion(px, py, boundary, return_grad=True)[
                0
            ]
            .sum()
            .item()
        )

    return {"simple": simple, "pruned": pruned, "full": full}, recursion


# --- ours (TensorFlow) ----------------------------------------------------


def _tf_functions(data):
    """As _torch_functions, with tf_transducer.ops in tf.functions."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(THREADS)
    from tf_transducer import ops

    am, lm, logits, symbols, boundary = (
        tf.constant(data[key]) for key in ("am", "lm", "logits", "symbols", "boundary")
    )

    def with_grads(upto, loss_fn, **inputs):
        """loss_fn() -> (loss, values); the gradients too when upto is backward."""
        if upto != "backward":
            return loss_fn()[1], {}
        with tf.GradientTape() as tape:
            tape.watch(list(inputs.values()))
            loss, values = loss_fn()
        grads = tape.gradient(loss, inputs)
        return values, grads

    def simple(upto):
        if upto == "logprobs":
            px, _ = ops.get_rnnt_logprobs(lm, am, symbols, BLANK, boundary=boundary)
            return {"px[0, 0, 0]": px[0, 0, 0]}, {}

        def loss_fn():
            loss = ops.rnnt_loss_simple(
                lm, am, symbols, BLANK, boundary, reduction="sum"
            )
            return loss, {"simple": loss}

        return with_grads(upto, loss_fn, am=am, lm=lm)

    def pruned(upto):
        def loss_fn():
            loss_s, (px_grad, py_grad) = ops.rnnt_loss_simple(
                lm, am, symbols, BLANK, boundary, reduction="sum", return_grad=True
            )
            values = {"simple": loss_s}
            if upto == "logprobs":
                return loss_s, values
            ranges = ops.get_rnnt_prune_ranges(px_grad, py_grad, boundary, S_RANGE)
            values["ranges"] = ranges
            if upto == "ranges":
                return loss_s, values
            am_pruned, lm_pruned = ops.do_rnnt_pruning(am, lm, ranges)
            joined = am_pruned + lm_pruned
            if upto == "pruning":
                values["joined[0, 0, 0, 0]"] = joined[0, 0, 0, 0]
                return loss_s, values
            loss_p = ops.rnnt_loss_pruned(
                joined, symbols, ranges, BLANK, boundary, reduction="sum"
            )
            values["pruned"] = loss_p
            return 0.5 * loss_s + loss_p, values

        return with_grads(upto, loss_fn, am=am, lm=lm)

    def full(upto):
        def loss_fn():
            loss = ops.rnnt_loss(logits, symbols, BLANK, boundary, reduction="sum")
            return loss, {"full": loss}

        return with_grads(upto, loss_fn, logits=logits)

    def compiled(fn):
        traced = {}

        def run(upto):
            if upto not in traced:
                traced[upto] = tf.function(lambda: fn(upto))
            values, grads = traced[upto]()
            # The gradients stay tensors: .numpy() would copy them.
            return {k: v.numpy() for k, v in values.items()}, grads

        return run

    def recursion():
        px, py = ops.get_rnnt_logprobs(lm, am, symbols, BLANK, boundary=boundary)
        step = tf.function(
            lambda: tf.reduce_sum(
                ops.mutual_information_recursion(px, py, boundary, return_grad=True)[0]
            )
        )
        return lambda: step().numpy()

    functions = {
        name: compiled(fn)
        for name, fn in (("simple", simple), ("pruned", pruned), ("full", full))
    }
    return functions, recursion


# --- workers and parent ---------------------------------------------------

STAGES = {  # (up to, what that adds), cumulative
    "simple": (
        ("logprobs", "get_rnnt_logprobs (px, py)"),
        ("forward", "rnnt_loss_simple forward (+ checks, recursion)"),
        ("backward", "+ backward"),
    ),
    "pruned": (
        ("logprobs", "rnnt_loss_simple, return_grad (forward)"),
        ("ranges", "+ get_rnnt_prune_ranges"),
        ("pruning", "+ do_rnnt_pruning, am + lm"),
        ("forward", "+ rnnt_loss_pruned forward"),
        ("backward", "+ backward of both losses"),
    ),
    "full": (("forward", "rnnt_loss forward"), ("backward", "+ backward")),
}


def _functions(impl, data):
    return (_torch_functions if impl == "fast_rnnt" else _tf_functions)(data)


def _serve(impl, what, inputs_path):
    """Timing worker (see _harness.serve); reports the results of a step."""
    data = dict(np.load(inputs_path))
    fn = _functions(impl, data)[0][what]
    _harness.serve(
        lambda: fn("backward"),
        report=lambda: _summary(*fn("backward"), data),
    )


def _median_ms(step, n=10):
    for _ in range(3):
        step()
    until = time.perf_counter() + 0.1
    while time.perf_counter() < until:
        step()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return sorted(times)[n // 2] * 1e3


def _profile(impl, inputs_path):
    """Prints {what: {stage: ms}} of one library as JSON."""
    data = dict(np.load(inputs_path))
    functions, recursion = _functions(impl, data)
    result = {}
    for what, stages in STAGES.items():
        fn = functions[what]
        result[what] = {
            upto: _median_ms(functools.partial(fn, upto)) for upto, _ in stages
        }
    result["recursion"] = {"alone": _median_ms(recursion())}
    print(json.dumps(result), flush=True)


def _disagreements(ours, theirs):
    """Lines naming every value or gradient that differs by more than RTOL."""
    lines = []
    for key, want in theirs.items():
        if isinstance(want, list) or (key.startswith("|") and key[1] != "d"):
            continue  # the ranges (see _ranges_note), the inputs' norms
        got = ours.get(key)
        scale = abs(want)
        if " . " in key:  # a dot product, relative to |grad| |input|
            grad, x = key.split(" . ")
            scale = theirs[f"|{grad}|"] * theirs[f"|{x}|"]
        if got is None or abs(got - want) > RTOL * scale:
            lines.append(f"{key}: ours {got}, fast_rnnt {want}")
    return lines


def _ranges_note(ours, theirs):
    """(note, ok): in how many frames the pruning ranges differ.

    The window is an argmax over sums of occupations, and float32 rounding
    decides near-ties (scores within ~1e-7) either way; a frame's choice also
    moves its neighbours' (the ranges are made monotonic). A few frames may
    therefore differ; the losses must still agree. More than 1% is a failure.
    """
    a, b = np.array(ours["ranges"]), np.array(theirs["ranges"])
    differ = int(np.sum(np.any(a != b, axis=-1)))
    frames = a.shape[0] * a.shape[1]
    return f"ranges differ in {differ} of {frames} frames", differ <= 0.01 * frames


def _cpu_seconds():
    """(busy CPU seconds of the machine, of this process and its reaped children)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return busy / os.sysconf("SC_CLK_TCK"), own


def _others_share(fn):
    """(fn(), the share of all CPUs that other processes used meanwhile)."""
    busy, own = _cpu_seconds()
    start = time.perf_counter()
    result = fn()
    busy_end, own_end = _cpu_seconds()
    wall = (time.perf_counter() - start) * os.cpu_count()
    return result, max(0.0, (busy_end - busy) - (own_end - own)) / wall


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="Timings per case.")
    parser.add_argument(
        "--fast_rnnt_python",
        default=os.environ.get("FAST_RNNT_PYTHON"),
        help="python of the venv with fast_rnnt (default $FAST_RNNT_PYTHON).",
    )
    parser.add_argument("--profile", action="store_true", help="Per-stage times too.")
    parser.add_argument("--worker", help="Internal: 'impl,what' or 'impl,profile'.")
    parser.add_argument("--inputs", help="Internal: the inputs' .npz.")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error(f"--rounds must be >= 3, got {args.rounds}")
    return args


def _fast_rnnt_python(path):
    """The fast_rnnt venv's python, or None after saying why it is missing."""
    hint = "build it with `bash benchmarks/fast_rnnt_env.sh`"
    if not path:
        print(f"Skipped: no --fast_rnnt_python or FAST_RNNT_PYTHON; {hint}.")
        return None
    if not os.access(path, os.X_OK):
        print(f"Skipped: --fast_rnnt_python {path!r} is not an executable; {hint}.")
        return None
    found = subprocess.run([path, "-c", "import fast_rnnt"], capture_output=True)
    if found.returncode:
        print(f"Skipped: {path} cannot import fast_rnnt; {hint}.")
        return None
    return path


def _print_table(seconds, reports, rounds, others):
    """Prints the times and the agreement; returns whether everything agrees."""
    machine = platform.processor() or platform.machine()
    print(
        f"Machine: {machine}, {os.cpu_count()} cores, {THREADS} threads; medians of "
        f"{rounds} interleaved rounds; (B, T, S, V) = {SHAPE}, float32, "
        f"forward + backward. Other processes used {others:.0%} of the CPUs "
        "meanwhile (torch's OpenMP threads slow down many-fold when another "
        "process takes a core: rerun on a quiet machine if this is not ~0%).\n"
    )
    print("| what | ours ms | fast_rnnt 1.3 ms | ours / fast_rnnt |")
    print("| --- | --- | --- | --- |")
    for what, name in WHATS.items():
        ours, theirs = seconds["ours", what], seconds["fast_rnnt", what]
        print(
            f"| {name} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | {ours / theirs:.2f} |"
        )
    agree = True
    print(f"\nSame results (to {RTOL:g} relative):")
    for what in WHATS:
        ours, theirs = reports["ours", what], reports["fast_rnnt", what]
        bad = _disagreements(ours, theirs)
        notes = []
        if "ranges" in theirs:
            note, ok = _ranges_note(ours, theirs)
            notes.append(note)
            if not ok:
                bad.append(note)
        agree &= not bad
        shown = ", ".join(
            f"{k} {v:.6g}"
            for k, v in theirs.items()
            if not isinstance(v, list) and (not k.startswith("|") or k[1] == "d")
        )
        verdict = "MISMATCH: " + "; ".join(bad) if bad else "yes"
        print(f"- {what}: {verdict} ({'; '.join([shown, *notes])})")
    return agree


def _print_profiles(profiles, others):
    """Prints the per-stage times of both libraries."""
    print(
        "\nStages (ms, medians of 10, one library after the other; cumulative, "
        f"with the stage's own share; other processes used {others:.0%} of the "
        "CPUs):\n"
    )
    print("| loss | up to | ours | fast_rnnt 1.3 |")
    print("| --- | --- | --- | --- |")
    for what, stages in STAGES.items():
        previous = dict.fromkeys(profiles, 0.0)
        for upto, name in stages:
            cells = []
            for impl, profile in profiles.items():
                ms = profile[what][upto]
                cells.append(f"{ms:.1f} (+{ms - previous[impl]:.1f})")
                previous[impl] = ms
            print(f"| {what} | {name} | {' | '.join(cells)} |")
    cells = " | ".join(f"{p['recursion']['alone']:.1f}" for p in profiles.values())
    print(f"| recursion | mutual_information_recursion alone | {cells} |")


def main(argv):
    args = _parse(argv)
    if args.worker:
        impl, what = args.worker.split(",")
        if what == "profile":
            _profile(impl, args.inputs)
        else:
            _serve(impl, what, args.inputs)
        return 0
    python = _fast_rnnt_python(args.fast_rnnt_python)
    if python is None:
        return 0
    pythons = {"ours": sys.executable, "fast_rnnt": python}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "inputs.npz")
        make_inputs(inputs)

        def command(impl, what):
            return [
                pythons[impl], "-m", __spec__.name,
                f"--worker={impl},{what}", f"--inputs={inputs}",
            ]  # fmt: skip

        commands = {(i, w): command(i, w) for w in WHATS for i in pythons}
        (seconds, reports), others = _others_share(
            lambda: _harness.run_interleaved(commands, args.rounds)
        )
        agree = _print_table(seconds, reports, args.rounds, others)

        def profile(impl):
            run = subprocess.run(
                command(impl, "profile"), cwd=_harness.ROOT, capture_output=True,
                text=True, check=True,
            )  # fmt: skip
            return json.loads(run.stdout.strip().splitlines()[-1])

        if args.profile:  # one after the other, not side by side
            profiles, others = _others_share(
                lambda: {impl: profile(impl) for impl in pythons}
            )
            _print_profiles(profiles, others)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
