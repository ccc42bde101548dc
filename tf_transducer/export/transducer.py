# SPDX-License-Identifier: Apache-2.0
"""A Transducer to streaming TFLite programs, and a LiteRT runner for WAVs.

An export folder holds:

- `features.tflite`: audio [1, N] -> features [1, T, F] (LogMelSpectrogram);
- `encoder.tflite`: one chunk of `chunk_frames` feature frames + the valid
  count + the encoder's states -> projected encoder frames
  [1, chunk_frames / stack, J] + new states (normalisation inside). The
  states are `encoder.initial_state(1)`'s: the LSTMs' h and c, or the
  Conformer's caches (subsampling frames, left-context validity, and per
  block its attention inputs and causal-convolution inputs);
- `predictor.tflite`: one label [1] + the prediction network's state ->
  projected decoder output [1, J] + new state;
- `joiner.tflite`: projected encoder [1, J] and decoder [1, J] -> logits [1, V];

plus `text_encoder.json` and `export.json`. All use TFLite built-in ops
only. With `quantization="dynamic"` or `"int8"` the encoder and the
predictor are quantised; the features program (DFT and mel matrices) and
the joiner (the output layer, a few kB) always stay float: quantising the
feature constants alone tripled the demo's word error rate, the joiner
costs nothing to keep. `export.json` records the mode of each program.

`TransducerStream` feeds audio in any chunk sizes and runs greedy search
as encoder chunks complete; its transcript equals the offline Keras
greedy transcript (float programs).
"""

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from tf_transducer.decoding.transducer import GreedyState, State, greedy_continue
from tf_transducer.export._convert import check_calibration, record_inputs
from tf_transducer.export._folders import read_meta, write_export
from tf_transducer.export._runner import Program, check_audio, check_export_quantization

if TYPE_CHECKING:
    from tf_transducer.data.text import TextEncoder
    from tf_transducer.layers import LogMelSpectrogram
    from tf_transducer.models import Transducer

MODEL = "tf_transducer.Transducer"

PROGRAMS = ("features", "encoder", "predictor", "joiner")
META_KEYS = (
    "sample_rate",
    "frame_length",
    "frame_step",
    "feature_dim",
    "chunk_frames",
    "stack",
    "encoder_kind",
    "chunk_size",
    "left_context",
    "encoder_state_shapes",
    "predictor_states",
    "predictor_kind",
    "vocab_size",
    "quantization",
    "programs",
)
# The programs quantised in "dynamic" / "int8" exports; the others stay float.
QUANTIZED = ("encoder", "predictor")


def _encoder_program(model, chunk_frames, state_shapes):
    """The encoder step; state_shapes: those of initial_state(1), batch left out."""
    encoder = model.encoder
    specs = [
        tf.TensorSpec([1, chunk_frames, model.feature_dim], tf.float32),
        tf.TensorSpec([1], tf.int32),
    ] + [tf.TensorSpec([1, *shape], tf.float32) for shape in state_shapes]
    names = ["features", "valid"] + [f"state_{i}" for i in range(len(state_shapes))]

    def body(features, valid, *states):
        if model.normalizer is not None:
            features, _ = model.normalizer(features, valid)
        else:
            features = features * tf.cast(
                tf.sequence_mask(valid, chunk_frames)[..., None], features.dtype
            )
        if model.encoder_kind == "conformer":
            encoded, new_states = encoder.step(features, list(states), valid)
        else:
            encoded, new_states = encoder.step(features, list(states))
        out = {"encoder": model.joiner.project_encoder(encoded)}
        out.update({f"new_state_{i}": s for i, s in enumerate(new_states)})
        return out

    return _named_function(body, specs, names)


def _predictor_program(model):
    predictor = model.predictor
    state = predictor.initial_state(1)
    specs = [tf.TensorSpec([1], tf.int32)] + [
        tf.TensorSpec(s.shape, s.dtype) for s in state
    ]
    names = ["label"] + [f"state_{i}" for i in range(len(state))]

    def body(label, *states):
        out, new_states = predictor.step(label, list(states))
        result = {"decoder": model.joiner.project_decoder(out)}
        result.update({f"new_state_{i}": s for i, s in enumerate(new_states)})
        return result

    return _named_function(body, specs, names)


def _named_function(body, specs, names):
    """A tf.function with named positional inputs (TFLite signature names)."""
    named_specs = [
        tf.TensorSpec(s.shape, s.dtype, name=n)
        for s, n in zip(specs, names, strict=True)
    ]
    source = f"def f({', '.join(names)}):\n    return body({', '.join(names)})\n"
    scope = {"body": body}
    exec(source, scope)  # a real signature, so that the inputs keep their names
    return tf.function(scope["f"], input_signature=named_specs)


def export_transducer(
    model: "Transducer",
    export_dir: str,
    text_encoder: "TextEncoder",
    features: "LogMelSpectrogram",
    chunk_frames: int | None = None,
    quantization: str | None = None,
    calibration_audio: Iterable[np.ndarray] | None = None,
) -> dict[str, int]:
    """Writes the streaming TFLite programs of a Transducer to export_dir.

    Args:
      model: a built `tf_transducer.models.Transducer` taking features.
      export_dir: the folder to create or replace (all or nothing).
      text_encoder: its `CharacterAlphabet` or `SubwordEncoder`.
      features: the `LogMelSpectrogram` layer that made its training features.
      chunk_frames: feature frames per encoder step, a multiple of the
        encoder's stack (subsampling). Default: chunk_size * subsampling
        for the Conformer (its attention chunk: the stream then equals the
        offline model; n * subsampling equals it run with chunk_size=n),
        4 * stack for the LSTMs (any chunk streams them exactly).
      quantization: None (float), "dynamic" (int8 weights) or "int8" (full
        integer encoder and predictor, calibrated on calibration_audio).
      calibration_audio: for "int8": an iterable of mono float32 signals
        [N] at the features' sample rate (a few hundred training
        utterances); the float programs stream them, and the inputs each
        program meets (states included) are the calibration set.

    Returns:
      {file name: size in bytes}.
    """
    quantization = check_calibration(
        quantization, calibration_audio, "calibration_audio"
    )
    stack = model.encoder.stack
    conformer = model.encoder_kind == "conformer"
    if chunk_frames is None:
        chunk_frames = (model.encoder.chunk_size if conformer else 4) * stack
    if (
        not isinstance(chunk_frames, int)
        or isinstance(chunk_frames, bool)
        or chunk_frames <= 0
        or chunk_frames % stack
    ):
        raise ValueError(
            f"chunk_frames must be a positive multiple of the encoder's stack "
            f"({stack}), got {chunk_frames!r}"
        )
    if features.n_mels != model.feature_dim:
        raise ValueError(
            f"features gives {features.n_mels} values per frame, the model takes "
            f"{model.feature_dim}"
        )

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32, name="audio")])
    def feature_program(audio):
        values, _ = features(audio)
        return {"features": values}

    @tf.function(
        input_signature=[
            tf.TensorSpec([1, model.joiner.units], tf.float32, name="encoder"),
            tf.TensorSpec([1, model.joiner.units], tf.float32, name="decoder"),
        ]
    )
    def joiner_program(encoder, decoder):
        return {"logits": model.joiner.joint(encoder, decoder)}

    encoder_states = [list(s.shape[1:]) for s in model.encoder.initial_state(1)]
    functions = {
        "features": feature_program,
        "encoder": _encoder_program(model, chunk_frames, encoder_states),
        "predictor": _predictor_program(model),
        "joiner": joiner_program,
    }
    state_shapes = [list(s.shape[1:]) for s in model.predictor.initial_state(1)]
    meta = {
        "model": MODEL,
        "sample_rate": features.sample_rate,
        "frame_length": features.frame_length,
        "frame_step": features.frame_step,
        "feature_dim": model.feature_dim,
        "chunk_frames": chunk_frames,
        "stack": stack,
        "encoder_kind": model.encoder_kind,
        # Encoder frames per step and those before a chunk each one sees
        # (None: an LSTM's whole past).
        "chunk_size": chunk_frames // stack,
        "left_context": model.encoder.left_context if conformer else None,
        "encoder_state_shapes": encoder_states,
        "predictor_states": state_shapes,
        "predictor_kind": model.predictor.kind,
        "vocab_size": model.vocab_size,
    }

    def extras(folder):
        from tf_transducer.data.text import save_text_encoder_json

        save_text_encoder_json(text_encoder, os.path.join(folder, "text_encoder.json"))

    def calibrate(folder):
        return record_inputs(
            TransducerStream(folder),
            QUANTIZED,
            lambda stream, audio: stream.transcribe(audio),
            calibration_audio,
        )

    return write_export(
        export_dir, functions, quantization, QUANTIZED, meta, extras, calibrate
    )


class _TfliteSteps:
    """The decoding step functions on the predictor and joiner programs."""

    def __init__(
        self, programs: Mapping[str, Program], meta: Mapping[str, Any]
    ) -> None:
        self.programs, self.meta = programs, meta

    def start(self, batch: int) -> tuple[np.ndarray, State]:
        if batch != 1:
            raise ValueError("the TFLite programs decode one utterance at a time")
        dtype = np.int32 if self.meta["predictor_kind"] == "stateless" else np.float32
        state = [
            np.zeros([1, *shape], dtype) for shape in self.meta["predictor_states"]
        ]
        return self.predict(np.zeros([1], np.int32), state)

    def predict(self, labels: np.ndarray, state: State) -> tuple[np.ndarray, State]:
        inputs = {f"state_{i}": s for i, s in enumerate(state)}
        out = self.programs["predictor"](label=np.asarray(labels, np.int32), **inputs)
        new_state = [out[f"new_state_{i}"] for i in range(len(state))]
        return out["decoder"], new_state

    def joint(self, encoder: np.ndarray, decoder: np.ndarray) -> np.ndarray:
        return self.programs["joiner"](encoder=encoder, decoder=decoder)["logits"]


class TransducerStream:
    """Streaming greedy recognition with an exported Transducer (LiteRT).

    Args:
      export_dir: a folder written by `export_transducer`.
      quantization: None (whatever the export holds, see `.quantization`),
        or the mode expected ("float", "dynamic", "int8"): an export of
        another mode is then an error.
      num_threads: interpreter threads.
      max_symbols_per_frame: of the greedy search.

    Audio is mono float32 in [-1, 1] (int16 is scaled by 1 / 32768) at the
    export's `sample_rate`.
    """

    def __init__(
        self,
        export_dir: str,
        quantization: str | None = None,
        num_threads: int = 1,
        max_symbols_per_frame: int = 3,
    ) -> None:
        self.meta = read_meta(export_dir, MODEL, "Transducer", META_KEYS)
        self.quantization = check_export_quantization(
            export_dir, self.meta, quantization
        )
        from tf_transducer.data.text import load_text_encoder_json

        self.text_encoder = load_text_encoder_json(
            os.path.join(export_dir, "text_encoder.json")
        )
        m = self.meta
        inputs = {
            "features": ["audio"],
            "encoder": ["features", "valid"]
            + [f"state_{i}" for i in range(len(m["encoder_state_shapes"]))],
            "predictor": ["label"]
            + [f"state_{i}" for i in range(len(m["predictor_states"]))],
            "joiner": ["encoder", "decoder"],
        }
        self.programs = {
            name: Program(
                os.path.join(export_dir, name + ".tflite"), num_threads, inputs[name]
            )
            for name in PROGRAMS
        }
        self._steps = _TfliteSteps(self.programs, self.meta)
        self.max_symbols_per_frame = max_symbols_per_frame
        self.reset()

    @property
    def sample_rate(self) -> int:
        return self.meta["sample_rate"]

    def reset(self) -> None:
        m = self.meta
        self._audio = np.zeros([0], np.float32)
        self._features = np.zeros([0, m["feature_dim"]], np.float32)
        self._states = [
            np.zeros([1, *shape], np.float32) for shape in m["encoder_state_shapes"]
        ]
        self._search = GreedyState(self._steps, 1)

    @property
    def labels(self) -> list[int]:
        return list(self._search.hyps[0])

    def feed(self, audio: ArrayLike) -> None:
        """Adds audio samples [N]; decodes every encoder chunk they complete."""
        m = self.meta
        self._audio = np.concatenate([self._audio, check_audio(audio)])
        if len(self._audio) >= m["frame_length"]:
            new = (len(self._audio) - m["frame_length"]) // m["frame_step"] + 1
            used = (new - 1) * m["frame_step"] + m["frame_length"]
            frames = self.programs["features"](audio=self._audio[np.newaxis, :used])
            self._audio = self._audio[new * m["frame_step"] :]
            self._features = np.concatenate([self._features, frames["features"][0]])
        while len(self._features) >= m["chunk_frames"]:
            self._encode(self._features[: m["chunk_frames"]], m["chunk_frames"])
            self._features = self._features[m["chunk_frames"] :]

    def finish(self) -> str:
        """Decodes the last, partial chunk; returns the transcript."""
        m = self.meta
        valid = len(self._features)
        if valid:
            padded = np.zeros([m["chunk_frames"], m["feature_dim"]], np.float32)
            padded[:valid] = self._features
            self._encode(padded, valid)
            self._features = self._features[:0]
        return self.text_encoder.decode(self.labels)

    def _encode(self, chunk: np.ndarray, valid: int) -> None:
        m = self.meta
        inputs = {f"state_{i}": s for i, s in enumerate(self._states)}
        out = self.programs["encoder"](
            features=chunk[np.newaxis], valid=np.array([valid], np.int32), **inputs
        )
        self._states = [out[f"new_state_{i}"] for i in range(len(self._states))]
        frames = -(-valid // m["stack"])  # the stacked frames with real input
        greedy_continue(
            out["encoder"],
            [frames],
            self._steps,
            self._search,
            self.max_symbols_per_frame,
        )

    def transcribe(
        self,
        audio: ArrayLike,
        chunk_samples: int = 1600,
        sample_rate: int | None = None,
    ) -> str:
        """The transcript of a whole signal [N] fed in chunks.

        sample_rate, when given, must be the export's (an error otherwise).
        """
        audio = check_audio(audio, sample_rate, self.sample_rate, allow_empty=False)
        self.reset()
        for start in range(0, len(audio), chunk_samples):
            self.feed(audio[start : start + chunk_samples])
        return self.finish()
