# SPDX-License-Identifier: Apache-2.0
"""DeepSpeech (Mozilla DeepSpeech 0.9's acoustic model) as a Keras 3 model."""

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import with_attributes
from tf_transducer.layers import FrameStacking
from tf_transducer.layers import Mfcc
from tf_transducer.layers import SpecAugment
from tf_transducer.models._inputs import optimizer_step
from tf_transducer.models._inputs import split_inputs


@keras.saving.register_keras_serializable(package="tf_transducer")
class DeepSpeech(keras.Model):
    """MFCCs in context windows -> 3 clipped-ReLU layers -> LSTM -> 1 more -> logits.

    Per frame t of 26 MFCCs (20 ms apart), the input is the window of frames
    t - n_context .. t + n_context (zeros beyond the utterance), then

        h1..h3 = dropout(min(relu(W h + b), relu_clip))      n_hidden each
        h4     = LSTM(h3)                                    n_hidden, forward only
        h5     = dropout(min(relu(W h4 + b), relu_clip))     n_hidden
        logits = W h5 + b                                    num_classes

    With the defaults (n_hidden 2048, 29 classes) that is DeepSpeech 0.9's
    47.2 M parameters. Class 0 is the CTC blank (tf_transducer's convention;
    DeepSpeech itself put it last). Train with `CtcLoss`: the logits carry a
    Keras mask of each utterance's frames.

    Args:
      num_classes: alphabet size + 1 (the blank).
      n_hidden: width of every hidden layer and of the LSTM.
      n_context: context frames on each side.
      n_input: MFCCs per frame.
      relu_clip: the ReLU's ceiling.
      dropout_rate: dropout of layer 1, and of the others given as -1;
      dropout_rate2, dropout_rate3, dropout_rate6: layers 2, 3 and 5.
        dropout_rate4 and dropout_rate5 are accepted (DeepSpeech's flags) and,
        as in DeepSpeech 0.9, unused.
      audio_input: take 16-bit-range float audio [B, N] and compute the MFCCs
        inside (the `Mfcc` layer: DeepSpeech's 32 ms / 20 ms preset).
      sample_rate, feature_win_len, feature_win_step: of those MFCCs (Hz, ms).
      augment: None, a SpecAugment preset name ("LB", "LD", "SM", "SS") or a
        SpecAugment config dict, applied to the MFCCs in training.

    Call arguments:
      inputs: (features [B, T, n_input], lengths [B]) or, with audio_input,
        (audio [B, N], lengths [B] samples); lengths may be omitted.
      training: dropout and augmentation only when True.

    Returns:
      logits [B, T, num_classes] (masked: each utterance's frames).
    """

    def __init__(
        self, num_classes: int = 29, n_hidden: int = 2048, n_context: int = 9,
        n_input: int = 26, relu_clip: float = 20.0, dropout_rate: float = 0.05,
        dropout_rate2: float = -1.0, dropout_rate3: float = -1.0,
        dropout_rate4: float = 0.0, dropout_rate5: float = 0.0,
        dropout_rate6: float = -1.0, audio_input: bool = False,
        sample_rate: int = 16000, feature_win_len: float = 32.0,
        feature_win_step: float = 20.0, augment: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        for name, value in (("num_classes", num_classes), ("n_hidden", n_hidden),
                            ("n_input", n_input)):  # fmt: skip
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(n_context, int) or n_context < 0:
            raise ValueError(f"n_context must be an int >= 0, got {n_context!r}")
        if relu_clip <= 0:
            raise ValueError(f"relu_clip must be > 0, got {relu_clip}")
        rates = [dropout_rate, dropout_rate2, dropout_rate3, dropout_rate4,
                 dropout_rate5, dropout_rate6]  # fmt: skip
        rates = [dropout_rate if r < 0 else r for r in rates]
        for i, r in enumerate(rates):
            if not 0.0 <= r < 1.0:
                name = "dropout_rate" + ("" if i == 0 else str(i + 1))
                raise ValueError(f"{name} must lie in [0, 1), got {r}")
        self.num_classes = num_classes
        self.n_hidden = n_hidden
        self.n_context = n_context
        self.n_input = n_input
        self.relu_clip = float(relu_clip)
        self.dropout_rates = rates
        self.audio_input = bool(audio_input)
        self.sample_rate = sample_rate
        self.feature_win_len = feature_win_len
        self.feature_win_step = feature_win_step
        self.augment = augment
        self.supports_masking = True

        self.mfcc = Mfcc(
            sample_rate, feature_win_len, feature_win_step, n_coefficients=n_input
        )
        self.spec_augment = SpecAugment.from_arg(augment)
        self.context = FrameStacking(n_context, n_context)
        self.hidden = [
            keras.layers.Dense(n_hidden, name=f"layer_{i}") for i in (1, 2, 3)
        ]
        self.lstm = keras.layers.LSTM(
            n_hidden, return_sequences=True, return_state=True, name="lstm"
        )
        self.layer_5 = keras.layers.Dense(n_hidden, name="layer_5")
        self.layer_6 = keras.layers.Dense(num_classes, name="layer_6")
        self.dropouts = [keras.layers.Dropout(rates[i]) for i in (0, 1, 2, 5)]

    def build(self, input_shape: Any = None) -> None:
        width = self.window_size
        for layer in self.hidden:
            layer.build((None, None, width))
            width = self.n_hidden
        self.lstm.build((None, None, self.n_hidden))
        self.layer_5.build((None, None, self.n_hidden))
        self.layer_6.build((None, None, self.n_hidden))
        if self.spec_augment is not None:
            self.spec_augment.build((None, None, self.n_input))
        self.built = True

    @property
    def window_size(self) -> int:
        """Inputs per frame of the acoustic model: (2 n_context + 1) n_input."""
        return (2 * self.n_context + 1) * self.n_input

    def _split(self, inputs):
        return split_inputs(inputs, "audio" if self.audio_input else "features")

    def features(
        self, inputs: Any, training: bool | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """(MFCCs [B, T, n_input], frames [B]) of the inputs, augmented in training."""
        values, lengths = self._split(inputs)
        if self.audio_input:
            values, lengths = self.mfcc(values, lengths)
        if self.spec_augment is not None and training:
            values = self.spec_augment(
                values, lengths, training=True, step=optimizer_step(self)
            )
        return values, lengths

    def _clipped(self, layer, x):
        return tf.minimum(tf.nn.relu(layer(x)), self.relu_clip)

    def acoustic(
        self,
        windows: TensorLike,
        lengths: TensorLike | None = None,
        initial_state: Sequence[TensorLike] | None = None,
        training: bool | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Logits and the LSTM's final (h, c) of context windows [B, T, window_size]."""
        x = windows
        for layer, dropout in zip(self.hidden, self.dropouts[:3], strict=True):
            x = dropout(self._clipped(layer, x), training=training)
        mask = None if lengths is None else tf.sequence_mask(lengths, tf.shape(x)[1])
        x, h, c = self.lstm(
            x, mask=mask, initial_state=initial_state, training=training
        )
        x = self.dropouts[3](self._clipped(self.layer_5, x), training=training)
        return self.layer_6(x), h, c

    def call(self, inputs: Any, training: bool | None = None) -> tf.Tensor:
        values, lengths = self.features(inputs, training=training)
        windows, lengths = self.context(values, lengths)
        logits, _, _ = self.acoustic(windows, lengths, training=training)
        return logits

    def frame_lengths(self, inputs: Any) -> tf.Tensor:
        """int32 [B]: the logit frames of each utterance."""
        values, lengths = self._split(inputs)
        if self.audio_input:
            step, window = self.mfcc.frame_step, self.mfcc.frame_length
            full = (lengths - window) // step + 1
            return tf.where(lengths >= window, full, tf.zeros_like(full))
        return lengths

    def compute_mask(self, inputs: Any, mask: Any = None) -> tf.Tensor:
        values, _ = self._split(inputs)
        frames = tf.shape(values)[1]
        if self.audio_input:
            frames = tf.maximum(
                (frames - self.mfcc.frame_length) // self.mfcc.frame_step + 1, 0
            )
        return tf.sequence_mask(self.frame_lengths(inputs), frames)

    def step(
        self, windows: tf.Tensor, state_h: TensorLike, state_c: TensorLike
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """One streaming step: (logits [B, n_steps, num_classes], state_h, state_c).

        windows [B, n_steps, window_size] (n_steps static) and the LSTM state
        [B, n_hidden] x 2. The LSTM is unrolled over the n_steps frames (as
        DeepSpeech's TFLite graph was), so that TFLite runs it without
        variables or loops.
        """
        if windows.shape[1] is None:
            raise ValueError("step() needs a static number of frames (n_steps)")
        x = windows
        for layer in self.hidden:
            x = self._clipped(layer, x)
        state = [state_h, state_c]
        outputs = []
        for t in range(windows.shape[1]):
            out, state = self.lstm.cell(x[:, t], state, training=False)
            outputs.append(out)
        x = self._clipped(self.layer_5, tf.stack(outputs, axis=1))
        return self.layer_6(x), state[0], state[1]

    def get_config(self) -> dict[str, Any]:
        names = ["dropout_rate"] + [f"dropout_rate{i}" for i in range(2, 7)]
        rates = dict(zip(names, self.dropout_rates, strict=True))
        return with_attributes(
            dict(super().get_config(), **rates), self, "num_classes", "n_hidden",
            "n_context", "n_input", "relu_clip", "audio_input", "sample_rate",
            "feature_win_len", "feature_win_step", "augment",
        )  # fmt: skip
