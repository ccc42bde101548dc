# SPDX-License-Identifier: Apache-2.0
"""Greedy transducer search as one TensorFlow graph: label looping, batched.

NeMo's label-looping search (arXiv 2406.06220) turned inside out from the
frame-by-frame loop of `greedy_search`: per utterance, the joint is run on
the frame the utterance has reached until it gives a label (blanks move the
frame on), then the prediction network runs once, for the whole batch, on
the labels found. Unlike NeMo, which waits for every utterance to find its
label, the prediction network runs as soon as a share of them have
(`found_share`): on a CPU the joint's rows are not free, and the rows that
wait for the slowest utterance were most of its work. Every loop is a
`tf.while_loop` over fixed-shape tensors, so the search runs eagerly,
inside `tf.function` with unknown batch and time, and under XLA
(`jit_compile=True`).

It decodes what `greedy_search` and `tdt_greedy_search` decode, step for
step: the same labels, and the same scores to float32 rounding. With a TDT
joint (token and duration heads) a label or a blank moves its utterance by
the duration the duration head picks, so the joint runs only on the frames
it lands on.

The steps are TensorFlow callables (`GraphSteps`), so the same search runs
in a Keras model (`keras_graph_steps`) and in an exported program.
"""

from collections.abc import Callable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import NamedTuple

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.decoding.hotwords import HotwordGraph
from tf_transducer.decoding.hotwords import check_hotwords
from tf_transducer.decoding.tdt import _check_search

if TYPE_CHECKING:
    from tf_transducer.models import Transducer

GraphState = list[tf.Tensor]
CONFIDENCE_MEASURES = ("entropy", "max_prob")


class GraphSteps(NamedTuple):
    """A transducer's steps as TensorFlow functions.

    initial_state(batch) -> predictor state after nothing (list of [B, ...]);
    predict(labels [B], state) -> (decoder projection [B, J], state);
    joint(encoder [B, J], decoder [B, J]) -> token logits [B, V], or
      (token logits [B, V], duration logits [B, K]) for a TDT joint.
    """

    initial_state: Callable[[tf.Tensor], GraphState]
    predict: Callable[[tf.Tensor, GraphState], tuple[tf.Tensor, GraphState]]
    joint: Callable[[tf.Tensor, tf.Tensor], tf.Tensor | tuple[tf.Tensor, tf.Tensor]]


class GraphHypotheses(NamedTuple):
    """The best path of each utterance of a batch, as padded tensors.

    labels: int32 [B, L] the emitted labels, `blank` past label_length;
    label_length: int32 [B];
    frames: int32 [B, L] the encoder frame each label was emitted on (-1
      past label_length);
    confidence: float32 [B, L] each label's confidence in [0, 1] (0 past
      label_length): "entropy", 1 - H(p) / log V of the token distribution
      p, or "max_prob", max p;
    scores: float32 [B] the path's log-probability (tokens, and durations
      of a TDT);
    joint_evaluations: int32 [B] the joint's runs on each utterance.

    L is the most labels the search can emit: frames * (max_symbols_per_frame
    + 1).
    """

    labels: tf.Tensor
    label_length: tf.Tensor
    frames: tf.Tensor
    confidence: tf.Tensor
    scores: tf.Tensor
    joint_evaluations: tf.Tensor


def keras_graph_steps(model: "Transducer") -> GraphSteps:
    """The `GraphSteps` of a Keras `Transducer` (a TDT's joint gives both heads)."""
    joiner, predictor = model.joiner, model.predictor

    def predict(labels, state):
        out, state = predictor.step(labels, state)
        return joiner.project_decoder(out), list(state)

    tdt = getattr(joiner, "durations", None) is not None
    return GraphSteps(
        initial_state=lambda batch: list(predictor.initial_state(batch)),
        predict=predict,
        joint=joiner.joint_heads if tdt else joiner.joint,
    )


def while_fixed(cond, body, init):
    """`tf.while_loop` whose loop variables keep the shapes they enter with.

    Ops in the body may lose a known batch size; TFLite needs it kept.
    """

    def fixed(*values):
        out = body(*values)
        if not tf.executing_eagerly():
            for new, old in zip(
                tf.nest.flatten(out), tf.nest.flatten(values), strict=True
            ):
                new.set_shape(old.shape)
        return out

    return tf.while_loop(cond, fixed, init)


def _token_confidence(log_probs: tf.Tensor, measure: str) -> tf.Tensor:
    """[B] confidence of float32 [B, V] log-probabilities."""
    if measure == "max_prob":
        return tf.exp(tf.reduce_max(log_probs, axis=-1))
    probs = tf.exp(log_probs)
    entropy = -tf.reduce_sum(tf.math.multiply_no_nan(log_probs, probs), axis=-1)
    classes = tf.cast(tf.shape(log_probs)[-1], tf.float32)
    return tf.clip_by_value(1.0 - entropy / tf.math.log(classes), 0.0, 1.0)


def _check_options(durations, max_symbols_per_frame, blank, confidence):
    if not isinstance(max_symbols_per_frame, int) or max_symbols_per_frame < 1:
        raise ValueError(
            f"max_symbols_per_frame must be an int >= 1, got {max_symbols_per_frame!r}"
        )
    if not isinstance(blank, int) or blank < 0:
        raise ValueError(f"blank must be an int >= 0, got {blank!r}")
    if confidence not in CONFIDENCE_MEASURES:
        raise ValueError(
            f"confidence must be one of {CONFIDENCE_MEASURES}, got {confidence!r}"
        )
    if durations is None:
        return None
    return tf.constant(_check_search(durations, max_symbols_per_frame), tf.int32)


class GreedyGraphState(NamedTuple):
    """Where a greedy graph search stands between chunks of frames.

    decoder: [B, J] the prediction network's projected output;
    predictor: its state (list of [B, ...]);
    skip: int32 [B] frames of the next chunk that a TDT duration already
      jumped over;
    context: int32 [B] the hotword automaton's state (0 without hotwords).
    """

    decoder: tf.Tensor
    predictor: GraphState
    skip: tf.Tensor
    context: tf.Tensor


def greedy_graph_start(
    steps: GraphSteps, batch: TensorLike, blank: int = 0
) -> GreedyGraphState:
    """The state of a greedy graph search before any frame (B utterances)."""
    decoder, predictor = steps.predict(
        tf.fill([batch], blank), steps.initial_state(batch)
    )
    zeros = tf.zeros([batch], tf.int32)
    return GreedyGraphState(decoder, list(predictor), zeros, zeros)


def _hotword_tables(hotwords):
    if hotwords is None:
        return None
    check_hotwords(hotwords)
    return HotwordGraph(*(tf.constant(x) for x in hotwords))


def label_looping_continue(
    encoder: TensorLike,
    lengths: TensorLike,
    steps: GraphSteps,
    state: GreedyGraphState,
    durations: Sequence[int] | None = None,
    max_symbols_per_frame: int = 3,
    blank: int = 0,
    confidence: str = "entropy",
    hotwords: HotwordGraph | None = None,
    found_share: float = 0.1,
) -> tuple[GraphHypotheses, GreedyGraphState]:
    """Greedy search over more frames: a chunk of a stream, or a whole utterance.

    Args:
      encoder: float [B, T, J] projected encoder frames (the joint's input).
      lengths: int [B] valid frames of each utterance (of this chunk).
      steps: the model's `GraphSteps`; with `durations`, its joint gives
        (token logits, duration logits).
      state: where the search stands (`greedy_graph_start` at first).
      durations: a TDT duration head's K frame counts [0, 1, ...], or None
        for an RNN-T.
      max_symbols_per_frame: RNN-T: labels emitted on one frame before the
        search moves on; TDT: labels of duration 0 in a row on one frame
        (the next one moves a frame on), as `tdt_greedy_search`.
      blank: the blank class.
      confidence: the per-label confidence measure, "entropy" or "max_prob".
      hotwords: a `HotwordGraph` whose boosts are added to the labels'
        log-probabilities before each choice (and to the scores).
      found_share: in (0, 1]: the prediction network runs (for the whole
        batch, kept where nothing was found) once this share of the
        utterances still searching have found their next label; the others
        search on from where they are. 1.0 is NeMo's schedule, best where a
        joint over the whole batch costs no more than over a few rows (a
        GPU); on CPU the joint's rows cost, and 0.1 decodes about 2.5x
        faster (benchmarks/bench_graph_decoding.py). The labels do not
        depend on it.

    Returns:
      (`GraphHypotheses` of the labels found in these frames, frames counted
      from this chunk's first; the state after them).
    """
    duration_values = _check_options(
        durations, max_symbols_per_frame, blank, confidence
    )
    number = isinstance(found_share, int | float) and not isinstance(found_share, bool)
    if not number or not 0.0 < found_share <= 1.0:
        raise ValueError(f"found_share must be a number in (0, 1], got {found_share!r}")
    context_tables = _hotword_tables(hotwords)
    encoder = tf.convert_to_tensor(encoder)
    if encoder.shape.rank != 3:
        raise ValueError(f"encoder must be [B, T, J], got shape {encoder.shape}")
    batch, frames = tf.shape(encoder)[0], tf.shape(encoder)[1]
    lengths = tf.minimum(tf.cast(tf.reshape(lengths, [-1]), tf.int32), frames)
    capacity = tf.maximum(frames, 1) * (max_symbols_per_frame + 1)
    tdt = duration_values is not None

    def joint_at(t, decoder):
        """(token log-probs [B, V], duration log-probs [B, K] or None) at frames t."""
        frame = tf.gather(
            encoder, tf.minimum(t, tf.maximum(frames - 1, 0)), batch_dims=1
        )
        logits = steps.joint(frame, decoder)
        if not tdt:
            return tf.nn.log_softmax(tf.cast(logits, tf.float32)), None
        tokens, durs = logits
        return (tf.nn.log_softmax(tf.cast(tokens, tf.float32)),
                tf.nn.log_softmax(tf.cast(durs, tf.float32)))  # fmt: skip

    def find_labels(t, run, decoder, boost, scores, evaluations, active):
        """Runs the joint until enough active utterances find a label.

        The loop stops when every active utterance has found one, or when
        the found ones reach `found_share` of those still searching at the
        start; the rest search on in the next round, from the frame they
        reached. Returns the moved frames t, run, scores and evaluations,
        the found label, its confidence, its duration index, and which
        found one.
        """
        searching = tf.reduce_sum(tf.cast(active, tf.float32))
        wanted = tf.cast(tf.math.ceil(found_share * searching), tf.int32)
        wanted = tf.maximum(wanted, 1)
        init = (
            t, run, scores, evaluations, active, tf.zeros([batch], tf.bool),
            tf.fill([batch], blank), tf.zeros([batch]), tf.zeros([batch], tf.int32),
        )  # fmt: skip

        def cond(t, run, scores, evaluations, need, found, *_):
            enough = tf.reduce_sum(tf.cast(found, tf.int32)) >= wanted
            return tf.reduce_any(need) & tf.logical_not(enough)

        def body(t, run, scores, evaluations, need, found, label, sure, k):
            tokens, durs = joint_at(t, decoder)
            boosted = tokens if boost is None else tokens + boost
            best = tf.argmax(boosted, axis=-1, output_type=tf.int32)
            gain = tf.gather(boosted, best, batch_dims=1)
            if tdt:
                best_k = tf.argmax(durs, axis=-1, output_type=tf.int32)
                gain += tf.gather(durs, best_k, batch_dims=1)
                advance = tf.maximum(tf.gather(duration_values, best_k), 1)
            else:
                best_k = tf.zeros_like(best)
                advance = tf.ones_like(best)
            scores += tf.where(need, gain, 0.0)
            evaluations += tf.cast(need, tf.int32)
            now = need & tf.not_equal(best, blank)
            is_blank = need & tf.equal(best, blank)
            t = tf.where(is_blank, t + advance, t)
            run = tf.where(is_blank, 0, run)
            label = tf.where(now, best, label)
            sure = tf.where(now, _token_confidence(tokens, confidence), sure)
            k = tf.where(now, best_k, k)
            need = is_blank & (t < lengths)
            return t, run, scores, evaluations, need, found | now, label, sure, k

        t, run, scores, evaluations, _, found, label, sure, k = while_fixed(
            cond, body, init
        )
        return t, run, scores, evaluations, label, sure, k, found

    def emit_cond(t, *rest):
        return tf.reduce_any(t < lengths)

    def emit_body(t, run, decoder, predictor, context, count, labels, at, conf, scores,
                  evaluations):  # fmt: skip
        active = t < lengths
        boost = (
            None if context_tables is None else tf.gather(context_tables.delta, context)
        )
        t, run, scores, evaluations, label, sure, k, emit = find_labels(
            t, run, decoder, boost, scores, evaluations, active
        )
        # Written by a mask, not a scatter: TFLite's built-in ops have none.
        slot = tf.one_hot(count, capacity, on_value=True, off_value=False)
        slot &= emit[:, None]
        keep = lambda buffer, value: tf.where(slot, value[:, None], buffer)  # noqa: E731
        labels = keep(labels, label)
        at = keep(at, t)
        conf = keep(conf, sure)
        count += tf.cast(emit, tf.int32)
        if context_tables is not None:
            moved = tf.gather_nd(context_tables.goto, tf.stack([context, label], 1))
            context = tf.where(emit, moved, context)
        if tdt:
            step = tf.gather(duration_values, k)
            run = tf.where(emit & tf.equal(step, 0), run + 1, 0)
            step = tf.where(run > max_symbols_per_frame, 1, step)
        else:
            run = tf.where(emit, run + 1, run)
            step = tf.where(run >= max_symbols_per_frame, 1, 0)
        run = tf.where(step > 0, 0, run)
        t = tf.where(emit, t + step, t)
        new_decoder, new_predictor = steps.predict(
            tf.where(emit, label, blank), predictor
        )
        decoder = tf.where(emit[:, None], new_decoder, decoder)
        predictor = [
            tf.where(tf.reshape(emit, [-1] + [1] * (s.shape.rank - 1)), n, s)
            for n, s in zip(new_predictor, predictor, strict=True)
        ]
        return (t, run, decoder, predictor, context, count, labels, at, conf, scores,
                evaluations)  # fmt: skip

    zeros = tf.zeros([batch], tf.int32)
    init = (
        tf.cast(state.skip, tf.int32), zeros, state.decoder, list(state.predictor),
        tf.cast(state.context, tf.int32), zeros,
        tf.fill([batch, capacity], blank), tf.fill([batch, capacity], -1),
        tf.zeros([batch, capacity]), tf.zeros([batch]), zeros,
    )  # fmt: skip
    t, _, decoder, predictor, context, count, labels, at, conf, scores, evaluations = (
        while_fixed(emit_cond, emit_body, init)
    )
    after = GreedyGraphState(decoder, predictor, tf.maximum(t - frames, 0), context)
    return GraphHypotheses(labels, count, at, conf, scores, evaluations), after


def label_looping_greedy(
    encoder: TensorLike,
    lengths: TensorLike,
    steps: GraphSteps,
    durations: Sequence[int] | None = None,
    max_symbols_per_frame: int = 3,
    blank: int = 0,
    confidence: str = "entropy",
    hotwords: HotwordGraph | None = None,
    found_share: float = 0.1,
) -> GraphHypotheses:
    """Batched greedy search of whole utterances, as one graph.

    `label_looping_continue` from the start; with hotwords, the boost of
    each utterance's unfinished partial match is taken back from its score.
    The arguments are `label_looping_continue`'s.

    Returns:
      `GraphHypotheses`.
    """
    encoder = tf.convert_to_tensor(encoder)
    start = greedy_graph_start(steps, tf.shape(encoder)[0], blank)
    hyps, after = label_looping_continue(
        encoder, lengths, steps, start, durations, max_symbols_per_frame, blank,
        confidence, hotwords, found_share,
    )  # fmt: skip
    if hotwords is None:
        return hyps
    taken_back = tf.gather(tf.constant(hotwords.depth), after.context)
    return hyps._replace(scores=hyps.scores - taken_back)


def transducer_greedy_graph(
    model: "Transducer",
    inputs: tuple[TensorLike, TensorLike],
    max_symbols_per_frame: int = 3,
    confidence: str = "entropy",
    hotwords: HotwordGraph | None = None,
) -> GraphHypotheses:
    """Greedy search of a Keras `Transducer` on (features, lengths), as one graph.

    The encoder and the search together: wrap it in `tf.function` (with
    `jit_compile=True` for XLA) to compile both. A Token-and-Duration
    Transducer (a joiner with durations) skips the frames its durations
    jump over. `hotwords` (a `HotwordGraph`) boosts its phrases.
    """
    encoded, lengths = model.encode(inputs, training=False)
    projected = model.joiner.project_encoder(encoded)
    return label_looping_greedy(
        projected, lengths, keras_graph_steps(model),
        durations=getattr(model.joiner, "durations", None),
        max_symbols_per_frame=max_symbols_per_frame, confidence=confidence,
        hotwords=hotwords,
    )  # fmt: skip
