# SPDX-License-Identifier: Apache-2.0
"""Export folders: written all or nothing, described by export.json."""

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_transducer.export._convert import convert
from tf_transducer.export._quiet import quiet_tensorflow


def write_files(folder: str, files: Mapping[str, bytes]) -> None:
    """Writes {file name: bytes} into folder."""
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def write_export(
    export_dir: str, functions: Mapping[str, Any], quantization: str,
    quantized: Sequence[str], meta: Mapping[str, Any],
    extras: Callable[[str], object] | None = None,
    calibrate: Callable[[str], Mapping[str, list[dict[str, np.ndarray]]]] | None = None,
) -> dict[str, int]:  # fmt: skip
    """Converts `functions` and writes an export folder, all or nothing.

    The float programs are written first (with `extras(folder)`'s files and
    an export.json saying "float"); then the programs named in `quantized`
    are converted again in the `quantization` mode, "int8" ones on
    `calibrate(folder)`'s recorded inputs (a runner streaming calibration
    data through the float programs there), and export.json records the
    mode of each program.

    Args:
      export_dir: the folder to create or replace.
      functions: {program name: tf.function}, written as `<name>.tflite`.
      quantization: "float", "dynamic" or "int8".
      quantized: the program names to quantise (the others stay float).
      meta: the export.json content; "quantization" and "programs" are added.
      extras: writes the export's other files into a folder (None: none).
      calibrate: folder -> {program name: [inputs]}, used for "int8".

    Returns:
      {file name: size in bytes}.
    """
    with quiet_tensorflow():  # also the runner that calibrates
        return _write_export(
            export_dir, functions, quantization, quantized, meta, extras, calibrate
        )


def _write_export(
    export_dir: str, functions: Mapping[str, Any], quantization: str,
    quantized: Sequence[str], meta: Mapping[str, Any],
    extras: Callable[[str], object] | None,
    calibrate: Callable[[str], Mapping[str, list[dict[str, np.ndarray]]]] | None,
) -> dict[str, int]:  # fmt: skip
    programs = {f"{name}.tflite": convert(fn) for name, fn in functions.items()}
    modes = {name: quantization if name in quantized else "float" for name in functions}

    def write_meta(folder: str, mode: str, program_modes: dict[str, str]) -> None:
        with open(os.path.join(folder, META), "w") as f:
            json.dump(
                dict(meta, quantization=mode, programs=program_modes), f, indent=2
            )

    with staging_dir(export_dir) as staging:
        write_files(staging, programs)
        if extras is not None:
            extras(staging)
        write_meta(staging, "float", dict.fromkeys(functions, "float"))
        if quantization != "float":
            samples: Mapping[str, list[dict[str, np.ndarray]]] = {}
            if quantization == "int8":
                if calibrate is None:
                    raise ValueError('quantization="int8" needs calibrate')
                samples = calibrate(staging)
            for name in quantized:
                programs[f"{name}.tflite"] = convert(
                    functions[name], quantization, samples.get(name)
                )
            write_files(staging, programs)
            write_meta(staging, quantization, modes)
    return {name: len(data) for name, data in programs.items()}


META = "export.json"


def read_meta(
    export_dir: str, model: str, name: str, keys: Iterable[str] = ()
) -> dict[str, Any]:
    """The export.json of an export folder, checked to be of `model`, with `keys`.

    Raises:
      FileNotFoundError: no export folder or no export.json.
      ValueError: export.json is not a JSON object, is another model's, or
        lacks keys (the message names the file).
    """
    path = os.path.join(export_dir, META)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{export_dir!r} is not a {name} export (no {META})")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a JSON export description ({error})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: must hold a JSON object, got {type(meta).__name__}")
    if meta.get("model") != model:
        raise ValueError(
            f"{export_dir!r} holds an export of "
            f"{meta.get('model', 'another model')!r}, not of a {name}"
        )
    missing = [key for key in keys if key not in meta]
    if missing:
        raise ValueError(f"{path}: lacks {missing} (an export from another version?)")
    return meta


@contextlib.contextmanager
def staging_dir(final_dir: str) -> Iterator[str]:
    """A temporary folder next to final_dir, moved into place on success.

    Nothing is half-written: on an error the temporary folder is removed and
    final_dir is untouched; on success an existing final_dir is replaced.
    """
    parent = os.path.dirname(os.path.abspath(final_dir)) or "."
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if os.path.isdir(final_dir):
        old = staging + ".old"
        os.replace(final_dir, old)
        os.replace(staging, final_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, final_dir)
