# SPDX-License-Identifier: Apache-2.0
"""Running exported programs: the LiteRT interpreter and the runners' inputs."""

import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from tf_transducer._optional import require
from tf_transducer.export._convert import QUANTIZATIONS
from tf_transducer.export._convert import check_quantization
from tf_transducer.export._folders import META
from tf_transducer.export._folders import read_meta
from tf_transducer.export._quiet import quiet_tensorflow


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
            # LiteRT's INFO lines: on its first program, and "Created
            # TensorFlow Lite XNNPACK delegate" when the tensors are first
            # allocated (here, not on the first call).
            with quiet_tensorflow():
                self.interpreter = Interpreter(model_path=path, num_threads=num_threads)
                self.interpreter.allocate_tensors()
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


def open_export(
    export_dir: str,
    model: str,
    name: str,
    keys: Iterable[str],
    quantization: str | None,
    num_threads: int,
    inputs: Mapping[str, Sequence[str]]
    | Callable[[Mapping[str, Any]], Mapping[str, Sequence[str]]],
) -> tuple[dict[str, Any], str, dict[str, "Program"]]:
    """What every runner reads first: export.json, its mode, its programs.

    Args:
      export_dir: the export folder.
      model: the model export.json must name.
      name: the same in words, for messages.
      keys: the export.json keys the runner needs.
      quantization: None (whatever the export holds), or the mode expected.
      num_threads: interpreter threads.
      inputs: {program: its input names} (or export.json's content -> that);
        `<program>.tflite` each.

    Returns:
      (export.json's content, the quantisation mode, {program: Program}).
    """
    meta = read_meta(export_dir, model, name, keys)
    mode = check_export_quantization(export_dir, meta, quantization)
    if callable(inputs):
        inputs = inputs(meta)
    programs = {
        program: Program(
            os.path.join(export_dir, f"{program}.tflite"), num_threads, names
        )
        for program, names in inputs.items()
    }
    return meta, mode, programs


class AudioStream:
    """What the audio streams share: `transcribe` = reset, feed in chunks, finish.

    Subclasses give `sample_rate`, `reset()`, `feed(audio)` and
    `finish() -> str`.
    """

    @property
    def sample_rate(self) -> int:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def feed(self, audio: ArrayLike) -> None:
        raise NotImplementedError

    def finish(self) -> str:
        raise NotImplementedError

    def transcribe(
        self,
        audio: ArrayLike,
        chunk_samples: int = 1600,
        sample_rate: int | None = None,
    ) -> str:
        """The transcript of a whole signal [N] fed in chunks of chunk_samples.

        sample_rate, when given, must be the export's (an error otherwise).
        """
        audio = check_audio(audio, sample_rate, self.sample_rate, allow_empty=False)
        self.reset()
        for start in range(0, len(audio), chunk_samples):
            self.feed(audio[start : start + chunk_samples])
        return self.finish()
