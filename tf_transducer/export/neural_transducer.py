# SPDX-License-Identifier: Apache-2.0
"""Block-streaming TFLite export of a NeuralTransducer layer, and its runner.

Two programs, built-in ops only (float, or quantised: "dynamic" int8
weights, "int8" full integer calibrated on encoder frames):

- start: the first block's frames [1, N, D] and their count [1] -> the
  decoding state (o, h, c), each [1, H];
- step: one block's frames, their count and the state -> labels [1, W - 1]
  (padded with -1), their count [1] and the next state.

The encoder that makes the frames is the caller's (its own export).
"""

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from tf_transducer.export._convert import check_calibration
from tf_transducer.export._convert import record_inputs
from tf_transducer.export._folders import META
from tf_transducer.export._folders import write_export
from tf_transducer.export._runner import open_export

if TYPE_CHECKING:
    from tf_transducer.layers import NeuralTransducer

MODEL = "tf_transducer.NeuralTransducer"


def export_neural_transducer(
    layer: "NeuralTransducer",
    export_dir: str,
    encoder_dim: int,
    quantization: str | None = None,
    calibration_frames: Iterable[np.ndarray] | None = None,
) -> dict[str, int]:
    """Writes start / step programs of a built NeuralTransducer layer.

    Args:
      layer: the `tf_transducer.layers.NeuralTransducer`.
      export_dir: the folder to create or replace (all or nothing).
      encoder_dim: D, the width of the encoder frames it reads.
      quantization: None (float), "dynamic" (int8 weights) or "int8" (full
        integer, calibrated on calibration_frames).
      calibration_frames: for "int8": an iterable of encoder outputs
        [T, D], one per utterance (a few hundred from training data).

    Returns:
      {file name: size in bytes}.

    Raises:
      ValueError: an unbuilt layer, an encoder_dim that is not a positive
        int or not the width the layer was built for, bad quantisation
        arguments, or calibration frames that are not finite [T, D].
    """
    quantization = check_calibration(
        quantization, calibration_frames, "calibration_frames"
    )
    if not layer.built:
        raise ValueError(
            "layer is not built: export a trained NeuralTransducer (call it on "
            "encoder frames first)"
        )
    if isinstance(encoder_dim, bool) or not isinstance(encoder_dim, int):
        raise ValueError(f"encoder_dim must be a positive int, got {encoder_dim!r}")
    width = layer.memory.kernel.shape[0]
    if encoder_dim != width:
        raise ValueError(
            f"encoder_dim must be the width of the encoder frames the layer was "
            f"built for, {width}; got {encoder_dim}"
        )
    N, H = layer.input_block_size, layer.transducer_hidden_units
    block = [
        tf.TensorSpec([1, N, encoder_dim], tf.float32),
        tf.TensorSpec([1], tf.int32),
    ]
    state = [tf.TensorSpec([1, H], tf.float32)] * 3

    @tf.function(input_signature=block)
    def start(frames, frame_count):
        out, h, c = layer.initial_state(frames, frame_count)
        return {"out": out, "h": h, "c": c}

    @tf.function(input_signature=block + state)
    def step(frames, frame_count, out, h, c):
        labels, count, (out, h, c) = layer.step(frames, frame_count, [out, h, c])
        return {"labels": labels, "count": count, "out": out, "h": h, "c": c}

    functions = {"start": start, "step": step}
    meta = {
        "model": MODEL,
        "input_block_size": N,
        "encoder_dim": encoder_dim,
        "config": layer.get_config(),
    }

    def feed(stream, frames):
        stream.feed(frames)
        stream.finish()

    def calibrate(folder):
        stream = NeuralTransducerStream(folder)
        return record_inputs(stream, functions, feed, calibration_frames)

    return write_export(
        export_dir,
        functions,
        quantization,
        list(functions),
        meta,
        calibrate=calibrate,
    )


class NeuralTransducerStream:
    """Decodes encoder frames block by block with the exported programs.

    `feed(frames [n, D])` takes any number of frames and returns the labels
    of the blocks it completed; `finish()` decodes the last, partial block.

    Args:
      export_dir: a folder written by `export_neural_transducer`.
      quantization, num_threads: as `open_export`'s (None: the export's mode).

    Raises:
      FileNotFoundError: no export.json or program.
      ValueError: an export.json of another model, without the keys it
        needs, with an input_block_size or encoder_dim that is not a
        positive int or not the programs' frames shape [1, N, D]; a program
        that is not a readable TFLite file of its kind (the message names
        the file and the field).
    """

    def __init__(
        self, export_dir: str, quantization: str | None = None, num_threads: int = 1
    ) -> None:
        block = ["frames", "frame_count"]
        meta, self.quantization, self.programs = open_export(
            export_dir, MODEL, "Neural Transducer",
            ("input_block_size", "encoder_dim", "quantization"), quantization,
            num_threads, {"start": block, "step": [*block, "out", "h", "c"]},
        )  # fmt: skip
        where = os.path.join(export_dir, META)
        for key in ("input_block_size", "encoder_dim"):
            value = meta[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"{where}: {key} must be a positive int, got {value!r}"
                )
        self.block, self.dim = meta["input_block_size"], meta["encoder_dim"]
        for name, program in self.programs.items():
            shape = program.runner.get_input_details()["frames"]["shape"].tolist()
            if shape != [1, self.block, self.dim]:
                wrong = [
                    f"{key} {meta[key]}"
                    for key, axis in (("input_block_size", 1), ("encoder_dim", 2))
                    if len(shape) != 3 or shape[axis] != meta[key]
                ]
                raise ValueError(
                    f"{where}: {' and '.join(wrong)} "
                    f"{'does' if len(wrong) == 1 else 'do'} not match {name}.tflite, "
                    f"whose frames are {shape} ([1, input_block_size, encoder_dim])"
                )
        self.reset()

    def reset(self) -> None:
        self.pending = np.zeros([0, self.dim], np.float32)
        self.state: dict[str, np.ndarray] | None = None
        self.labels: list[int] = []

    def _run(self, frames: np.ndarray) -> list[int]:
        count = len(frames)
        padded = np.zeros([1, self.block, self.dim], np.float32)
        padded[0, :count] = frames
        args: dict[str, ArrayLike] = dict(frames=padded, frame_count=[count])
        if self.state is None:
            self.state = self.programs["start"](**args)
        out = self.programs["step"](
            **args, out=self.state["out"], h=self.state["h"], c=self.state["c"]
        )
        self.state = {k: out[k] for k in ("out", "h", "c")}
        labels = [int(y) for y in out["labels"][0, : int(out["count"][0])]]
        self.labels += labels
        return labels

    def feed(self, frames: ArrayLike) -> list[int]:
        """Queues frames [n, D] (encoder outputs); the labels of the blocks completed.

        Raises ValueError for another shape, a non-numeric dtype, or NaN /
        inf frames (which would decode to nothing).
        """
        frames = np.asarray(frames)
        if not (
            np.issubdtype(frames.dtype, np.floating)
            or np.issubdtype(frames.dtype, np.integer)
        ):
            raise ValueError(
                f"frames must be float encoder outputs, got dtype {frames.dtype}"
            )
        frames = frames.astype(np.float32)
        if frames.ndim != 2 or frames.shape[1] != self.dim:
            raise ValueError(
                f"frames must be [n, {self.dim}] encoder outputs, got shape "
                f"{frames.shape}"
            )
        bad = np.argwhere(~np.isfinite(frames))
        if len(bad):
            raise ValueError(
                f"frames must be finite; got {frames[tuple(bad[0])]} at [t, d] = "
                f"{bad[0].tolist()}"
            )
        self.pending = np.concatenate([self.pending, frames])
        labels = []
        while len(self.pending) >= self.block:
            labels += self._run(self.pending[: self.block])
            self.pending = self.pending[self.block :]
        return labels

    def finish(self) -> list[int]:
        labels = self._run(self.pending) if len(self.pending) else []
        self.pending = self.pending[:0]
        return labels
