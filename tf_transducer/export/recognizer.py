# SPDX-License-Identifier: Apache-2.0
"""export_recognizer: a Transducer and its greedy search as one TFLite program.

`recognizer.tflite` takes one window of audio and the recognizer's state,
and returns the labels found in it (with their encoder frames and
confidence) and the new state. Features, normalisation, the encoder step,
the prediction network, the joint and the label-looping greedy search
(`tf_transducer.decoding.label_looping_continue`, optionally with hotwords
compiled in) all run inside, as built-in ops and WHILE loops, so an app
runs it without Python and without a search of its own.

Inputs (signature "serving_default"):

  audio   float32 [1, W]: W = (chunk_frames - 1) * frame_step + frame_length
          samples; consecutive calls advance by chunk_frames * frame_step
          samples (windows overlap by frame_length - frame_step);
  valid   int32 [1]: the window's feature frames with real audio
          (chunk_frames, but fewer for the last, zero-padded window);
  state_* the state, zeros at the start of an utterance (shapes and dtypes
          in export.json's "state_shapes" / "state_dtypes").

Outputs: labels int32 [1, L], label_count int32 [1] (the first label_count
labels are new), frames int32 [1, L] (encoder frames, counted from this
window's first), confidence float32 [1, L], and new_state_* (feed them back
as state_*). L = chunk_frames / subsampling * (max_symbols_per_frame + 1).

`RecognizerStream` runs it with the API of `TransducerStream`, and gives
its transcripts.
"""

import os
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from tf_transducer.decoding.graph_greedy import GreedyGraphState
from tf_transducer.decoding.graph_greedy import greedy_graph_start
from tf_transducer.decoding.graph_greedy import keras_graph_steps
from tf_transducer.decoding.graph_greedy import label_looping_continue
from tf_transducer.decoding.hotwords import HotwordGraph
from tf_transducer.export._convert import check_quantization
from tf_transducer.export._folders import write_export
from tf_transducer.export._runner import AudioStream
from tf_transducer.export._runner import check_audio
from tf_transducer.export._runner import open_export
from tf_transducer.export.transducer import _named_function
from tf_transducer.layers.streaming import check_chunk_frames

if TYPE_CHECKING:
    from tf_transducer.data.text import TextEncoder
    from tf_transducer.layers import LogMelSpectrogram
    from tf_transducer.models import Transducer

MODEL = "tf_transducer.TransducerRecognizer"
META_KEYS = (
    "sample_rate", "frame_length", "frame_step", "chunk_frames", "stack",
    "window_samples", "state_shapes", "state_dtypes", "quantization", "programs",
)  # fmt: skip


def _state_specs(model: "Transducer") -> list[tf.TensorSpec]:
    """The recognizer's state (batch 1), in order.

    Encoder states, predictor states, the decoder output, the TDT skip, the
    hotword state, and "started" (0 before the utterance's first window).
    """
    encoder = model.encoder.initial_state(1)
    predictor = model.predictor.initial_state(1)
    specs = [tf.TensorSpec(s.shape, tf.float32) for s in encoder]
    specs += [tf.TensorSpec(s.shape, s.dtype) for s in predictor]
    specs += [
        tf.TensorSpec([1, model.joiner.units], tf.float32),
        tf.TensorSpec([1], tf.int32),
        tf.TensorSpec([1], tf.int32),
        tf.TensorSpec([1], tf.int32),
    ]
    return specs


def _recognizer_program(model, features, chunk_frames, max_symbols, hotwords):
    stack = model.encoder.subsampling
    window = (chunk_frames - 1) * features.frame_step + features.frame_length
    states = _state_specs(model)
    encoder_count = len(model.encoder.initial_state(1))
    predictor_count = len(model.predictor.initial_state(1))
    steps = keras_graph_steps(model)
    durations = getattr(model.joiner, "durations", None)
    names = ["audio", "valid"] + [f"state_{i}" for i in range(len(states))]
    specs = [tf.TensorSpec([1, window], tf.float32), tf.TensorSpec([1], tf.int32)]

    def body(audio, valid, *state):
        values, _ = features(audio)  # [1, chunk_frames, F]
        # Frames past `valid` are zeros, as TransducerStream pads its features.
        mask = tf.sequence_mask(valid, chunk_frames)[..., None]
        values = values * tf.cast(mask, values.dtype)
        if model.normalizer is not None:
            values, _ = model.normalizer(values, valid)
        encoder_state = list(state[:encoder_count])
        predictor_state = list(state[encoder_count : encoder_count + predictor_count])
        decoder, skip, context, started = state[encoder_count + predictor_count :]
        # Before the first window: the prediction network after the blank
        # (what greedy_graph_start gives), as a search starts.
        fresh = tf.equal(started[0], 0)
        start = greedy_graph_start(steps, 1)
        decoder = tf.where(fresh, start.decoder, decoder)
        predictor_state = [
            tf.where(fresh, s0, s)
            for s0, s in zip(start.predictor, predictor_state, strict=True)
        ]
        encoded, new_encoder = model.encoder.step(values, encoder_state, valid)
        projected = model.joiner.project_encoder(encoded)
        frames = (valid + stack - 1) // stack
        search = GreedyGraphState(decoder, predictor_state, skip, context)
        hyps, after = label_looping_continue(
            projected, frames, steps, search, durations, max_symbols, hotwords=hotwords
        )
        out = {
            "labels": hyps.labels,
            "label_count": hyps.label_length,
            "frames": hyps.frames,
            "confidence": hyps.confidence,
        }
        new_state = [*new_encoder, *after.predictor, after.decoder, after.skip,
                     after.context, tf.ones_like(started)]  # fmt: skip
        out.update({f"new_state_{i}": s for i, s in enumerate(new_state)})
        return out

    return _named_function(body, specs + states, names), window, states


def export_recognizer(
    model: "Transducer",
    export_dir: str,
    text_encoder: "TextEncoder",
    features: "LogMelSpectrogram",
    chunk_frames: int | None = None,
    quantization: str | None = None,
    max_symbols_per_frame: int = 3,
    hotwords: HotwordGraph | None = None,
) -> dict[str, int]:
    """Writes a Transducer with its greedy search as one TFLite program.

    Args:
      model: a built `tf_transducer.models.Transducer` taking features.
      export_dir: the folder to create or replace (all or nothing).
      text_encoder: its `CharacterAlphabet` or `SubwordEncoder`.
      features: the `LogMelSpectrogram` layer that made its training features.
      chunk_frames: feature frames per window (see `export_transducer`).
      quantization: None (float) or "dynamic" (int8 weights).
      max_symbols_per_frame: of the greedy search.
      hotwords: a `HotwordGraph` compiled into the program.

    Returns:
      {file name: size in bytes}.
    """
    quantization = check_quantization(quantization)
    if quantization == "int8":
        raise ValueError(
            'quantization="int8" is not offered for the one-program recognizer '
            '(its search loop has no calibrated integer form); use "dynamic"'
        )
    if chunk_frames is None:
        chunk_frames = model.encoder.default_chunk_frames
    check_chunk_frames(chunk_frames, model.encoder.subsampling)
    if features.n_mels != model.feature_dim:
        raise ValueError(
            f"features gives {features.n_mels} values per frame, the model takes "
            f"{model.feature_dim}"
        )
    program, window, states = _recognizer_program(
        model, features, chunk_frames, max_symbols_per_frame, hotwords
    )
    meta = {
        "model": MODEL,
        "sample_rate": features.sample_rate,
        "frame_length": features.frame_length,
        "frame_step": features.frame_step,
        "chunk_frames": chunk_frames,
        "stack": model.encoder.subsampling,
        "window_samples": window,
        "state_shapes": [list(s.shape) for s in states],
        "state_dtypes": [s.dtype.name for s in states],
        "max_symbols_per_frame": max_symbols_per_frame,
        "hotwords": hotwords is not None,
    }
    durations = getattr(model.joiner, "durations", None)
    if durations is not None:
        meta["durations"] = list(durations)

    def extras(folder):
        from tf_transducer.data.text import save_text_encoder_json

        save_text_encoder_json(text_encoder, os.path.join(folder, "text_encoder.json"))

    return write_export(
        export_dir, {"recognizer": program}, quantization, ("recognizer",), meta, extras
    )


class RecognizerStream(AudioStream):
    """Streaming recognition with `recognizer.tflite` (LiteRT), one program.

    The API of `TransducerStream`: `feed` audio in any pieces, `finish` for
    the transcript, or `transcribe` a whole signal; `labels`, `frames`
    (encoder frames from the utterance's start) and `confidence` of the
    labels so far.

    Args:
      export_dir: a folder written by `export_recognizer`.
      quantization: None (whatever it holds) or the mode expected.
      num_threads: interpreter threads.
    """

    def __init__(
        self, export_dir: str, quantization: str | None = None, num_threads: int = 1
    ) -> None:
        from tf_transducer.data.text import load_text_encoder_json

        def inputs(meta):
            count = len(meta["state_shapes"])
            return {
                "recognizer": ["audio", "valid"] + [f"state_{i}" for i in range(count)]
            }

        self.meta, self.quantization, programs = open_export(
            export_dir, MODEL, "Transducer recognizer", META_KEYS, quantization,
            num_threads, inputs,
        )  # fmt: skip
        self.program = programs["recognizer"]
        self.text_encoder = load_text_encoder_json(
            os.path.join(export_dir, "text_encoder.json")
        )
        self.reset()

    @property
    def sample_rate(self) -> int:
        return self.meta["sample_rate"]

    def reset(self) -> None:
        """Forgets the utterance: audio, state and labels."""
        self._audio = np.zeros([0], np.float32)
        m = self.meta
        self._state = [
            np.zeros(shape, dtype)
            for shape, dtype in zip(m["state_shapes"], m["state_dtypes"], strict=True)
        ]
        self._windows = 0
        self.labels: list[int] = []
        self.frames: list[int] = []
        self.confidence: list[float] = []

    def step(
        self, window: ArrayLike, valid: int, state: list[np.ndarray]
    ) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
        """One run of the program, its inputs checked (what an app does per window).

        Args:
          window: float32 [W] audio samples (export.json's window_samples).
          valid: the window's feature frames with real audio, 0..chunk_frames.
          state: the state (zeros at an utterance's start; then the last
            run's new state).

        Returns:
          ({"labels", "frames", "confidence"} of the new labels, the new state).
        """
        m = self.meta
        window = np.asarray(window, np.float32).reshape(-1)
        if window.shape != (m["window_samples"],):
            raise ValueError(
                f"window must hold {m['window_samples']} samples, got {window.shape[0]}"
            )
        if (
            not isinstance(valid, int | np.integer)
            or not 0 <= valid <= m["chunk_frames"]
        ):
            raise ValueError(
                f"valid must be an int in [0, {m['chunk_frames']}], got {valid!r}"
            )
        shapes, dtypes = m["state_shapes"], m["state_dtypes"]
        if len(state) != len(shapes):
            raise ValueError(f"state must hold {len(shapes)} arrays, got {len(state)}")
        for i, (value, shape, dtype) in enumerate(
            zip(state, shapes, dtypes, strict=True)
        ):
            if list(np.shape(value)) != list(shape):
                raise ValueError(
                    f"state[{i}] must have the shape {shape} ({dtype}), got "
                    f"{list(np.shape(value))}"
                )
        inputs = {f"state_{i}": s for i, s in enumerate(state)}
        out = self.program(
            audio=window[None], valid=np.array([valid], np.int32), **inputs
        )
        count = int(out["label_count"][0])
        found = {k: out[k][0, :count] for k in ("labels", "frames", "confidence")}
        return found, [out[f"new_state_{i}"] for i in range(len(state))]

    def _run(self, window: np.ndarray, valid: int) -> None:
        m = self.meta
        found, self._state = self.step(window, valid, self._state)
        offset = self._windows * m["chunk_frames"] // m["stack"]
        self.labels += found["labels"].tolist()
        self.frames += (found["frames"] + offset).tolist()
        self.confidence += found["confidence"].tolist()
        self._windows += 1

    def feed(self, audio: ArrayLike) -> None:
        """Adds audio samples [N]; runs every window they complete."""
        m = self.meta
        self._audio = np.concatenate([self._audio, check_audio(audio)])
        advance = m["chunk_frames"] * m["frame_step"]
        while len(self._audio) >= m["window_samples"]:
            self._run(self._audio[: m["window_samples"]], m["chunk_frames"])
            self._audio = self._audio[advance:]

    def finish(self) -> str:
        """Runs the last, partial window; returns the transcript."""
        m = self.meta
        if len(self._audio) >= m["frame_length"]:
            valid = (len(self._audio) - m["frame_length"]) // m["frame_step"] + 1
            window = np.zeros([m["window_samples"]], np.float32)
            window[: len(self._audio)] = self._audio
            self._run(window, valid)
        self._audio = self._audio[:0]
        return self.text_encoder.decode(self.labels)
