# SPDX-License-Identifier: Apache-2.0
"""What the GPU kernels of a built op library need of a driver (cuobjdump).

The cubins (architecture, ELF ABI, the toolkit whose ptxas made them) and
the PTX (its ISA version) of the library, listed, then a summary line.

It fails unless every fatbin holds cubins for each of ARCHS, all of CUDA 12's
ELF ABI (version 7, what TensorFlow 2.21's own kernels carry: CUDA 13's
version 8 needs an R580 driver) from a toolkit no newer than TensorFlow's
CUDA 12.5, and compute_90 PTX of an ISA no newer than 8.5 (CUDA 12.5's).

Usage: python3 .ci/cuda_binaries.py CUOBJDUMP LIBRARY
"""

import collections
import re
import subprocess
import sys

ARCHS = (80, 86, 89, 90)
ELF_ABI = 7  # CUDA 12's cubins
NEWEST_TOOLKIT = 125  # CUDA 12.5, TensorFlow 2.21's
NEWEST_PTX_ISA = (8, 5)


def cuobjdump(tool: str, *args: str) -> str:
    """cuobjdump's output, or an exit naming the command."""
    result = subprocess.run([tool, *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{tool} {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def main() -> int:
    """Lists, checks, summarises; 1 when a check fails."""
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split("Usage: ")[1].strip())
    tool, library = sys.argv[1:]
    listing = cuobjdump(tool, "--list-elf", library) + cuobjdump(
        tool, "--list-ptx", library
    )
    print(listing.rstrip())
    elves = re.findall(
        r"64bit elf: type=\d+, abi=(\d+), sm=(\d+), toolkit=(\d+)",
        cuobjdump(tool, "-elf", library),
    )
    ptx = cuobjdump(tool, "-ptx", library)
    ptx_targets = re.findall(r"^\.target\s+(sm_\d+)", ptx, re.M)
    ptx_versions = [
        tuple(map(int, v)) for v in re.findall(r"^\.version (\d+)\.(\d+)", ptx, re.M)
    ]
    problems = []
    per_arch = collections.Counter(int(sm) for _, sm, _ in elves)
    fatbins = len(ptx_targets)
    for arch in ARCHS:
        if per_arch[arch] != fatbins:
            problems.append(f"{per_arch[arch]} sm_{arch} cubins for {fatbins} fatbins")
    for abi, sm, toolkit in elves:
        if int(abi) != ELF_ABI or int(toolkit) > NEWEST_TOOLKIT:
            problems.append(f"sm_{sm} cubin of ELF ABI {abi} from toolkit {toolkit}")
    if set(ptx_targets) != {"sm_90"}:
        problems.append(f"PTX targets {sorted(set(ptx_targets))}, not compute_90 alone")
    for version in ptx_versions:
        if version > NEWEST_PTX_ISA:
            problems.append(f"PTX ISA {version[0]}.{version[1]}")
    abis = sorted({int(a) for a, _, _ in elves})
    toolkits = sorted({int(t) for _, _, t in elves})
    isas = sorted({f"{a}.{b}" for a, b in ptx_versions})
    archs = ", ".join(f"sm_{a}" for a in sorted(per_arch))
    print(
        f"summary: {len(elves)} cubins for {archs} "
        f"(ELF ABI {abis}, toolkit {toolkits}); {len(ptx_versions)} PTX for "
        f"{sorted(set(ptx_targets))} (ISA {isas})"
    )
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
