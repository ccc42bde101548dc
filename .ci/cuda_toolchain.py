# SPDX-License-Identifier: Apache-2.0
"""Assembles the CUDA 12.5 toolchain of the wheel's GPU kernels from PyPI.

The pinned wheels below, unpacked into one folder that clang takes as
--cuda-path.

TensorFlow 2.21 is a CUDA 12.5 build, and its own kernels are compiled by
clang against CUDA 12.5's headers, libdevice and ptxas.  The kernels of our
wheel are built the same way, so that they need no newer driver than
TensorFlow itself: cubins of CUDA 12.5's ELF ABI (version 7, what TensorFlow's
own carry; CUDA 13's are version 8 and need an R580 driver) and PTX of an ISA
that drivers since CUDA 11.8 read.  PyPI's CUDA 12 nvcc wheels hold ptxas and
libdevice but no nvcc, so the front end is clang (Debian's clang-16); the one
piece no CUDA 12 wheel has, fatbinary, comes from CUDA 13's wheel, behind a
shim that turns clang's --image=profile=... arguments into --image3 and
writes uncompressed images (a container of the version TensorFlow's own use).

Layout of DEST:
  include/                CUDA 12.5 runtime, crt and cccl headers, and
                          cuRAND's (clang's CUDA wrapper includes one)
  nvvm/libdevice/         libdevice.10.bc
  bin/ptxas               CUDA 12.5's
  bin/fatbinary           the shim; bin/fatbinary-cuda13 the real one
  bin/cuobjdump           CUDA 13.5's (lists the library's cubins and PTX)
  toolchain.json          the wheels it was made of

Usage: python3 .ci/cuda_toolchain.py DEST   (nothing is done when DEST holds
these wheels already; pip downloads them, into DEST/wheels)
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

WHEELS = (
    # (requirement, {folder in the wheel: folder in DEST})
    ("nvidia-cuda-nvcc-cu12==12.5.82", {
        "nvidia/cuda_nvcc/include/": "include/",
        "nvidia/cuda_nvcc/bin/ptxas": "bin/ptxas",
        "nvidia/cuda_nvcc/nvvm/libdevice/": "nvvm/libdevice/",
    }),
    ("nvidia-cuda-runtime-cu12==12.5.82", {
        "nvidia/cuda_runtime/include/": "include/",
    }),
    ("nvidia-cuda-cccl-cu12==12.5.39.post1", {
        "nvidia/cuda_cccl/include/": "include/",
    }),
    ("nvidia-curand-cu12==10.3.6.82", {
        "nvidia/curand/include/": "include/",
    }),
    ("nvidia-cuda-nvcc==13.5.37", {
        "nvidia/cu13/bin/fatbinary": "bin/fatbinary-cuda13",
    }),
    ("nvidia-cuda-cuobjdump==13.5.37", {
        "nvidia/cu13/bin/cuobjdump": "bin/cuobjdump",
    }),
)  # fmt: skip

SHIM = """#!/usr/bin/env bash
# clang-16 calls fatbinary with --image=profile=sm_NN|compute_NN,file=F;
# CUDA 13's takes --image3=kind=elf|ptx,sm=NN,file=F.  Images uncompressed.
here=$(cd "$(dirname "$0")" && pwd)
args=()
for a in "$@"; do
  if [[ $a =~ ^--image=profile=(sm|compute)_([0-9]+a?),file=(.*)$ ]]; then
    kind=elf
    [[ ${BASH_REMATCH[1]} == compute ]] && kind=ptx
    args+=("--image3=kind=$kind,sm=${BASH_REMATCH[2]},file=${BASH_REMATCH[3]}")
  else
    args+=("$a")
  fi
done
exec "$here/fatbinary-cuda13" --compress-mode=none "${args[@]}"
"""


def download(dest: str) -> dict[str, str]:
    """Each requirement's wheel file, downloaded into dest/wheels."""
    folder = os.path.join(dest, "wheels")
    os.makedirs(folder, exist_ok=True)
    requirements = [r for r, _ in WHEELS]
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
         "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
         "--platform", "manylinux_2_17_x86_64", "-d", folder, *requirements],
        capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(
            f"cuda_toolchain: pip could not download {requirements}:\n"
            f"{result.stderr[-2000:]}"
        )
    found = {}
    for requirement in requirements:
        name, version = requirement.split("==")
        prefix = f"{name.replace('-', '_')}-{version}-"
        matches = [f for f in os.listdir(folder) if f.startswith(prefix)]
        if len(matches) != 1:
            raise SystemExit(f"cuda_toolchain: no single wheel for {requirement}")
        found[requirement] = os.path.join(folder, matches[0])
    return found


def extract(wheel: str, mapping: dict[str, str], dest: str) -> None:
    """The wheel's files that `mapping` names, into their places in dest."""
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            for source, target in mapping.items():
                if source.endswith("/"):  # a folder
                    if member.endswith("/") or not member.startswith(source):
                        continue
                    if member.endswith("__init__.py"):
                        continue
                    path = os.path.join(dest, target, member[len(source) :])
                elif member == source:  # a file
                    path = os.path.join(dest, target)
                else:
                    continue
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with z.open(member) as src, open(path, "wb") as out:
                    shutil.copyfileobj(src, out)
                if target.startswith("bin/"):
                    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def main() -> int:
    """Downloads, unpacks and checks; 0 when DEST is ready."""
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.split("Usage: ")[1].split("\n")[0])
    dest = os.path.abspath(sys.argv[1])
    record = os.path.join(dest, "toolchain.json")
    wanted = [r for r, _ in WHEELS]
    if os.path.exists(record):
        with open(record) as f:
            if json.load(f).get("wheels") == wanted:
                print(f"cuda_toolchain: {dest} is ready")
                return 0
    for sub in ("include", "bin", "nvvm"):
        shutil.rmtree(os.path.join(dest, sub), ignore_errors=True)
    wheels = download(dest)
    for requirement, mapping in WHEELS:
        extract(wheels[requirement], mapping, dest)
    shim = os.path.join(dest, "bin", "fatbinary")
    with open(shim, "w") as f:
        f.write(SHIM)
    os.chmod(shim, 0o755)
    ptxas = subprocess.run(
        [os.path.join(dest, "bin", "ptxas"), "--version"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    if "release 12.5" not in ptxas:
        raise SystemExit(f"cuda_toolchain: ptxas is not CUDA 12.5's:\n{ptxas}")
    with open(record, "w") as f:
        json.dump({"wheels": wanted}, f, indent=1)
    print(f"cuda_toolchain: {dest} assembled from {len(wanted)} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
