# SPDX-License-Identifier: Apache-2.0
"""export_transducer: a Transducer as streaming TFLite programs.

An export folder holds:

- `features.tflite`: audio [1, N] -> features [1, T, F] (LogMelSpectrogram);
- `encoder.tflite`: one chunk of `chunk_frames` feature frames + the valid
  count + the encoder's states -> projected encoder frames
  [1, chunk_frames / subsampling, J] + new states (normalisation inside).
  A hybrid model's encoder program also gives its CTC head's logits
  "ctc_logits" [1, chunk_frames / subsampling, V] (export.json "ctc_head").
  The states are `encoder.initial_state(1)`'s (the streaming-encoder
  contract of `tf_transducer.layers.streaming`): the LSTMs' h and c, or the
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

`TransducerStream` (`tf_transducer.export.transducer_stream`) runs them.
"""

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from tf_transducer.export._convert import check_calibration
from tf_transducer.export._convert import record_inputs
from tf_transducer.export._folders import write_export
from tf_transducer.export.transducer_stream import MODEL
from tf_transducer.export.transducer_stream import QUANTIZED
from tf_transducer.export.transducer_stream import TransducerStream
from tf_transducer.layers.streaming import check_chunk_frames

if TYPE_CHECKING:
    from tf_transducer.data.text import TextEncoder
    from tf_transducer.layers import LogMelSpectrogram
    from tf_transducer.models import Transducer


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
        encoded, new_states = encoder.step(features, list(states), valid)
        out = {"encoder": model.joiner.project_encoder(encoded)}
        if model.ctc_head is not None:  # a hybrid model's second decoder
            out["ctc_logits"] = model.ctc_head(encoded)
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
    model: "Transducer", export_dir: str, text_encoder: "TextEncoder",
    features: "LogMelSpectrogram", chunk_frames: int | None = None,
    quantization: str | None = None,
    calibration_audio: Iterable[np.ndarray] | None = None,
) -> dict[str, int]:  # fmt: skip
    """Writes the streaming TFLite programs of a Transducer to export_dir.

    Args:
      model: a built `tf_transducer.models.Transducer` taking features.
      export_dir: the folder to create or replace (all or nothing).
      text_encoder: its `CharacterAlphabet` or `SubwordEncoder`.
      features: the `LogMelSpectrogram` layer that made its training features.
      chunk_frames: feature frames per encoder step, a multiple of the
        encoder's subsampling. Default: the encoder's `default_chunk_frames`
        (the Conformer's attention chunk, chunk_size * subsampling: the
        stream then equals the offline model, and n * subsampling equals it
        run with chunk_size=n; 4 * stack for the LSTMs, which any chunk
        streams exactly).
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
    stack = model.encoder.subsampling  # (export.json's name for it)
    if chunk_frames is None:
        chunk_frames = model.encoder.default_chunk_frames
    check_chunk_frames(chunk_frames, stack)
    if features.n_mels != model.feature_dim:
        raise ValueError(
            f"features gives {features.n_mels} values per frame, the model takes "
            f"{model.feature_dim}"
        )

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32, name="audio")])
    def feature_program(audio):
        values, _ = features(audio)
        return {"features": values}

    # A Token-and-Duration Transducer's joiner program returns both heads.
    durations = getattr(model.joiner, "durations", None)

    @tf.function(
        input_signature=[
            tf.TensorSpec([1, model.joiner.units], tf.float32, name="encoder"),
            tf.TensorSpec([1, model.joiner.units], tf.float32, name="decoder"),
        ]
    )
    def joiner_program(encoder, decoder):
        if durations is None:
            return {"logits": model.joiner.joint(encoder, decoder)}
        tokens, duration_logits = model.joiner.joint_heads(encoder, decoder)
        return {"logits": tokens, "durations": duration_logits}

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
        "encoder": type(model.encoder).__name__,
        # Encoder frames per step and those before a chunk each one sees
        # (None: an LSTM's whole past).
        "chunk_size": chunk_frames // stack,
        "left_context": model.encoder.left_context,
        "encoder_state_shapes": encoder_states,
        "predictor_states": state_shapes,
        "predictor_state_dtypes": [
            s.dtype.name for s in model.predictor.initial_state(1)
        ],
        "vocab_size": model.vocab_size,
    }
    if durations is not None:
        meta["durations"] = list(durations)
    if model.ctc_head is not None:
        meta["ctc_head"] = True

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
