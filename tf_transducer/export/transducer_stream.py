# SPDX-License-Identifier: Apache-2.0
"""TransducerStream: streaming greedy recognition with an exported Transducer.

It runs the four programs `export_transducer` writes (features, encoder,
predictor, joiner; see `tf_transducer.export.transducer`) with the LiteRT
interpreter: audio fed in any chunk sizes, greedy search run as encoder
chunks complete. Its transcript equals the offline Keras greedy transcript
(float programs). A Token-and-Duration Transducer's export (export.json's
"durations") is decoded by the TDT greedy search, which evaluates the
joiner only on the frames its durations land on, across chunk boundaries.
A hybrid model's export (export.json's "ctc_head") can be decoded by its
CTC head instead (`decoder="ctc"`): the best path of the encoder program's
"ctc_logits", with no predictor or joiner run.
"""

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from tf_transducer.decoding.ctc import CtcGreedyState
from tf_transducer.decoding.ctc import ctc_greedy_continue
from tf_transducer.decoding.hotwords import HotwordGraph
from tf_transducer.decoding.hotwords import check_hotwords
from tf_transducer.decoding.hybrid import DECODERS
from tf_transducer.decoding.tdt import TdtGreedyState
from tf_transducer.decoding.tdt import tdt_greedy_continue
from tf_transducer.decoding.transducer import GreedyState
from tf_transducer.decoding.transducer import State
from tf_transducer.decoding.transducer import greedy_continue
from tf_transducer.export._runner import AudioStream
from tf_transducer.export._runner import Program
from tf_transducer.export._runner import check_audio
from tf_transducer.export._runner import open_export

MODEL = "tf_transducer.Transducer"

META_KEYS = (
    "sample_rate",
    "frame_length",
    "frame_step",
    "feature_dim",
    "chunk_frames",
    "stack",
    "chunk_size",
    "left_context",
    "encoder_state_shapes",
    "predictor_states",
    "vocab_size",
    "quantization",
    "programs",
)
# The programs quantised in "dynamic" / "int8" exports; the others stay float.
QUANTIZED = ("encoder", "predictor")


def _program_inputs(meta: Mapping[str, Any]) -> dict[str, list[str]]:
    """The input names of the four programs (the states' count from export.json)."""
    encoder = [f"state_{i}" for i in range(len(meta["encoder_state_shapes"]))]
    predictor = [f"state_{i}" for i in range(len(meta["predictor_states"]))]
    return {
        "features": ["audio"],
        "encoder": ["features", "valid", *encoder],
        "predictor": ["label", *predictor],
        "joiner": ["encoder", "decoder"],
    }


class _TfliteSteps:
    """The decoding step functions on the predictor and joiner programs."""

    def __init__(
        self, programs: Mapping[str, Program], meta: Mapping[str, Any]
    ) -> None:
        self.programs, self.meta = programs, meta

    def start(self, batch: int) -> tuple[np.ndarray, State]:
        if batch != 1:
            raise ValueError("the TFLite programs decode one utterance at a time")
        state = [
            np.zeros([1, *shape], dtype)
            for shape, dtype in zip(
                self.meta["predictor_states"], _state_dtypes(self.meta), strict=True
            )
        ]
        return self.predict(np.zeros([1], np.int32), state)

    def predict(self, labels: np.ndarray, state: State) -> tuple[np.ndarray, State]:
        inputs = {f"state_{i}": s for i, s in enumerate(state)}
        out = self.programs["predictor"](label=np.asarray(labels, np.int32), **inputs)
        new_state = [out[f"new_state_{i}"] for i in range(len(state))]
        return out["decoder"], new_state

    def joint(self, encoder: np.ndarray, decoder: np.ndarray) -> np.ndarray:
        return self.programs["joiner"](encoder=encoder, decoder=decoder)["logits"]

    def joint_heads(
        self, encoder: np.ndarray, decoder: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """A TDT export's joiner: (token logits [1, V], duration logits [1, K])."""
        # The program takes one row: the TDT search gives it one utterance.
        out = self.programs["joiner"](encoder=encoder, decoder=decoder)
        return out["logits"], out["durations"]


class TransducerStream(AudioStream):
    """Streaming greedy recognition with an exported Transducer (LiteRT).

    Args:
      export_dir: a folder written by `export_transducer`.
      quantization, num_threads: as `open_export`'s (None: the export's mode).
      max_symbols_per_frame: of the greedy search.
      hotwords: a `HotwordGraph` (`tf_transducer.decoding.hotword_graph`)
        whose phrases the search boosts.
      decoder: "transducer" (greedy search), or "ctc": a hybrid export's
        CTC head (best path; no hotwords).

    Audio is mono float32 in [-1, 1] (int16 is scaled by 1 / 32768) at the
    export's `sample_rate`.
    """

    def __init__(
        self,
        export_dir: str,
        quantization: str | None = None,
        num_threads: int = 1,
        max_symbols_per_frame: int = 3,
        hotwords: HotwordGraph | None = None,
        decoder: str = "transducer",
    ) -> None:
        from tf_transducer.data.text import load_text_encoder_json

        self.meta, self.quantization, self.programs = open_export(
            export_dir, MODEL, "Transducer", META_KEYS, quantization, num_threads,
            _program_inputs,
        )  # fmt: skip
        self.text_encoder = load_text_encoder_json(
            os.path.join(export_dir, "text_encoder.json")
        )
        self._steps = _TfliteSteps(self.programs, self.meta)
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        if decoder == "ctc" and not self.meta.get("ctc_head"):
            raise ValueError(
                f'decoder="ctc": the export in {export_dir} has no CTC head '
                "(export a model trained with ctc_weight > 0)"
            )
        if decoder == "ctc" and hotwords is not None:
            raise ValueError(
                'hotwords are boosted by the transducer search, not decoder="ctc"'
            )
        self.decoder = decoder
        self.max_symbols_per_frame = max_symbols_per_frame
        if hotwords is not None:
            check_hotwords(hotwords, self.meta["vocab_size"])
        self.hotwords = hotwords
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
        self._search: GreedyState | TdtGreedyState | CtcGreedyState
        if self.decoder == "ctc":
            self._search = CtcGreedyState(1)
        elif self.durations is None:
            self._search = GreedyState(self._steps, 1)
        else:
            self._search = TdtGreedyState(self._steps, 1)

    @property
    def durations(self) -> list[int] | None:
        """The export's duration head (a Token-and-Duration Transducer), or None."""
        return self.meta.get("durations")

    @property
    def joint_evaluations(self) -> int:
        """Joiner program runs of the utterance so far (TDT exports only)."""
        if not isinstance(self._search, TdtGreedyState):
            raise ValueError("joint_evaluations is counted for TDT exports only")
        return int(self._search.evaluations[0])

    @property
    def labels(self) -> list[int]:
        return list(self._search.hyps[0])

    @property
    def frames(self) -> list[int]:
        """The encoder frame of each label, from the utterance's start."""
        return list(self._search.frames[0])

    @property
    def confidence(self) -> list[float]:
        """Each label's entropy confidence in [0, 1]."""
        return list(self._search.confidence[0])

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
        if isinstance(self._search, CtcGreedyState):
            ctc_greedy_continue(out["ctc_logits"], [frames], self._search)
            return
        if isinstance(self._search, TdtGreedyState):
            durations = self.meta["durations"]
            tdt_greedy_continue(out["encoder"], [frames], self._steps, self._search,
                                durations, self.max_symbols_per_frame,
                                hotwords=self.hotwords)  # fmt: skip
            return
        greedy_continue(
            out["encoder"],
            [frames],
            self._steps,
            self._search,
            self.max_symbols_per_frame,
            hotwords=self.hotwords,
        )


def _state_dtypes(meta: Mapping[str, Any]) -> list[str]:
    """The prediction network's state dtypes an export.json records.

    Exports written before "predictor_state_dtypes" existed name the kind
    instead: a stateless network's state is its last labels (int32).
    """
    if "predictor_state_dtypes" in meta:
        return list(meta["predictor_state_dtypes"])
    dtype = "int32" if meta.get("predictor_kind") == "stateless" else "float32"
    return [dtype] * len(meta["predictor_states"])
