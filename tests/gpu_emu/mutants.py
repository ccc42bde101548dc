# SPDX-License-Identifier: Apache-2.0
"""Plants bugs in a scratch copy of the CUDA kernels; `make gpu-emu-check` must
fail on each (a harness that cannot fail is no check).

Each mutant is one exact text replacement in one file of cc/ (the script
stops if its text is not found exactly once, so that a change to the kernels
cannot silently turn a mutant into a no-op).  The scratch copy starts from
this checkout's `make gpu-emu-check` objects (copied with their times), so a
mutant recompiles only what its file touches, and `check` stops at its first
failing case (GPU_EMU_CHECK_FLAGS=--fail-fast).  One line per mutant says what
caught it: a sanitizer, an emulator report, or the harness's comparison.

Usage (from the repository root, after `make gpu-emu-check`):
  python3 tests/gpu_emu/mutants.py [--jobs N] [--keep] [NAME ...]
"""

import argparse
import concurrent.futures
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OBJECTS = os.path.join("build", "gpu_emu", "asan")


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    old: str
    new: str


MUTANTS = (
    Mutant(
        "gradient kernel's row bound off by one",
        "cc/kernels/gpu/rnnt_loss.cu",
        "  if (row >= p.B * p.T_len * p.R) return;\n",
        "  if (row > p.B * p.T_len * p.R) return;\n",
    ),
    Mutant(
        "GEMM reads its tiles without the barrier after loading them",
        "cc/kernels/gpu/rnnt_joint.cu",
        "      bs[k][n] = inside ? b.At(k0 + k, n0 + n) : T(0);\n"
        "    }\n"
        "    __syncthreads();\n",
        "      bs[k][n] = inside ? b.At(k0 + k, n0 + n) : T(0);\n    }\n",
    ),
    Mutant(
        "a row's max reduced over half a warp",
        "cc/kernels/gpu/warp_row.h",
        "  T max = LaneMax(x, C, lane, kWarp, &nan);\n"
        "  for (int offset = kWarp / 2; offset > 0; offset /= 2) {\n",
        "  T max = LaneMax(x, C, lane, kWarp, &nan);\n"
        "  for (int offset = kWarp / 4; offset > 0; offset /= 2) {\n",
    ),
    Mutant(
        "MI recursion runs ahead of the previous diagonal",
        "cc/kernels/gpu/mutual_information.cu",
        "      mi_internal::ForwardCell(p, b, k, s);\n    }\n    __syncthreads();\n",
        "      mi_internal::ForwardCell(p, b, k, s);\n    }\n",
    ),
    Mutant(
        "tensor-core GEMM swaps the warp's two column fragments",
        "cc/kernels/gpu/rnnt_joint.cu",
        "wmma::load_matrix_sync(fb[j], bs + kk * kLdb + wn + 16 * j, kLdb);",
        "wmma::load_matrix_sync(fb[j], bs + kk * kLdb + wn + 16 * (1 - j), kLdb);",
    ),
    Mutant(
        "tensor-core GEMM reads its staged results without __syncwarp",
        "cc/kernels/gpu/rnnt_joint.cu",
        "      wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);\n"
        "      __syncwarp();\n",
        "      wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);\n",
    ),
    Mutant(
        "encoder gradient sums the next row",
        "cc/kernels/gpu/rnnt_joint.cu",
        "sum += da[(pc.first_row + r) * J + j];",
        "sum += da[(pc.first_row + r + 1) * J + j];",
    ),
    Mutant(
        "row shuffles leave lane 31 out of their mask",
        "cc/kernels/gpu/warp_row.h",
        "constexpr unsigned kFullMask = 0xffffffffu;",
        "constexpr unsigned kFullMask = 0x7fffffffu;",
    ),
    Mutant(
        "TDT lattice chains a frame's zero-duration steps before summing its nodes",
        "cc/kernels/gpu/tdt_loss.cu",
        "    __syncthreads();\n    if (first == 0) {  // the zero-duration label"
        " steps, up",
        "    if (first == 0) {  // the zero-duration label steps, up",
    ),
    Mutant(
        "exp's 2^n shifted in a signed integer (undefined on NaN input)",
        "cc/kernels/log_space_math.h",
        "  const T scale = BitCast<T>(static_cast<UInt>(\n"
        "      (n_bits + UInt(Tr::kExponentBias)) << Tr::kMantissaBits));\n",
        "  const T scale = BitCast<T>(static_cast<UInt>(\n"
        "      static_cast<typename Tr::Int>(n_bits + UInt(Tr::kExponentBias))\n"
        "      << Tr::kMantissaBits));\n",
    ),
)


def harness_part(output: str) -> str:
    """The output from the harness's start on (the self-test before it
    prints the emulator reports it expects)."""
    start = output.find("device 0:")
    return output[start:] if start >= 0 else output


def what_caught(output: str) -> str:
    """The first kind of report in a failed run's output."""
    kinds = (
        ("AddressSanitizer", "AddressSanitizer"),
        ("runtime error:", "UndefinedBehaviorSanitizer"),
        ("ThreadSanitizer", "ThreadSanitizer"),
        ("gpu_emu:", "emulator report"),
        ("\nFAIL ", "harness comparison"),
        ("error:", "compile error"),
    )
    found = [(output.find(key), label) for key, label in kinds if key in output]
    return min(found)[1] if found else "non-zero exit"


def report_line(output: str, label: str) -> str:
    """The line of the output that says why the run failed."""
    keys = {
        "AddressSanitizer": "ERROR: AddressSanitizer",
        "UndefinedBehaviorSanitizer": "runtime error:",
        "ThreadSanitizer": "WARNING: ThreadSanitizer",
        "emulator report": "gpu_emu:",
        "harness comparison": "FAIL ",
    }
    key = keys.get(label)
    for line in output.splitlines():
        if key and key in line and "swapcontext" not in line:
            return line.strip()[:150]
    return output.strip().splitlines()[-1][:150] if output.strip() else ""


def scratch_copy(where: str) -> None:
    """cc/, the Makefile and the gpu-emu-check objects, times kept."""
    shutil.copytree(os.path.join(ROOT, "cc"), os.path.join(where, "cc"))
    shutil.copy2(os.path.join(ROOT, "Makefile"), where)
    objects = os.path.join(ROOT, OBJECTS)
    if not os.path.isdir(objects):
        raise SystemExit(f"{objects} is missing: run `make gpu-emu-check` first")
    shutil.copytree(objects, os.path.join(where, OBJECTS))


def apply(where: str, mutant: Mutant) -> None:
    path = os.path.join(where, mutant.path)
    with open(path) as f:
        text = f.read()
    count = text.count(mutant.old)
    if count != 1:
        raise SystemExit(
            f"mutant {mutant.name!r}: its text occurs {count} times in "
            f"{mutant.path} (expected once): update tests/gpu_emu/mutants.py"
        )
    with open(path, "w") as f:
        f.write(text.replace(mutant.old, mutant.new))


def run_mutant(mutant: Mutant, keep: bool) -> tuple[bool, str]:
    """(caught, the lines to print) for one mutant, in a scratch copy."""
    where = tempfile.mkdtemp(prefix="tt_mutant_")
    try:
        scratch_copy(where)
        apply(where, mutant)
        start = time.monotonic()
        run = subprocess.run(
            [
                "make",
                "--no-print-directory",
                "-C",
                where,
                "gpu-emu-check",
                "GPU_EMU_JOBS=1",
                "GPU_EMU_CHECK_FLAGS=--fail-fast",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=900,
        )
        seconds = time.monotonic() - start
        output = harness_part(run.stdout)
        where_note = f"\n          kept {where}" if keep else ""
        if run.returncode == 0:
            return False, (
                f"SURVIVED  {mutant.name} ({mutant.path}, {seconds:.0f} s){where_note}"
            )
        label = what_caught(output)
        return True, (
            f"CAUGHT    {mutant.name} ({mutant.path}, {seconds:.0f} s): {label}\n"
            f"          {report_line(output, label)}{where_note}"
        )
    finally:
        if not keep:
            shutil.rmtree(where, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument(
        "--jobs", type=int, default=1, help="mutants built and run at once"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    known = {m.name for m in MUTANTS}
    for name in args.names:
        if name not in known:
            parser.error(f"no mutant {name!r}; known: {sorted(known)}")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    survivors = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        runs = [pool.submit(run_mutant, m, args.keep) for m in chosen]
        for run in concurrent.futures.as_completed(runs):
            caught, lines = run.result()
            survivors += not caught
            print(lines, flush=True)
    print(f"SUMMARY: {len(chosen) - survivors} of {len(chosen)} mutants caught")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
