# SPDX-License-Identifier: Apache-2.0
"""Beam search of a Token-and-Duration Transducer as one TensorFlow graph.

`tdt_beam_search`'s algorithm, batched: hypotheses wait in the frame their
durations took them to, at most `beam` per frame, so each utterance's
waiting hypotheses fit a pool of max(durations) * beam slots (the frames
t + 1 ... t + max(durations); those past the utterance's last frame are
finished, a group of their own). Per frame t the hypotheses waiting there
leave the pool and are expanded `max_symbols_per_frame` + 1 times: by a
blank of each duration d >= 1 back into the pool at t + d, and by the
`beam` best (label, duration) pairs, whose prediction network runs in one
batch; a growth of duration 0 is expanded again on frame t, the others
join the pool. Then equal label sequences
waiting in one frame are merged (log-add) and each frame keeps its `beam`
best. Every loop is a `tf.while_loop` over fixed-shape tensors (eager,
`tf.function` with unknown batch and time, XLA).

Label sequences are compared through the same two polynomial hashes as
`modified_beam_graph`.
"""

from collections.abc import Sequence
from typing import NamedTuple

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.decoding.graph_beam import _BASES
from tf_transducer.decoding.graph_beam import _MODULUS
from tf_transducer.decoding.graph_beam import _gather_rows
from tf_transducer.decoding.graph_greedy import GraphHypotheses
from tf_transducer.decoding.graph_greedy import GraphSteps
from tf_transducer.decoding.graph_greedy import _check_options
from tf_transducer.decoding.graph_greedy import _token_confidence
from tf_transducer.decoding.graph_greedy import while_fixed

_NEG_INF = float("-inf")


class _Rows(NamedTuple):
    """Hypotheses' contents, [B, rows, ...] each (scores and frames apart).

    hashes: two int64 hashes of the labels; count: int32 labels; labels,
    at (frames) and conf: [B, rows, L]; decoder [B, rows, J]; predictor:
    the prediction network's state, [B, rows, ...] each.
    """

    hashes: list[tf.Tensor]
    count: tf.Tensor
    labels: tf.Tensor
    at: tf.Tensor
    conf: tf.Tensor
    decoder: tf.Tensor
    predictor: list[tf.Tensor]

    def take(self, index: tf.Tensor) -> "_Rows":
        """The rows at index [B, m]."""
        return tf.nest.map_structure(lambda x: _gather_rows(x, index), self)

    def join(self, other: "_Rows") -> "_Rows":
        """These rows, then other's."""
        return tf.nest.map_structure(lambda a, b: tf.concat([a, b], 1), self, other)


def _merge_equal(scores: tf.Tensor, keys: list[tf.Tensor]) -> tf.Tensor:
    """Log-adds the scores [B, n] of entries with equal keys into the first.

    The others (and empty entries, -inf) get -inf.
    """
    live = scores > _NEG_INF
    same = live[:, :, None] & live[:, None, :]
    for key in keys:
        same &= tf.equal(key[:, :, None], key[:, None, :])
    n = tf.shape(scores)[1]
    earlier = tf.range(n)[None, :] < tf.range(n)[:, None]  # [i, j]: j < i
    repeat = tf.reduce_any(same & earlier[None], axis=2)
    summed = tf.reduce_logsumexp(tf.where(same, scores[:, None, :], _NEG_INF), axis=2)
    return tf.where(repeat | ~live, _NEG_INF, summed)


def _best_per_group(scores: tf.Tensor, group: tf.Tensor, keep: int) -> tf.Tensor:
    """Which entries [B, n] are among the `keep` best of their group.

    Ties go to the earlier entry; empty entries (-inf) are never kept.
    """
    n = tf.shape(scores)[1]
    mine, theirs = scores[:, :, None], scores[:, None, :]
    earlier = tf.range(n)[None, :] < tf.range(n)[:, None]
    ahead = (theirs > mine) | (tf.equal(theirs, mine) & earlier[None])
    ahead &= tf.equal(group[:, :, None], group[:, None, :])
    ahead &= theirs > _NEG_INF
    rank = tf.reduce_sum(tf.cast(ahead, tf.int32), axis=2)
    return (rank < keep) & (scores > _NEG_INF)


def tdt_beam_graph(
    encoder: TensorLike,
    lengths: TensorLike,
    steps: GraphSteps,
    durations: Sequence[int],
    beam: int = 4,
    max_symbols_per_frame: int = 3,
    blank: int = 0,
    confidence: str = "entropy",
) -> GraphHypotheses:
    """Batched beam search of a TDT whose hypotheses advance by their durations.

    It equals `tdt_beam_search` on each utterance (labels, and scores to
    float32 rounding).

    Args:
      encoder: float [B, T, J] projected encoder frames.
      lengths: int [B] valid frames of each utterance.
      steps: the model's `GraphSteps`; its joint gives (token logits [N, V],
        duration logits [N, K]).
      durations: the duration head's K frame counts [0, 1, ...].
      beam: hypotheses kept per frame, and growths tried per expansion.
      max_symbols_per_frame: labels of duration 0 in a row on one frame.
      blank: the blank class.
      confidence: each label's confidence measure, "entropy" or "max_prob".

    Returns:
      `GraphHypotheses` of each utterance's best finished hypothesis (L =
      T * (max_symbols_per_frame + 1)); joint_evaluations counts the
      joint's runs on live hypotheses.
    """
    values = _check_options(durations, max_symbols_per_frame, blank, confidence)
    if not isinstance(beam, int) or isinstance(beam, bool) or beam < 1:
        raise ValueError(f"beam must be an int >= 1, got {beam!r}")
    encoder = tf.convert_to_tensor(encoder)
    if encoder.shape.rank != 3:
        raise ValueError(f"encoder must be [B, T, J], got shape {encoder.shape}")
    spans = [int(d) for d in durations]
    classes_k, moving = len(spans), [k for k, d in enumerate(spans) if d >= 1]
    repeats = max_symbols_per_frame + 1
    pool = max(spans) * beam  # frames t + 1 ... t + max(d), `beam` each
    batch, frames = tf.shape(encoder)[0], tf.shape(encoder)[1]
    lengths = tf.minimum(tf.cast(tf.reshape(lengths, [-1]), tf.int32), frames)
    last_frame = tf.maximum(frames - 1, 0)
    capacity = tf.maximum(frames, 1) * repeats
    ends = lengths[:, None]

    def flatten(x):
        return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))

    def unflatten(x, width):
        return tf.reshape(x, tf.concat([[batch, width], tf.shape(x)[1:]], 0))

    def expand(t, cur, cur_scores, rows, last):
        """One expansion of the hypotheses rows[cur] on frame t.

        Returns (blank moves: scores, frames, rows [B, beam * K']; growths:
        scores, durations, rows [B, beam]; growth rows' contents; the
        joint's live runs [B]).
        """
        frame = tf.repeat(encoder[:, tf.minimum(t, last_frame)], beam, axis=0)
        decoder = flatten(_gather_rows(rows.decoder, cur))
        tokens, durs = steps.joint(frame, decoder)
        log_probs = unflatten(tf.nn.log_softmax(tf.cast(tokens, tf.float32)), beam)
        dur_probs = unflatten(tf.nn.log_softmax(tf.cast(durs, tf.float32)), beam)
        vocab = tf.shape(log_probs)[2]
        runs = tf.reduce_sum(tf.cast(cur_scores > _NEG_INF, tf.int32), 1)

        stays = cur_scores[:, :, None] + log_probs[:, :, blank : blank + 1]
        stays += tf.gather(dur_probs, moving, axis=2)  # [B, beam, K']
        stay_frames = tf.broadcast_to(
            tf.minimum(t + tf.constant([spans[k] for k in moving]), ends[:, :, None]),
            tf.shape(stays),
        )
        stay_rows = tf.repeat(cur, len(moving), axis=1)

        not_blank = tf.one_hot(blank, vocab, on_value=_NEG_INF, off_value=0.0)
        grow = (cur_scores[:, :, None, None] + (log_probs + not_blank)[:, :, :, None]
                + dur_probs[:, :, None, :])  # fmt: skip
        if last:  # no more labels of duration 0 on this frame
            grow += tf.constant([_NEG_INF if d == 0 else 0.0 for d in spans])
        grown, pick = tf.math.top_k(tf.reshape(grow, [batch, -1]), k=beam)
        parent, label, k = (
            pick // (vocab * classes_k),
            (pick // classes_k) % vocab,
            pick % classes_k,
        )
        source = _gather_rows(cur, parent)
        before = rows.take(source)
        code = tf.cast(label, tf.int64) + 1
        count = before.count + 1
        written = tf.one_hot(count - 1, capacity, on_value=True, off_value=False)
        sure = tf.reshape(
            _token_confidence(tf.reshape(log_probs, [-1, vocab]), confidence),
            [batch, beam],
        )
        decoder, predictor = steps.predict(
            flatten(label), [flatten(s) for s in before.predictor]
        )
        grown_rows = _Rows(
            hashes=[(h * base + code) % _MODULUS
                    for h, base in zip(before.hashes, _BASES, strict=True)],
            count=count,
            labels=tf.where(written, label[:, :, None], before.labels),
            at=tf.where(written, t, before.at),
            conf=tf.where(written, _gather_rows(sure, parent)[:, :, None], before.conf),
            decoder=unflatten(decoder, beam),
            predictor=[unflatten(s, beam) for s in predictor],
        )  # fmt: skip
        moves = (tf.reshape(stays, [batch, -1]), tf.reshape(stay_frames, [batch, -1]),
                 tf.reshape(stay_rows, [batch, -1]))  # fmt: skip
        return moves, (grown, tf.gather(values, k)), grown_rows, runs

    def nothing(cur, rows):
        """`expand`'s result when no hypothesis of the batch waits on frame t."""
        empty = tf.fill([batch, beam * len(moving)], _NEG_INF)
        stay_rows = tf.repeat(cur, len(moving), axis=1)
        moves = (empty, tf.zeros_like(stay_rows), stay_rows)
        return (
            moves,
            (empty[:, :beam], tf.zeros_like(cur)),
            rows.take(cur),
            tf.zeros([batch], tf.int32),
        )

    def body(t, scores, at_frame, pool_rows, evaluations):
        active = t < lengths
        here = tf.equal(at_frame, t) & active[:, None]
        cur_scores, cur = tf.math.top_k(tf.where(here, scores, _NEG_INF), k=beam)
        rows = pool_rows
        entries = [(tf.where(here, _NEG_INF, scores), at_frame,
                     tf.broadcast_to(tf.range(pool), tf.shape(scores)))]  # fmt: skip
        for repeat in range(repeats):
            moves, (grown, step), grown_rows, runs = tf.cond(
                tf.reduce_any(cur_scores > _NEG_INF),
                lambda c=cur, s=cur_scores, r=rows, last=repeat == repeats - 1: expand(
                    t, c, s, r, last
                ),
                lambda c=cur, r=rows: nothing(c, r),
            )
            evaluations += runs
            entries.append(moves)
            width = pool + repeat * beam
            rows = rows.join(grown_rows)
            new = width + tf.broadcast_to(tf.range(beam), tf.shape(grown))
            leaving = step > 0
            entries.append((tf.where(leaving, grown, _NEG_INF),
                            tf.minimum(t + step, ends), new))  # fmt: skip
            # The growths of duration 0 are expanded again: distinct parents'
            # (parent, label) pairs, so no two of them have equal labels.
            cur_scores, cur = tf.where(leaving, _NEG_INF, grown), new
        all_scores, all_frames, all_rows = (
            tf.concat(x, 1) for x in zip(*entries, strict=True)
        )
        merged = _merge_equal(
            all_scores, [all_frames] + [_gather_rows(h, all_rows) for h in rows.hashes]
        )
        kept = _best_per_group(merged, all_frames, beam)
        new_scores, pick = tf.math.top_k(tf.where(kept, merged, _NEG_INF), k=pool)
        new_frames = _gather_rows(all_frames, pick)
        new_rows = rows.take(_gather_rows(all_rows, pick))

        def keep(new, old):
            mask = tf.reshape(
                active, tf.concat([[batch], tf.ones_like(tf.shape(old)[1:])], 0)
            )
            return tf.where(mask, new, old)

        old = (scores, at_frame, pool_rows)
        new_state = tf.nest.map_structure(keep, (new_scores, new_frames, new_rows), old)
        return (t + 1, *new_state, evaluations)

    start_decoder, start_state = steps.predict(
        tf.fill([batch * pool], blank), steps.initial_state(batch * pool)
    )
    zeros = tf.zeros([batch, pool], tf.int32)
    start = _Rows(
        hashes=[tf.zeros([batch, pool], tf.int64)] * 2,
        count=zeros,
        labels=tf.fill([batch, pool, capacity], blank),
        at=tf.fill([batch, pool, capacity], -1),
        conf=tf.zeros([batch, pool, capacity]),
        decoder=unflatten(start_decoder, pool),
        predictor=[unflatten(s, pool) for s in start_state],
    )
    first = tf.one_hot(
        tf.zeros([batch], tf.int32), pool, on_value=0.0, off_value=_NEG_INF
    )
    init = (tf.constant(0), first, zeros, start, tf.zeros([batch], tf.int32))
    _, scores, _, rows, evaluations = while_fixed(
        lambda t, *_: t < tf.reduce_max(tf.concat([lengths, [0]], 0)), body, init
    )
    best = tf.argmax(scores, axis=1, output_type=tf.int32)[:, None]
    chosen = rows.take(best)
    return GraphHypotheses(
        labels=chosen.labels[:, 0],
        label_length=chosen.count[:, 0],
        frames=chosen.at[:, 0],
        confidence=chosen.conf[:, 0],
        scores=_gather_rows(scores, best)[:, 0],
        joint_evaluations=evaluations,
    )
