# SPDX-License-Identifier: Apache-2.0
"""The CUDA RNN-T loss (cc/gpu_harness) against torchaudio's, on a GPU.

No TensorFlow: this needs torch and torchaudio with CUDA, and the standalone
harness binary (`make gpu-harness`, or the nvcc command in
cc/gpu_harness/README.md).  It

  1. compares losses and gradients: random logits [B, T, U + 1, V], targets
     and lengths are written to a temporary folder, the harness's `compare`
     mode computes the loss (-score, boundary [0, 0, U_b, T_b]) and its
     gradient, and torchaudio.functional.rnnt_loss (reduction="none", fused
     log-softmax) computes them from the same tensors;
  2. times forward + backward, float32, full logits: the harness's `bench`
     mode (which prints its own details: passes, memory, bandwidth) and
     torchaudio's CUDA loss (torch.cuda.Event timing, medians;
     torch.cuda.max_memory_allocated for its peak, logits included), and
     prints a table;
  3. the same for the loss fused with its joint network: the harness's
     `compare-joint` (loss and the gradients of encoder, predictor, weight
     and bias) against a torch joiner, tanh(e[:, :, None] + p[:, None]) @ W
     + b, followed by torchaudio's loss, then `bench-joint` against that
     torch joiner + torchaudio (time and peak memory, the joiner's hidden
     and logits included), three ways: float32 exact on both sides;
     bfloat16 inputs (ours on tensor cores; torch's joiner in bfloat16,
     its logits cast to float32 for torchaudio, as under mixed precision);
     float32 with TF32 products (ours --products tensor_cores; torch with
     allow_tf32).

Usage:
  python -m benchmarks.bench_gpu --harness build/gpu_harness \\
      [--shapes "8,150,40,500;32,500,100,1024;16,1000,200,4096"] [--repeats 10]
      [--joint-shapes "8,150,40,500,256;32,500,100,1024,640"]

Exit codes: 0 done and the comparison passed, 1 comparison failed, 2 torch,
torchaudio, a CUDA device or the harness missing.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import warnings

DEFAULT_SHAPES = "8,150,40,500;32,500,100,1024;16,1000,200,4096"
DEFAULT_COMPARE_SHAPES = "4,40,10,30;8,150,40,500"
DEFAULT_JOINT_SHAPES = "8,150,40,500,256;32,500,100,1024,640"
DEFAULT_JOINT_COMPARE_SHAPES = "4,40,10,30,16;8,150,40,500,256"
# Loss: max |ours - torchaudio| / max(1, |torchaudio|); gradient: max abs
# difference (both float32: torchaudio's gradient carries the rounding of
# alpha + beta, values in the hundreds at these shapes).
LOSS_TOLERANCE = 1e-4
GRAD_TOLERANCE = 1e-3
# The joint's gradients: max |ours - torch| / max(1, |torch|), sums over
# many cells in float32 on both sides.
JOINT_GRAD_TOLERANCE = 1e-3


def parse_shapes(text, size=4):
    """'B,T,U,V;...' -> [(B, T, U, V), ...] (size 5: B,T,U,V,J)."""
    names = "B,T,U,V,J"[: 2 * size - 1]
    shapes = []
    for item in text.split(";"):
        values = tuple(int(v) for v in item.split(","))
        if len(values) != size or min(values) < 1:
            raise argparse.ArgumentTypeError(f"bad shape {item!r}: need {names}")
        shapes.append(values)
    return shapes


def parse_joint_shapes(text):
    """'B,T,U,V,J;...' -> [(B, T, U, V, J), ...]."""
    return parse_shapes(text, 5)


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--harness", default="build/gpu_harness", help="the built harness binary"
    )
    parser.add_argument(
        "--shapes",
        type=parse_shapes,
        default=parse_shapes(DEFAULT_SHAPES),
        help=f"B,T,U,V;... to time (default {DEFAULT_SHAPES})",
    )
    parser.add_argument(
        "--compare-shapes",
        type=parse_shapes,
        default=parse_shapes(DEFAULT_COMPARE_SHAPES),
        help=f"B,T,U,V;... to compare (default {DEFAULT_COMPARE_SHAPES})",
    )
    parser.add_argument(
        "--joint-shapes",
        type=parse_joint_shapes,
        default=parse_joint_shapes(DEFAULT_JOINT_SHAPES),
        help=f"B,T,U,V,J;... of the joint loss to time (default "
        f"{DEFAULT_JOINT_SHAPES})",
    )
    parser.add_argument(
        "--joint-compare-shapes",
        type=parse_joint_shapes,
        default=parse_joint_shapes(DEFAULT_JOINT_COMPARE_SHAPES),
        help=f"B,T,U,V,J;... of the joint loss to compare (default "
        f"{DEFAULT_JOINT_COMPARE_SHAPES})",
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-bench", action="store_true", help="compare only")
    return parser.parse_args()


def write_raw(path, tensor):
    """The tensor's bytes, row-major (no numpy needed)."""
    tensor = tensor.detach().contiguous().cpu()
    with open(path, "wb") as f:
        size = tensor.numel() * tensor.element_size()
        f.write(ctypes.string_at(tensor.data_ptr(), size))


def read_f32(torch, path, shape):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=torch.float32).reshape(shape)


def random_inputs(torch, shape, blank, seed):
    """Logits on the GPU; int32 targets (never blank) and lengths, with
    sequence 0 at the full lengths (torchaudio requires it)."""
    B, T, U, V = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)
    logits = torch.randn(B, T, U + 1, V, device="cuda", generator=gen)
    targets = torch.randint(0, V - 1, (B, U), device="cuda", generator=gen)
    targets = (targets + (targets >= blank).long()).int()
    logit_lengths = torch.randint(T // 2 + 1, T + 1, (B,), device="cuda", generator=gen)
    target_lengths = torch.randint(1, U + 1, (B,), device="cuda", generator=gen)
    logit_lengths[0], target_lengths[0] = T, U
    return logits, targets, logit_lengths.int(), target_lengths.int()


def rnnt_loss_fn():
    from torchaudio.functional import rnnt_loss

    def loss(*args, **kwargs):
        with warnings.catch_warnings():  # deprecation notices of 2.8 / 2.9
            warnings.simplefilter("ignore")
            return rnnt_loss(*args, **kwargs)

    return loss


def compare(torch, rnnt_loss, harness, shape, blank, seed):
    """Ours vs torchaudio on one random batch; returns True when within the
    tolerances."""
    B, T, U, V = shape
    logits, targets, logit_lengths, target_lengths = random_inputs(
        torch, shape, blank, seed
    )
    with tempfile.TemporaryDirectory() as folder:
        write_raw(os.path.join(folder, "logits.f32"), logits)
        write_raw(os.path.join(folder, "targets.i32"), targets)
        write_raw(os.path.join(folder, "logit_lengths.i32"), logit_lengths)
        write_raw(os.path.join(folder, "target_lengths.i32"), target_lengths)
        with open(os.path.join(folder, "shape.txt"), "w") as f:
            f.write(f"{B} {T} {U} {V} {blank}\n")
        run = subprocess.run(
            [harness, "compare", folder], capture_output=True, text=True
        )
        if run.returncode != 0:
            print(run.stdout + run.stderr, end="")
            print(f"harness compare failed with exit code {run.returncode}")
            return False
        ours_loss = read_f32(torch, os.path.join(folder, "loss.f32"), (B,))
        ours_grad = read_f32(torch, os.path.join(folder, "grad.f32"), logits.shape)

    logits.requires_grad_(True)
    loss = rnnt_loss(
        logits, targets, logit_lengths, target_lengths, blank=blank, reduction="none"
    )
    loss.sum().backward()
    ref_loss = loss.detach().double().cpu()
    ref_grad = logits.grad.double().cpu()
    loss_err = (
        (ours_loss.double() - ref_loss).abs() / ref_loss.abs().clamp(min=1)
    ).max()
    grad_diff = (ours_grad.double() - ref_grad).abs()
    grad_rel = (grad_diff / ref_grad.abs().clamp(min=1)).max()
    ok = bool(loss_err <= LOSS_TOLERANCE and grad_diff.max() <= GRAD_TOLERANCE)
    print(
        f"{'PASS' if ok else 'FAIL'} compare B={B} T={T} U={U} V={V} blank={blank}: "
        f"loss max rel err {loss_err:.2e}, grad max abs err {grad_diff.max():.2e} "
        f"(max rel err {grad_rel:.2e}, |grad| max {ref_grad.abs().max():.2f})"
    )
    return ok


def harness_bench(harness, shapes, repeats):
    """Runs `harness bench`; returns {(B, T, U, V): {field: value}}."""
    text = ";".join(",".join(str(v) for v in shape) for shape in shapes)
    run = subprocess.run(
        [harness, "bench", "--shapes", text, "--repeats", str(repeats)],
        capture_output=True,
        text=True,
    )
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        print(f"harness bench failed with exit code {run.returncode}")
        return {}
    results = {}
    for line in run.stdout.splitlines():
        if not line.startswith("B="):
            continue
        fields = dict(item.split("=", 1) for item in line.split())
        key = tuple(int(fields[k]) for k in ("B", "T", "U", "V"))
        results[key] = fields
    return results


def torchaudio_bench(torch, rnnt_loss, shape, repeats):
    """Median ms of forward + backward and peak MB (logits included), or None
    when it runs out of memory."""
    B, T, U, V = shape
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()

    def run():
        logits, targets, logit_lengths, target_lengths = random_inputs(
            torch, shape, 0, 0
        )
        logit_lengths.fill_(T)
        target_lengths.fill_(U)
        logits.requires_grad_(True)
        times = []
        for i in range(repeats + 2):  # two warm-up runs
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            logits.grad = None
            start.record()
            loss = rnnt_loss(
                logits, targets, logit_lengths, target_lengths, blank=0, reduction="sum"
            )
            loss.backward()
            stop.record()
            stop.synchronize()
            if i >= 2:
                times.append(start.elapsed_time(stop))
        return statistics.median(times), torch.cuda.max_memory_allocated() / 1e6

    result = None
    try:
        result = run()
    except RuntimeError as error:  # torch.cuda.OutOfMemoryError is one
        if "out of memory" not in str(error).lower():
            raise
    torch.cuda.empty_cache()  # run()'s tensors are gone by now
    return result


def random_joint_inputs(torch, shape, blank, seed):
    """Joint inputs on the GPU (encoder [B, T, J], predictor [B, U + 1, J],
    weight [J, V], bias [V]) and targets and lengths as random_inputs."""
    B, T, U, V, J = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)
    logit_lengths = torch.randint(T // 2 + 1, T + 1, (B,), device="cuda", generator=gen)
    target_lengths = torch.randint(1, U + 1, (B,), device="cuda", generator=gen)
    logit_lengths[0], target_lengths[0] = T, U  # torchaudio requires it
    targets = torch.randint(0, V - 1, (B, U), device="cuda", generator=gen)
    targets = (targets + (targets >= blank).long()).int()
    encoder = torch.rand(B, T, J, device="cuda", generator=gen) * 2 - 1
    predictor = torch.rand(B, U + 1, J, device="cuda", generator=gen) * 2 - 1
    limit = (3.0 / J) ** 0.5
    weight = (torch.rand(J, V, device="cuda", generator=gen) * 2 - 1) * limit
    bias = (torch.rand(V, device="cuda", generator=gen) * 2 - 1) * 0.1
    lengths = logit_lengths.int(), target_lengths.int()
    return [encoder, predictor, weight, bias], targets, *lengths


def torch_joint_loss(rnnt_loss, joint, targets, logit_lengths, target_lengths, blank):
    """The unfused path: the torch joiner's logits [B, T, U + 1, V], then
    torchaudio's loss (reduction "none"; 16-bit logits cast to float32)."""
    encoder, predictor, weight, bias = joint
    hidden = (encoder[:, :, None] + predictor[:, None]).tanh()
    logits = (hidden @ weight + bias).float()
    return rnnt_loss(
        logits, targets, logit_lengths, target_lengths, blank=blank, reduction="none"
    )


def compare_joint(torch, rnnt_loss, harness, shape, blank, seed):
    """Our joint loss (harness compare-joint) vs the torch joiner +
    torchaudio on one random batch: the losses and the four gradients."""
    B, T, U, V, J = shape
    joint, targets, logit_lengths, target_lengths = random_joint_inputs(
        torch, shape, blank, seed
    )
    names = ["d_encoder", "d_predictor", "d_weight", "d_bias"]
    with tempfile.TemporaryDirectory() as folder:
        for name, x in zip(
            ["encoder", "predictor", "weight", "bias"], joint, strict=True
        ):
            write_raw(os.path.join(folder, f"{name}.f32"), x)
        write_raw(os.path.join(folder, "targets.i32"), targets)
        write_raw(os.path.join(folder, "logit_lengths.i32"), logit_lengths)
        write_raw(os.path.join(folder, "target_lengths.i32"), target_lengths)
        with open(os.path.join(folder, "shape.txt"), "w") as f:
            f.write(f"{B} {T} {U} {V} {J} {blank}\n")
        run = subprocess.run(
            [harness, "compare-joint", folder], capture_output=True, text=True
        )
        if run.returncode != 0:
            print(run.stdout + run.stderr, end="")
            print(f"harness compare-joint failed with exit code {run.returncode}")
            return False
        ours_loss = read_f32(torch, os.path.join(folder, "loss.f32"), (B,))
        ours = [
            read_f32(torch, os.path.join(folder, f"{name}.f32"), x.shape)
            for name, x in zip(names, joint, strict=True)
        ]

    for x in joint:
        x.requires_grad_(True)
    loss = torch_joint_loss(
        rnnt_loss, joint, targets, logit_lengths, target_lengths, blank
    )
    loss.sum().backward()
    ref_loss = loss.detach().double().cpu()
    loss_err = (
        (ours_loss.double() - ref_loss).abs() / ref_loss.abs().clamp(min=1)
    ).max()
    ok = bool(loss_err <= LOSS_TOLERANCE)
    errors = []
    for name, got, x in zip(names, ours, joint, strict=True):
        ref = x.grad.double().cpu()
        err = ((got.double() - ref).abs() / ref.abs().clamp(min=1)).max()
        ok &= bool(err <= JOINT_GRAD_TOLERANCE)
        errors.append(f"{name} {err:.2e}")
    print(
        f"{'PASS' if ok else 'FAIL'} compare-joint B={B} T={T} U={U} V={V} J={J} "
        f"blank={blank}: loss max rel err {loss_err:.2e}, gradients max rel err "
        + ", ".join(errors)
    )
    return ok


def harness_bench_joint(harness, shapes, repeats, extra=()):
    """Runs `harness bench-joint` (with `extra` flags); returns
    {(B, T, U, V, J): {field: value}}."""
    text = ";".join(",".join(str(v) for v in shape) for shape in shapes)
    run = subprocess.run(
        [harness, "bench-joint", "--shapes", text, "--repeats", str(repeats), *extra],
        capture_output=True,
        text=True,
    )
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        print(f"harness bench-joint failed with exit code {run.returncode}")
        return {}
    results = {}
    for line in run.stdout.splitlines():
        if not line.startswith("B="):
            continue
        fields = dict(item.split("=", 1) for item in line.split())
        key = tuple(int(fields[k]) for k in ("B", "T", "U", "V", "J"))
        results[key] = fields
    return results


def torch_joint_bench(torch, rnnt_loss, shape, repeats, dtype=None):
    """Median ms of forward + backward of the torch joiner + torchaudio, and
    peak MB (inputs included), or None when it runs out of memory; the
    joiner's inputs in `dtype` (default float32)."""
    B, T, U, V, J = shape
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()

    def run():
        joint, targets, logit_lengths, target_lengths = random_joint_inputs(
            torch, shape, 0, 0
        )
        if dtype is not None:
            joint = [x.to(dtype) for x in joint]
        logit_lengths.fill_(T)
        target_lengths.fill_(U)
        for x in joint:
            x.requires_grad_(True)
        times = []
        for i in range(repeats + 2):  # two warm-up runs
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            for x in joint:
                x.grad = None
            start.record()
            loss = torch_joint_loss(
                rnnt_loss, joint, targets, logit_lengths, target_lengths, 0
            )
            loss.sum().backward()
            stop.record()
            stop.synchronize()
            if i >= 2:
                times.append(start.elapsed_time(stop))
        return statistics.median(times), torch.cuda.max_memory_allocated() / 1e6

    result = None
    try:
        result = run()
    except RuntimeError as error:  # torch.cuda.OutOfMemoryError is one
        if "out of memory" not in str(error).lower():
            raise
    torch.cuda.empty_cache()
    return result


def print_table(title, header, rows):
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for row in [header, *rows]:
        print("  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)))


# (title, our bench-joint flags, torch's dtype, torch's allow_tf32)
JOINT_VARIANTS = (
    ("float32, exact products", (), None, False),
    ("bfloat16 inputs, tensor cores", ("--dtype", "bfloat16"), "bfloat16", False),
    ("float32, TF32 products", ("--products", "tensor_cores"), None, True),
)


def joint_table(torch, rnnt_loss, args, variant):
    """Ours (bench-joint) vs the torch joiner + torchaudio, one row a shape."""
    title, extra, dtype, tf32 = variant
    ours = harness_bench_joint(args.harness, args.joint_shapes, args.repeats, extra)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    rows = []
    for shape in args.joint_shapes:
        theirs = torch_joint_bench(
            torch,
            rnnt_loss,
            shape,
            args.repeats,
            getattr(torch, dtype) if dtype else None,
        )
        mine = ours.get(shape)
        our_ms = float(mine["total_ms"]) if mine else None
        our_mb = float(mine["peak_mb"]) if mine else None
        their_ms, their_mb = theirs if theirs else (None, None)
        rows.append(
            (
                "x".join(str(v) for v in shape),
                f"{our_ms:.2f}" if our_ms else "-",
                f"{their_ms:.2f}" if their_ms else "OOM",
                f"{their_ms / our_ms:.2f}x" if our_ms and their_ms else "-",
                f"{our_mb:.0f}" if our_mb else "-",
                f"{their_mb:.0f}" if their_mb else "OOM",
                f"{our_mb / their_mb:.3f}" if our_mb and their_mb else "-",
            )
        )
    header = (
        "B x T x U x V x J",
        "ours ms",
        "torch+torchaudio ms",
        "ratio (theirs/ours)",
        "ours peak MB",
        "theirs peak MB",
        "memory ours/theirs",
    )
    print_table(
        f"joint + loss, forward + backward, {title} (medians; peaks include the "
        f"inputs; torch matmul allow_tf32={tf32}):",
        header,
        rows,
    )


def main():
    args = parse_args()
    try:
        import torch
        import torchaudio
    except ImportError as error:
        print(f"needs torch and torchaudio: {error}")
        return 2
    if not torch.cuda.is_available():
        print("no CUDA device visible to torch")
        return 2
    if not (os.path.isfile(args.harness) and os.access(args.harness, os.X_OK)):
        print(f"harness binary {args.harness} not found: run `make gpu-harness`")
        return 2
    print(
        f"torch {torch.__version__}, torchaudio {torchaudio.__version__}, "
        f"{torch.cuda.get_device_name()}"
    )
    rnnt_loss = rnnt_loss_fn()

    ok = True
    for i, shape in enumerate(args.compare_shapes):
        blank = 0 if i % 2 == 0 else shape[3] - 1
        ok &= compare(torch, rnnt_loss, args.harness, shape, blank, args.seed + i)
    for i, shape in enumerate(args.joint_compare_shapes):
        blank = 0 if i % 2 == 0 else shape[3] - 1
        ok &= compare_joint(torch, rnnt_loss, args.harness, shape, blank, args.seed + i)
    torch.cuda.empty_cache()
    if args.no_bench:
        return 0 if ok else 1

    # The harness first, while this process holds little GPU memory.
    ours = harness_bench(args.harness, args.shapes, args.repeats)
    rows = []
    for shape in args.shapes:
        theirs = torchaudio_bench(torch, rnnt_loss, shape, args.repeats)
        mine = ours.get(shape)
        B, T, U, V = shape
        logits_mb = B * T * (U + 1) * V * 4 / 1e6
        our_ms = float(mine["total_ms"]) if mine else None
        their_ms, their_mb = theirs if theirs else (None, None)
        rows.append(
            (
                f"{B}x{T}x{U}x{V}",
                f"{our_ms:.2f}" if our_ms else "-",
                f"{their_ms:.2f}" if their_ms else "OOM",
                f"{their_ms / our_ms:.2f}x" if our_ms and their_ms else "-",
                mine["peak_mb"] if mine else "-",
                f"{their_mb:.0f}" if their_mb else "OOM",
                f"{2 * logits_mb:.0f}",
            )
        )
    header = (
        "B x T x U x V",
        "ours ms",
        "torchaudio ms",
        "ratio (ta/ours)",
        "ours peak MB",
        "torchaudio peak MB",
        "logits+grad MB",
    )
    print_table("forward + backward, float32, full logits (medians):", header, rows)
    for variant in JOINT_VARIANTS:
        joint_table(torch, rnnt_loss, args, variant)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
