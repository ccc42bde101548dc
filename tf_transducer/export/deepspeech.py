# SPDX-License-Identifier: Apache-2.0
"""DeepSpeech to TFLite for streaming, and a LiteRT runner that transcribes WAVs.

An export folder holds:

- `features.tflite`: audio [1, N] -> MFCCs [1, T, n_input] (the model's own
  Mfcc layer; any N);
- `acoustic.tflite` (float, or quantised: "dynamic" int8 weights, or
  "int8" full integer calibrated on training audio): one streaming step,
  (windows [1, n_steps, (2 n_context + 1) n_input], previous_state_h
  [1, n_hidden], previous_state_c [1, n_hidden]) -> (logits [1, n_steps,
  num_classes], new_state_h, new_state_c);
- `alphabet.txt` and `export.json` (rates, sizes, n_steps).

All programs use TFLite built-in ops only; the features program (its DFT
and filterbank constants) is never quantised. `export.json` records the
mode. `DeepSpeechStream` feeds audio
in chunks: it computes the MFCC frames as their samples arrive, builds each
frame's context window once its right context has arrived, and runs the
acoustic step every n_steps windows with the LSTM state carried over. The
logits equal the offline model's.
"""

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from tf_transducer.export._convert import check_calibration
from tf_transducer.export._convert import record_inputs
from tf_transducer.export._folders import write_export
from tf_transducer.export._runner import check_audio
from tf_transducer.export._runner import open_export

if TYPE_CHECKING:
    from tf_transducer.data.text import CharacterAlphabet
    from tf_transducer.decoding.lm import WordScorer
    from tf_transducer.models import DeepSpeech

MODEL = "tf_transducer.DeepSpeech"

FILES = ("features.tflite", "acoustic.tflite")


def export_deepspeech(
    model: "DeepSpeech", export_dir: str, alphabet: "CharacterAlphabet",
    n_steps: int = 16, quantization: str | None = None,
    calibration_audio: Iterable[np.ndarray] | None = None,
) -> dict[str, int]:  # fmt: skip
    """Writes the streaming TFLite programs of a DeepSpeech model to export_dir.

    Args:
      model: a built `tf_transducer.models.DeepSpeech`.
      export_dir: the folder to create or replace (written to a temporary
        folder first and moved into place).
      alphabet: its `CharacterAlphabet`.
      n_steps: frames per acoustic step.
      quantization: None (float), "dynamic" (int8 weights) or "int8" (full
        integer acoustic program, calibrated on calibration_audio).
      calibration_audio: for "int8": an iterable of mono float32 signals
        [N] at the model's sample rate (a few hundred training utterances).

    Returns:
      {file name: size in bytes}.
    """
    quantization = check_calibration(
        quantization, calibration_audio, "calibration_audio"
    )
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int, got {n_steps!r}")
    mfcc = model.mfcc

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32)])
    def features(audio):
        values, _ = mfcc(audio)
        return {"mfcc": values}

    spec = [
        tf.TensorSpec([1, n_steps, model.window_size], tf.float32),
        tf.TensorSpec([1, model.n_hidden], tf.float32),
        tf.TensorSpec([1, model.n_hidden], tf.float32),
    ]

    @tf.function(input_signature=spec)
    def acoustic(windows, previous_state_h, previous_state_c):
        logits, h, c = model.step(windows, previous_state_h, previous_state_c)
        return {"logits": logits, "new_state_h": h, "new_state_c": c}

    meta = {
        "model": MODEL,
        "sample_rate": model.sample_rate,
        "frame_length": mfcc.frame_length,
        "frame_step": mfcc.frame_step,
        "n_input": model.n_input,
        "n_context": model.n_context,
        "n_hidden": model.n_hidden,
        "num_classes": model.num_classes,
        "n_steps": n_steps,
    }

    def calibrate(folder):
        return record_inputs(
            DeepSpeechStream(folder),
            ["acoustic"],
            lambda stream, audio: stream.transcribe(audio),
            calibration_audio,
        )

    return write_export(
        export_dir,
        {"features": features, "acoustic": acoustic},
        quantization,
        ["acoustic"],  # the features program (DFT, filterbank) stays float
        meta,
        lambda folder: alphabet.save(os.path.join(folder, "alphabet.txt")),
        calibrate,
    )


META_KEYS = (
    "sample_rate",
    "frame_length",
    "frame_step",
    "n_input",
    "n_context",
    "n_hidden",
    "num_classes",
    "n_steps",
    "quantization",
)


class DeepSpeechStream:
    """Streaming recognition with an exported DeepSpeech (LiteRT interpreter).

    Args:
      export_dir: a folder written by `export_deepspeech`.
      quantization, num_threads: as `open_export`'s (None: the export's mode).

    Use `feed(audio)` with mono float32 chunks (any sizes) in [-1, 1] (int16
    is scaled by 1 / 32768) at the export's sample rate, then `finish()`;
    `logits` holds [T, C] so far.
    """

    def __init__(
        self, export_dir: str, quantization: str | None = None, num_threads: int = 1
    ) -> None:
        from tf_transducer.data import CharacterAlphabet

        self.meta, self.quantization, self.programs = open_export(
            export_dir, MODEL, "DeepSpeech", META_KEYS, quantization, num_threads,
            {"features": ["audio"],
             "acoustic": ["windows", "previous_state_h", "previous_state_c"]},
        )  # fmt: skip
        self.alphabet = CharacterAlphabet.from_file(
            os.path.join(export_dir, "alphabet.txt")
        )
        self.reset()

    @property
    def sample_rate(self) -> int:
        return self.meta["sample_rate"]

    def reset(self) -> None:
        m = self.meta
        self._audio = np.zeros([0], np.float32)  # samples from frame _done on
        self._done = 0  # MFCC frames computed
        self._frames = [np.zeros(m["n_input"], np.float32)] * m["n_context"]
        self._next = 0  # next frame whose window is due
        self._pending: list[np.ndarray] = []  # windows not yet run
        self._state = [np.zeros([1, m["n_hidden"]], np.float32)] * 2
        self._logits: list[np.ndarray] = []

    @property
    def logits(self) -> np.ndarray:
        if not self._logits:
            return np.zeros([0, self.meta["num_classes"]], np.float32)
        return np.concatenate(self._logits)

    def feed(self, audio: ArrayLike) -> None:
        """Adds audio samples; runs whatever they complete."""
        m = self.meta
        self._audio = np.concatenate([self._audio, check_audio(audio)])
        if len(self._audio) >= m["frame_length"]:
            new = (len(self._audio) - m["frame_length"]) // m["frame_step"] + 1
            used = (new - 1) * m["frame_step"] + m["frame_length"]
            mfcc = self.programs["features"](audio=self._audio[np.newaxis, :used])[
                "mfcc"
            ]
            self._audio = self._audio[new * m["frame_step"] :]
            self.feed_features(mfcc[0])

    def feed_features(self, frames: ArrayLike) -> None:
        """Adds MFCC frames [n, n_input] (instead of audio); runs what they complete."""
        frames = np.asarray(frames, np.float32)
        self._frames.extend(frames)
        self._done += len(frames)
        self._windows(final=False)

    def finish(self) -> np.ndarray:
        """Ends the utterance: the last frames get zero right context."""
        self._frames.extend(
            [np.zeros(self.meta["n_input"], np.float32)] * self.meta["n_context"]
        )
        self._windows(final=True)
        return self.logits

    def _windows(self, final: bool) -> None:
        m = self.meta
        c, width = m["n_context"], 2 * m["n_context"] + 1
        # self._frames[i] is frame i - c (c zero frames lead).
        while self._next < self._done and (final or self._next + c < self._done):
            window = self._frames[self._next : self._next + width]
            self._pending.append(np.concatenate(window))
            self._next += 1
        while len(self._pending) >= m["n_steps"] or (final and self._pending):
            chunk = self._pending[: m["n_steps"]]
            self._pending = self._pending[m["n_steps"] :]
            self._run(chunk)

    def _run(self, windows: list[np.ndarray]) -> None:
        m = self.meta
        valid = len(windows)
        padded = windows + [np.zeros_like(windows[0])] * (m["n_steps"] - valid)
        out = self.programs["acoustic"](
            windows=np.stack(padded)[np.newaxis],
            previous_state_h=self._state[0],
            previous_state_c=self._state[1],
        )
        self._state = [out["new_state_h"], out["new_state_c"]]
        self._logits.append(out["logits"][0, :valid])

    def transcribe(
        self, audio: ArrayLike, chunk_samples: int = 3200, beam_width: int = 1,
        scorer: "WordScorer | None" = None, alpha: float = 0.75, beta: float = 1.85,
        sample_rate: int | None = None,
    ) -> tuple[str, np.ndarray]:  # fmt: skip
        """(transcript, logits [T, C]) of a whole signal [N] fed in chunks.

        sample_rate, when given, must be the export's (an error otherwise).
        """
        from tf_transducer.decoding import ctc_beam_search
        from tf_transducer.decoding import ctc_greedy_decode

        audio = check_audio(audio, sample_rate, self.sample_rate, allow_empty=False)
        self.reset()
        for start in range(0, len(audio), chunk_samples):
            self.feed(audio[start : start + chunk_samples])
        logits = self.finish()
        if beam_width == 1 and scorer is None:
            (labels,) = ctc_greedy_decode(logits[np.newaxis])
        else:
            (labels,) = ctc_beam_search(
                logits[np.newaxis],
                None,
                beam_width,
                scorer=scorer,
                alpha=alpha,
                beta=beta,
            )
        return self.alphabet.decode(labels), logits
