# SPDX-License-Identifier: Apache-2.0
"""tf.function -> TFLite flatbuffer, built-in ops only; int8 calibration sets."""

import inspect
import tempfile
import warnings
from collections.abc import Callable
from collections.abc import Iterable
from typing import TYPE_CHECKING
from typing import Any

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from tf_transducer.export._quiet import quiet_tensorflow

if TYPE_CHECKING:
    from tf_transducer.export._runner import Program


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
