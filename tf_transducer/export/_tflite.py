# SPDX-License-Identifier: Apache-2.0
"""Shared TFLite plumbing: conversion with built-in ops only, atomic writes, running."""

import contextlib
import inspect
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from tf_transducer._optional import require


def convert(function, owner, quantize=False):
    """TFLite flatbuffer bytes of a tf.function, TFLITE_BUILTINS only.

    The function (with an input_signature) is saved with `owner` (what holds
    its variables) as a SavedModel signature first, which freezes every
    variable into the TFLite file; the signature's input and output names
    are kept.

    Args:
      function: a `tf.function` with an input_signature, returning a dict.
      owner: the Keras layer / model / tf.Module whose variables it reads.
      quantize: dynamic-range quantisation (int8 weights, float activations).
    """
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    del owner  # the concrete function captures the variables it reads
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

    with tempfile.TemporaryDirectory() as saved:
        signatures = {"serving_default": named.get_concrete_function()}
        tf.saved_model.save(tf.Module(), saved, signatures=signatures)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        return converter.convert()


META = "export.json"


def read_meta(export_dir, model, name, keys=()):
    """The export.json of an export folder, checked to be of `model` and to
    hold `keys`.

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
def staging_dir(final_dir):
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

    def __init__(self, path, num_threads=1, inputs=None):
        require("ai_edge_litert")
        from ai_edge_litert.interpreter import Interpreter

        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such TFLite program")
        try:
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

    def __call__(self, **inputs):
        return self.runner(
            **{k: np.asarray(v, self.dtypes[k]) for k, v in inputs.items()}
        )
