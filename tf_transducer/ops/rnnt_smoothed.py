# SPDX-License-Identifier: Apache-2.0
"""The smoothed simple RNN-T loss (k2's rnnt_loss_smoothed).

It mixes the additive joiner's log-probs with LM-only and AM-only terms.

The lattices, rnnt_type and delay_penalty are as in `tf_transducer.ops.rnnt`;
the simple loss it smooths is `tf_transducer.ops.rnnt_simple`.
"""

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import real_number
from tf_transducer.ops._validation import _check_options
from tf_transducer.ops.rnnt_lattice import _finish_logprobs
from tf_transducer.ops.rnnt_lattice import _loss_from_logprobs
from tf_transducer.ops.rnnt_simple import _FLOAT32_SAFE_MIN
from tf_transducer.ops.rnnt_simple import _boundary_for_simple
from tf_transducer.ops.rnnt_simple import _pad_frames
from tf_transducer.ops.rnnt_simple import _simple_inputs
from tf_transducer.ops.rnnt_simple import _simple_loss_inputs
from tf_transducer.ops.rnnt_simple import _simple_parts
from tf_transducer.ops.rnnt_simple import _split_last_row
from tf_transducer.ops.rnnt_simple import _tiny
from tf_transducer.ops.rnnt_simple import _with_float64_fallback


def get_rnnt_logprobs_smoothed(
    lm: TensorLike, am: TensorLike, symbols: TensorLike, termination_symbol: int,
    lm_only_scale: float = 0.1, am_only_scale: float = 0.1,
    boundary: TensorLike | None = None, rnnt_type: str = "regular",
) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
    """px, py of the simple RNN-T, smoothed with LM-only and AM-only terms.

    Each log-prob is the mix

        (1 - lm_only_scale - am_only_scale) * log softmax(lm[s] + am[t])
        + lm_only_scale * log softmax(lm[s])
        + am_only_scale * log softmax(am[t] + log unigram)

    where unigram is the LM's distribution averaged over the batch and all
    histories (with a boundary, the histories inside it only: unlike k2,
    padding changes nothing).  A term whose scale is exactly 0 is left out
    (k2 uses 1e-20 there instead, so that 0 x -inf does not give NaN; leaving
    it out gives the same values). Half-precision inputs are computed in
    float32.

    Args:
      lm: float [B, S + 1, C], assumed normalisable on its own.
      am: float [B, T, C].
      symbols: int [B, S], values in [0, C).
      termination_symbol: int in [0, C), the blank.
      lm_only_scale: weight of the LM-only term, >= 0.
      am_only_scale: weight of the AM-only term, >= 0 (the two sum to <= 1).
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end).
      rnnt_type: "regular", "modified" or "constrained".

    Returns:
      px: [B, S, T + 1] (regular) or [B, S, T]; py: [B, S + 1, T].
    """
    _check_options(rnnt_type)
    lm_only_scale = real_number("lm_only_scale", lm_only_scale, minimum=0.0)
    am_only_scale = real_number("am_only_scale", am_only_scale, minimum=0.0)
    if lm_only_scale + am_only_scale > 1:
        raise ValueError(
            "lm_only_scale + am_only_scale must be <= 1, got "
            f"{lm_only_scale} + {am_only_scale}"
        )
    with tf.name_scope("get_rnnt_logprobs_smoothed"):
        lm, am, symbols, used_rows = _simple_inputs(
            lm, am, symbols, termination_symbol, rnnt_type, boundary
        )

        def logprobs(lm, am):
            return _smoothed_logprobs(
                lm,
                am,
                symbols,
                termination_symbol,
                rnnt_type,
                used_rows,
                (1.0 - lm_only_scale - am_only_scale, lm_only_scale, am_only_scale),
            )

        px, py = _with_float64_fallback(logprobs, lm, am)
        return _finish_logprobs(px, py, boundary, rnnt_type)


def _smoothed_logprobs(
    lm: tf.Tensor, am: tf.Tensor, symbols: tf.Tensor, termination_symbol: int,
    rnnt_type: str, used_rows: tf.Tensor | None, scales: tuple[float, float, float],
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """(px, py, fits) of get_rnnt_logprobs_smoothed for checked inputs.

    used_rows: bool [B, S + 1] or None (all); scales = (combined, lm-only,
    am-only).
    """
    parts = _simple_parts(lm, am, symbols, termination_symbol, rnnt_type)
    lm_only_norm = tf.reduce_sum(parts.lm_probs, axis=2, keepdims=True)  # [B, S+1, 1]
    lm_only = parts.lm_probs / lm_only_norm
    if used_rows is None:
        unigram = tf.reduce_mean(lm_only, axis=[0, 1])
    else:  # the used rows only, so that padding changes nothing
        weights = tf.cast(used_rows, lm.dtype)[..., tf.newaxis]
        unigram = tf.reduce_sum(lm_only * weights, axis=[0, 1]) / tf.maximum(
            tf.reduce_sum(weights), 1.0
        )
    unigram += _tiny(lm.dtype)  # [C]
    am_only_sum = tf.linalg.matvec(parts.am_probs, unigram)  # [B, T]
    am_only_norm = (tf.math.log(am_only_sum) + parts.am_max[..., 0])[:, tf.newaxis]
    log_unigram = tf.math.log(unigram)
    lm_only_norm = tf.math.log(lm_only_norm) + parts.lm_max  # [B, S + 1, 1]
    fits = parts.fits
    if lm.dtype == tf.float32:
        fits &= tf.reduce_all(am_only_sum >= _FLOAT32_SAFE_MIN)

    terms = [
        (  # log softmax(lm[s] + am[t])
            parts.px_am
            + parts.px_lm
            - _pad_frames(_split_last_row(parts.normalizers)[0], rnnt_type),
            parts.py_am + parts.py_lm - parts.normalizers,
        ),
        (  # log softmax(lm[s])
            parts.px_lm - lm_only_norm[:, :-1],
            parts.py_lm - lm_only_norm,
        ),
        (  # log softmax(am[t] + log unigram)
            parts.px_am
            + tf.gather(log_unigram, symbols)[..., tf.newaxis]
            - _pad_frames(am_only_norm, rnnt_type),
            parts.py_am + log_unigram[termination_symbol] - am_only_norm,
        ),
    ]
    used = [(scale, term) for scale, term in zip(scales, terms, strict=True) if scale]
    # Summed with broadcasting: the LM-only terms have one column.
    px = sum(scale * tx for scale, (tx, _) in used)
    py = sum(scale * ty for scale, (_, ty) in used)
    if not scales[0]:
        # Without the combined term (lm_only_scale + am_only_scale = 1):
        # widened to every frame (LM-only) and row (AM-only py), and for
        # regular px no symbol after the last frame (-inf there, as the
        # combined and AM-only terms give).
        px += tf.zeros_like(terms[0][0])
        py += tf.zeros_like(terms[0][1])
        if rnnt_type == "regular":
            last = tf.range(tf.shape(px)[2]) == tf.shape(px)[2] - 1
            px = tf.where(last, tf.cast(float("-inf"), px.dtype), px)
    return px, py, fits


def rnnt_loss_smoothed(
    lm: TensorLike, am: TensorLike, symbols: TensorLike, termination_symbol: int,
    lm_only_scale: float = 0.1, am_only_scale: float = 0.1,
    boundary: TensorLike | None = None, rnnt_type: str = "regular",
    delay_penalty: float = 0.0, reduction: str = "mean", return_grad: bool = False,
    logit_lengths: TensorLike | None = None, label_lengths: TensorLike | None = None,
) -> tf.Tensor | tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:  # fmt: skip
    """The simple RNN-T loss on `get_rnnt_logprobs_smoothed`'s log-probs.

    Args and Returns as `rnnt_loss_simple`, plus lm_only_scale and
    am_only_scale (see `get_rnnt_logprobs_smoothed`).
    """
    delay_penalty = _check_options(rnnt_type, reduction, delay_penalty)
    with tf.name_scope("rnnt_loss_smoothed"):
        boundary = _boundary_for_simple(boundary, logit_lengths, label_lengths, lm, am)
        lm, am = _simple_loss_inputs(lm, am, boundary)
        px, py = get_rnnt_logprobs_smoothed(
            lm,
            am,
            symbols,
            termination_symbol,
            lm_only_scale,
            am_only_scale,
            boundary,
            rnnt_type,
        )
        return _loss_from_logprobs(
            px, py, boundary, rnnt_type, delay_penalty, reduction, return_grad
        )
