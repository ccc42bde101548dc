# SPDX-License-Identifier: Apache-2.0
"""Shared TFLite plumbing: conversion with built-in ops only, atomic writes, running."""

import contextlib
import inspect
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging as absl_logging
from numpy.typing import ArrayLike

from tf_transducer._optional import require

QUANTIZATIONS = ("float", "dynamic", "int8")


def check_quantization(quantization: str | None) -> str:
    """The mode: "float" for None, else quantization, checked against QUANTIZATIONS."""
    quantization = "float" if quantization is None else quantization
    if quantization not in QUANTIZATIONS:
        raise ValueError(
            f"quantization must be one of {list(QUANTIZATIONS)} (or None: float), "
            f"got {quantization!r}"
        )
    return quantization


# What TensorFlow and LiteRT print to stderr while saving, converting and
# loading programs that asks nothing of the user: glog-style INFO lines (C++
# or absl's Python handler), C++ WARNING lines (the converter's about its own
# options; what TF_CPP_MIN_LOG_LEVEL=2 hides), LiteRT's INFO lines, the int8
# calibrator's settings and absl's note on its first C++ line.
_CHATTER = re.compile(
    rb"I\d{4} [\d:. ]+\d+ \S+:\d+\] "
    rb"|W\d{4} [\d:. ]+\d+ \S+\.(?:cc|h):\d+\] "
    rb"|INFO: |fully_quantize: |WARNING: All log messages before absl::"
)
_QUIET_LOCK = threading.Lock()
_quiet: dict[str, Any] = {"depth": 0}  # the state of the outermost block


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _quiet_begin() -> None:
    """Quiets the loggers and captures stderr (the outermost block)."""
    with _QUIET_LOCK:
        if not _quiet["depth"]:
            loggers = [tf.get_logger(), absl_logging.get_absl_logger()]
            _quiet["levels"] = [(logger, logger.level) for logger in loggers]
            for logger in loggers:
                logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
            try:
                saved: int | None = os.dup(2)
            except OSError:  # no stderr: nothing to filter
                saved = None
            if saved is not None:
                sys.stderr.flush()
                _quiet["file"] = tempfile.TemporaryFile()
                os.dup2(_quiet["file"].fileno(), 2)
            _quiet.update(saved=saved, failed=False)
        _quiet["depth"] += 1


def _quiet_end(failed: bool) -> None:
    """Undoes `_quiet_begin` at the outermost block's end.

    The captured lines are written back: all of them when a block failed,
    else all but `_CHATTER`.
    """
    with _QUIET_LOCK:
        _quiet["failed"] |= failed
        _quiet["depth"] -= 1
        if _quiet["depth"]:
            return
        for logger, level in _quiet.pop("levels"):
            logger.setLevel(level)
        saved = _quiet.pop("saved")
        if saved is None:
            return
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        with _quiet.pop("file") as capture:
            capture.seek(0)
            lines = capture.read().splitlines(keepends=True)
        if not _quiet["failed"]:
            lines = [line for line in lines if not _CHATTER.match(line)]
        _write_all(2, b"".join(lines))


@contextlib.contextmanager
def quiet_tensorflow() -> Iterator[None]:
    """TensorFlow's and LiteRT's informational output left out of the block.

    The "tensorflow" and absl Python loggers are raised to WARNING (at
    least). What the process writes to stderr (file descriptor 2: also the
    C++ logs, which TF_CPP_MIN_LOG_LEVEL set after TensorFlow's import no
    longer changes) goes to a temporary file and is written back at the
    end, less the lines of `_CHATTER`; all of it when the block raises (the
    converter's diagnostics). Blocks nest, in one thread or several: the
    loggers and stderr are restored at the end of the outermost one.
    """
    _quiet_begin()
    failed = True
    try:
        yield
        failed = False
    finally:
        _quiet_end(failed)


def convert(
    function: Any,
    quantization: str = "float",
    representative: list[dict[str, np.ndarray]] | None = None,
) -> bytes:
    """TFLite flatbuffer bytes of a tf.function, TFLite built-in ops only.

    The function (with an input_signature) is frozen (the variables its
    concrete function captures become constants) and saved as a SavedModel
    signature first, which keeps its input and output names.

    Args:
      function: a `tf.function` with an input_signature, returning a dict.
      quantization: "float"; "dynamic" (int8 weights, per channel where the
        converter allows, float activations); or "int8" (full integer:
        int8 weights and activations calibrated on `representative`, int8
        built-in kernels only; the inputs and outputs stay float and are
        quantised at the program's edges).
      representative: for "int8", a list of {input name: array} dicts, the
        inputs the program sees in use.

    Returns:
      The .tflite file's bytes.
    """
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    quantization = check_quantization(quantization)
    if quantization == "int8" and not representative:
        raise ValueError("int8 quantisation needs representative inputs, got none")
    concrete = function.get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    names = sorted(concrete.structured_outputs)

    # The frozen function takes and returns tensors flat; name them again.
    arg_names = list(inspect.signature(function.python_function).parameters)
    specs = [
        tf.TensorSpec(spec.shape, spec.dtype, name=name)
        for spec, name in zip(function.input_signature, arg_names, strict=True)
    ]

    @tf.function(input_signature=specs)
    def named(*args):
        return dict(zip(names, tf.nest.flatten(frozen(*args)), strict=True))

    with tempfile.TemporaryDirectory() as saved, quiet_tensorflow():
        signatures = {"serving_default": named.get_concrete_function()}
        tf.saved_model.save(tf.Module(), saved, signatures=signatures)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantization != "float":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantization == "int8":
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.representative_dataset = tf.lite.RepresentativeDataset(
                lambda: iter(representative or [])  # (not empty: checked above)
            )
        with warnings.catch_warnings():
            # The converter's own calibrator still runs tf.lite.Interpreter.
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is")
            return converter.convert()


class Recorder:
    """Wraps a program; keeps (a copy of) the inputs of every call."""

    def __init__(self, program: "Program") -> None:
        self.program = program
        self.inputs: list[dict[str, np.ndarray]] = []

    def __call__(self, **inputs: ArrayLike) -> dict[str, np.ndarray]:
        self.inputs.append(
            {k: np.array(v, self.program.dtypes[k]) for k, v in inputs.items()}
        )
        return self.program(**inputs)


def record_inputs(
    stream: Any,
    names: Iterable[str],
    run: Callable[[Any, Any], object],
    items: Iterable[Any],
    limit: int = 1000,
) -> dict[str, list[dict[str, np.ndarray]]]:
    """The inputs a runner gives its programs `names` on `items`.

    Each program of `stream.programs` named in `names` is wrapped in a
    Recorder, `run(stream, item)` is called for every item, and at most
    `limit` recorded calls per program (evenly spread) are returned as
    {name: [{input name: array}]}: an int8 calibration set drawn from the
    inputs the program meets in use (states and all).
    """
    recorders = {name: Recorder(stream.programs[name]) for name in names}
    stream.programs.update(recorders)
    count = 0
    for item in items:
        run(stream, item)
        count += 1
    if not count:
        raise ValueError(
            "calibration data is empty: int8 quantisation needs representative "
            "inputs (a few hundred utterances)"
        )
    recorded: dict[str, list[dict[str, np.ndarray]]] = {}
    for name, recorder in recorders.items():
        calls = recorder.inputs
        keep = np.linspace(0, len(calls) - 1, min(limit, len(calls))).astype(int)
        recorded[name] = [calls[i] for i in sorted(set(keep))]
    return recorded


def write_files(folder: str, files: Mapping[str, bytes]) -> None:
    """Writes {file name: bytes} into folder."""
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def write_export(
    export_dir: str,
    functions: Mapping[str, Any],
    quantization: str,
    quantized: Sequence[str],
    meta: Mapping[str, Any],
    extras: Callable[[str], object] | None = None,
    calibrate: Callable[[str], Mapping[str, list[dict[str, np.ndarray]]]] | None = None,
) -> dict[str, int]:
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
    export_dir: str,
    functions: Mapping[str, Any],
    quantization: str,
    quantized: Sequence[str],
    meta: Mapping[str, Any],
    extras: Callable[[str], object] | None,
    calibrate: Callable[[str], Mapping[str, list[dict[str, np.ndarray]]]] | None,
) -> dict[str, int]:
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


def check_calibration(quantization: str | None, calibration: object, name: str) -> str:
    """The quantisation mode, after checking the calibration data.

    Calibration data must come with "int8" and only with it.
    """
    quantization = check_quantization(quantization)
    if (quantization == "int8") != (calibration is not None):
        raise ValueError(
            f"{name} is needed with quantization='int8' and only then "
            f"(quantization={quantization!r}, {name} "
            f"{'given' if calibration is not None else 'not given'})"
        )
    return quantization


def check_audio(
    audio: ArrayLike,
    sample_rate: int | None = None,
    expected_rate: int | None = None,
    allow_empty: bool = True,
) -> np.ndarray:
    """Mono float32 samples [N] for a runner, or a ValueError naming the problem.

    int16 samples are scaled to [-1, 1) (divided by 32768); other integer
    types, more than one channel, NaN / inf, and a sample_rate other than
    the export's are errors.
    """
    audio = np.asarray(audio)
    if audio.dtype == np.int16:
        audio = audio.astype(np.float32) / 32768.0
    elif not np.issubdtype(audio.dtype, np.floating):
        raise ValueError(
            f"audio must be float samples in [-1, 1] (or int16), got dtype "
            f"{audio.dtype}"
        )
    if audio.ndim == 2 and audio.shape[1] in (1, 2) and audio.shape[0] > 2:
        raise ValueError(
            f"audio must be mono, shape [N]; got shape {audio.shape} (a stereo "
            "signal? average the channels: audio.mean(axis=1))"
        )
    if audio.ndim != 1:
        raise ValueError(f"audio must be mono, shape [N]; got shape {audio.shape}")
    if not allow_empty and audio.size == 0:
        raise ValueError("audio is empty (0 samples)")
    if sample_rate is not None and expected_rate is not None:
        if sample_rate != expected_rate:
            raise ValueError(
                f"audio is at {sample_rate} Hz, the export takes {expected_rate} "
                f"Hz (resample it, e.g. tf_transducer.data.load_audio(path, "
                f"{expected_rate}))"
            )
    audio = audio.astype(np.float32, copy=False)
    if not np.all(np.isfinite(audio)):
        raise ValueError("audio holds NaN or inf samples")
    return audio


def check_export_quantization(
    export_dir: str, meta: Mapping[str, Any], quantization: str | None
) -> str:
    """The export's quantisation mode; an error if `quantization` asks another."""
    held = meta["quantization"]
    if held not in QUANTIZATIONS:
        raise ValueError(
            f"{os.path.join(export_dir, META)}: unknown quantization {held!r}"
        )
    if quantization is not None and check_quantization(quantization) != held:
        raise ValueError(
            f"{export_dir!r} holds {held} programs, not {quantization} ones "
            f"(export again with quantization={quantization!r})"
        )
    return held


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


class Program:
    """A TFLite model's serving signature, run with the LiteRT interpreter.

    Called with keyword arguments named as the exported function's inputs;
    returns a dict of its named outputs.

    Args:
      path: the .tflite file.
      num_threads: interpreter threads.
      inputs: the input names the program must take (None: any); a file of
        another program (swapped or renamed) is refused by them.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not a TFLite program, or one with other inputs (the
        message names the file).
    """

    def __init__(
        self, path: str, num_threads: int = 1, inputs: Iterable[str] | None = None
    ) -> None:
        require("ai_edge_litert")
        from ai_edge_litert.interpreter import Interpreter

        if isinstance(num_threads, bool) or not isinstance(num_threads, int):
            raise ValueError(f"num_threads must be an int >= 1, got {num_threads!r}")
        if num_threads < 1:
            raise ValueError(f"num_threads must be an int >= 1, got {num_threads}")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such TFLite program")
        try:
            with quiet_tensorflow():  # LiteRT's INFO line on its first program
                self.interpreter = Interpreter(model_path=path, num_threads=num_threads)
                self.runner = self.interpreter.get_signature_runner()
        except (ValueError, RuntimeError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ValueError(
                f"{path}: not a readable TFLite program (corrupt or truncated?): "
                f"{first}"
            ) from None
        self.path = path
        self.dtypes = {
            k: d["dtype"] for k, d in self.runner.get_input_details().items()
        }
        if inputs is not None and set(inputs) != set(self.dtypes):
            raise ValueError(
                f"{path}: takes the inputs {sorted(self.dtypes)}, expected "
                f"{sorted(inputs)} (a program of another kind?)"
            )

    def __call__(self, **inputs: ArrayLike) -> dict[str, np.ndarray]:
        return self.runner(
            **{k: np.asarray(v, self.dtypes[k]) for k, v in inputs.items()}
        )
