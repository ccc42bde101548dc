# SPDX-License-Identifier: Apache-2.0
"""Modified beam search as one TensorFlow graph, batched over utterances.

k2 / icefall's "modified" beam search (at most one label per frame), with
the hypotheses of every utterance held in fixed-shape tensors [B, beam,
...] so that the frame loop is one `tf.while_loop`: it runs eagerly, in
`tf.function` with unknown batch and time, and under XLA.

Per frame, for all B * beam hypotheses at once: the joint; each hypothesis
stays (blank) or grows by a label, the `beam` best growths of the
utterance are kept and the prediction network runs on them in one batch; a
growth whose labels equal a staying hypothesis' is merged into it
(log-add); the `beam` best of the stays and growths survive. These are the
steps of `modified_beam_search`, which this search equals (labels, and
scores to float32 rounding).

A token n-gram (`TokenLm`) and hotwords (`HotwordGraph`) are automata held
as tables: each hypothesis carries its state in each, and a growth's score
gains the step's weight (shallow fusion, context biasing).

Label sequences are compared through two polynomial hashes (mod 2^31 - 1,
carried with each hypothesis): two different sequences are merged only if
both hashes collide.
"""

from typing import TYPE_CHECKING
from typing import NamedTuple

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.decoding.graph_greedy import GraphHypotheses
from tf_transducer.decoding.graph_greedy import GraphSteps
from tf_transducer.decoding.graph_greedy import _check_options
from tf_transducer.decoding.graph_greedy import _hotword_tables
from tf_transducer.decoding.graph_greedy import _token_confidence
from tf_transducer.decoding.graph_greedy import keras_graph_steps
from tf_transducer.decoding.graph_greedy import while_fixed
from tf_transducer.decoding.hotwords import HotwordGraph
from tf_transducer.decoding.hotwords import check_hotwords
from tf_transducer.decoding.token_lm import TokenLm
from tf_transducer.decoding.token_lm import check_token_lm

if TYPE_CHECKING:
    from tf_transducer.models import Transducer

_MODULUS = 2**31 - 1
_BASES = (1_000_003, 998_244_353 % _MODULUS)


def _log_add(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """log(exp(a) + exp(b)), -inf the zero (no NaN when both are -inf)."""
    big, small = tf.maximum(a, b), tf.minimum(a, b)
    summed = big + tf.math.log1p(tf.exp(small - big))
    return tf.where(tf.math.is_inf(small) & (small < 0), big, summed)


def _gather_rows(value: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """value [B, n, ...] at index [B, m] -> [B, m, ...]."""
    return tf.gather(value, index, batch_dims=1)


class _Automaton(NamedTuple):
    """A context automaton that each hypothesis steps with its labels.

    Its state moves by goto [S, V], its score by delta [S, V]; end [S] is
    added to the final scores. name: the argument it came from.
    """

    goto: tf.Tensor
    delta: tf.Tensor
    end: tf.Tensor
    start: int
    name: str


def _check_automata(hotwords, token_lm, lm_scale):
    """Clear errors for bad hotwords, token_lm or lm_scale; their start states."""
    starts = []
    if hotwords is not None:
        check_hotwords(hotwords)
        starts.append(0)
    if token_lm is not None:
        check_token_lm(token_lm)
        if not isinstance(lm_scale, int | float) or not lm_scale >= 0:
            raise ValueError(f"lm_scale must be a number >= 0, got {lm_scale!r}")
        starts.append(int(token_lm.start))
    return starts


def _automata(hotwords, token_lm, lm_scale):
    """The automata's tables as tensors (hotwords first, then the n-gram)."""
    _check_automata(hotwords, token_lm, lm_scale)
    automata = []
    if hotwords is not None:  # unfinished partial matches give their boost back
        tables = _hotword_tables(hotwords)
        automata.append(
            _Automaton(tables.goto, tables.delta, -tables.depth, 0, "hotwords")
        )
    if token_lm is not None:
        automata.append(_Automaton(
            tf.constant(token_lm.goto), tf.constant(lm_scale * token_lm.logp),
            tf.constant(lm_scale * token_lm.final), int(token_lm.start), "token_lm",
        ))  # fmt: skip
    return automata


class BeamGraphState(NamedTuple):
    """Where a graph beam search stands between chunks of frames.

    B utterances of `beam` hypotheses each, L labels held so far:
    scores [B, beam] (-inf: an empty slot); hashes: two int64 [B, beam]
    hashes of each hypothesis' labels; contexts: per automaton (hotwords,
    then the token n-gram) int32 [B, beam] states; count int32 [B, beam]
    labels; labels, frames int32 and confidence float32 [B, beam, L];
    decoder [B * beam, J] and predictor (list of [B * beam, ...]) of the
    prediction network; offset int32 [B] frames already searched.
    """

    scores: tf.Tensor
    hashes: list[tf.Tensor]
    contexts: list[tf.Tensor]
    count: tf.Tensor
    labels: tf.Tensor
    frames: tf.Tensor
    confidence: tf.Tensor
    decoder: tf.Tensor
    predictor: list[tf.Tensor]
    offset: tf.Tensor


def beam_graph_start(
    steps: GraphSteps,
    batch: TensorLike,
    beam: int = 4,
    blank: int = 0,
    hotwords: HotwordGraph | None = None,
    token_lm: TokenLm | None = None,
) -> BeamGraphState:
    """The state of a graph beam search before any frame (B utterances).

    Pass the hotwords and token_lm the search will use: each gives the
    hypotheses a state to start from.
    """
    if not isinstance(beam, int) or beam < 1:
        raise ValueError(f"beam must be an int >= 1, got {beam!r}")
    flat = batch * beam
    decoder, state = steps.predict(tf.fill([flat], blank), steps.initial_state(flat))
    first = tf.one_hot(
        tf.zeros([batch], tf.int32), beam, on_value=0.0, off_value=-float("inf")
    )
    zeros, no_hash = (
        tf.zeros([batch, beam], tf.int32),
        tf.zeros([batch, beam], tf.int64),
    )
    starts = _check_automata(hotwords, token_lm, 0.0)  # (no tables built)
    return BeamGraphState(
        scores=first, hashes=[no_hash, no_hash],
        contexts=[tf.fill([batch, beam], x) for x in starts], count=zeros,
        labels=tf.fill([batch, beam, 0], blank),
        frames=tf.zeros([batch, beam, 0], tf.int32),
        confidence=tf.zeros([batch, beam, 0]), decoder=decoder, predictor=list(state),
        offset=tf.zeros([batch], tf.int32),
    )  # fmt: skip


def modified_beam_continue(
    encoder: TensorLike,
    lengths: TensorLike,
    steps: GraphSteps,
    state: BeamGraphState,
    blank: int = 0,
    confidence: str = "entropy",
    hotwords: HotwordGraph | None = None,
    token_lm: TokenLm | None = None,
    lm_scale: float = 0.3,
) -> tuple[GraphHypotheses, BeamGraphState]:
    """Modified beam search over more frames: a chunk of a stream, or all.

    The arguments are `modified_beam_graph`'s. The hypotheses, their labels
    and automaton states carry over in `state` (`beam_graph_start` at
    first; the same beam, hotwords and token_lm throughout), so a stream
    fed chunk by chunk is decoded as the whole utterance. Returns the best
    hypothesis so far of each utterance (frames counted from the stream's
    start; its hotword match taken back and the n-gram's end added, as if
    the stream ended here; joint_evaluations of this call) and the state.
    """
    _check_options(None, 1, blank, confidence)
    automata = _automata(hotwords, token_lm, lm_scale)
    if len(automata) != len(state.contexts):
        raise ValueError(
            f"state carries {len(state.contexts)} automaton states, the search "
            f"has {len(automata)} (hotwords, token_lm): start it with the same"
        )
    encoder = tf.convert_to_tensor(encoder)
    if encoder.shape.rank != 3:
        raise ValueError(f"encoder must be [B, T, J], got shape {encoder.shape}")
    beam = state.scores.shape[1]
    if beam is None:
        raise ValueError("state.scores must have a known beam size: [B, beam]")
    batch, frames = tf.shape(encoder)[0], tf.shape(encoder)[1]
    lengths = tf.minimum(tf.cast(tf.reshape(lengths, [-1]), tf.int32), frames)
    last_frame = tf.maximum(frames - 1, 0)
    flat = batch * beam
    neg_inf = tf.constant(-float("inf"))
    # Room for one more label per frame of this chunk.
    capacity = tf.shape(state.labels)[2] + frames
    room = tf.stack([[0, 0], [0, 0], [0, frames]])
    labels0 = tf.pad(state.labels, room, constant_values=blank)
    at0 = tf.pad(state.frames, room, constant_values=-1)
    conf0 = tf.pad(state.confidence, room)
    offset = tf.cast(state.offset, tf.int32)

    def flatten(x):
        return tf.reshape(x, tf.concat([[flat], tf.shape(x)[2:]], 0))

    def unflatten(x):
        return tf.reshape(x, tf.concat([[batch, beam], tf.shape(x)[1:]], 0))

    def body(t, scores, hashes, context, count, labels, at, conf, decoder, state,
             evaluations):  # fmt: skip
        active = t < lengths  # [B]
        frame = encoder[:, tf.minimum(t, last_frame)]  # [B, J]
        repeated = tf.repeat(frame, beam, axis=0)  # [B * beam, J]
        logits = steps.joint(repeated, decoder)
        log_probs = unflatten(tf.nn.log_softmax(tf.cast(logits, tf.float32)))
        vocab = tf.shape(log_probs)[-1]
        for automaton in automata:
            made_for, classes = automaton.delta.shape[1], log_probs.shape[-1]
            if classes is not None and made_for != classes:
                raise ValueError(
                    f"{automaton.name} is made for {made_for} classes, the joint "
                    f"gives {classes}"
                )
        live = scores > neg_inf
        evaluations += tf.where(active, tf.reduce_sum(tf.cast(live, tf.int32), 1), 0)

        stay = scores + log_probs[:, :, blank]  # [B, beam]
        not_blank = tf.one_hot(blank, vocab, on_value=neg_inf, off_value=0.0)
        boosted = log_probs + not_blank
        for automaton, state_of in zip(automata, context, strict=True):
            boosted += tf.gather(automaton.delta, state_of)
        grow = tf.reshape(scores[:, :, None] + boosted, [batch, -1])
        grown, pick = tf.math.top_k(grow, k=beam)  # [B, beam]
        parent, label = pick // vocab, pick % vocab
        child_context = [
            tf.gather_nd(automaton.goto, tf.stack([_gather_rows(c, parent), label], -1))
            for automaton, c in zip(automata, context, strict=True)
        ]

        # The growths' label sequences, and their merge into equal stays.
        parent_hashes = [_gather_rows(h, parent) for h in hashes]
        code = tf.cast(label, tf.int64) + 1
        child_hashes = [
            (h * base + code) % _MODULUS
            for h, base in zip(parent_hashes, _BASES, strict=True)
        ]
        same = tf.ones([batch, beam, beam], tf.bool)  # [B, child, stay]
        for child, hashed in zip(child_hashes, hashes, strict=True):
            same &= tf.equal(child[:, :, None], hashed[:, None, :])
        same &= (live[:, None, :]) & (grown > neg_inf)[:, :, None]
        into = tf.reduce_any(same, axis=2)  # [B, child]
        merged = tf.where(same, grown[:, :, None], neg_inf)  # [B, child, stay]
        for c in range(beam):
            stay = _log_add(stay, merged[:, c])
        grown = tf.where(into, neg_inf, grown)

        # The prediction network on the growths, then the beam best survive.
        child_decoder, child_state = steps.predict(
            flatten(label), [flatten(_gather_rows(unflatten(s), parent)) for s in state]
        )
        kept_scores, source = tf.math.top_k(tf.concat([stay, grown], 1), k=beam)
        from_child = source >= beam
        slot = tf.where(from_child, source - beam, source)

        def pick_rows(old, new):
            """Per surviving slot: the stay's old row or the growth's new one."""
            both = tf.concat([old, new], axis=1)
            return _gather_rows(both, source)

        parent_rows = tf.concat(
            [tf.range(beam)[None] + tf.zeros_like(parent), parent], 1
        )
        origin = _gather_rows(parent_rows, source)  # the hypothesis each came from
        new_count = _gather_rows(count, origin) + tf.cast(from_child, tf.int32)
        written = tf.one_hot(new_count - 1, capacity, on_value=True, off_value=False)
        written &= from_child[:, :, None]
        child_conf = tf.reshape(
            _token_confidence(tf.reshape(log_probs, [flat, -1]), confidence),
            [batch, beam],
        )
        new_label = _gather_rows(label, slot)
        new_labels = tf.where(
            written, new_label[:, :, None], _gather_rows(labels, origin)
        )
        new_at = tf.where(
            written, (offset + t)[:, None, None], _gather_rows(at, origin)
        )
        new_conf = tf.where(
            written,
            _gather_rows(_gather_rows(child_conf, parent), slot)[:, :, None],
            _gather_rows(conf, origin),
        )
        new_hashes = [
            pick_rows(h, c) for h, c in zip(hashes, child_hashes, strict=True)
        ]
        new_context = [
            pick_rows(c, n) for c, n in zip(context, child_context, strict=True)
        ]
        new_decoder = flatten(pick_rows(unflatten(decoder), unflatten(child_decoder)))
        new_state = [
            flatten(pick_rows(unflatten(s), unflatten(c)))
            for s, c in zip(state, child_state, strict=True)
        ]

        def keep(new, old):
            """The new value for utterances still in their frames."""
            mask = tf.reshape(
                active, tf.concat([[batch], tf.ones_like(tf.shape(old)[1:])], 0)
            )
            return tf.where(mask, new, old)

        def keep_flat(new, old):
            return flatten(keep(unflatten(new), unflatten(old)))

        return (
            t + 1,
            keep(kept_scores, scores),
            [keep(n, o) for n, o in zip(new_hashes, hashes, strict=True)],
            [keep(n, o) for n, o in zip(new_context, context, strict=True)],
            keep(new_count, count),
            keep(new_labels, labels),
            keep(new_at, at),
            keep(new_conf, conf),
            keep_flat(new_decoder, decoder),
            [keep_flat(n, o) for n, o in zip(new_state, state, strict=True)],
            evaluations,
        )

    init = (
        tf.constant(0), state.scores, list(state.hashes), list(state.contexts),
        state.count, labels0, at0, conf0, state.decoder, list(state.predictor),
        tf.zeros([batch], tf.int32),
    )  # fmt: skip
    out = while_fixed(
        lambda t, *_: t < tf.reduce_max(tf.concat([lengths, [0]], 0)), body, init
    )
    _, scores, hashes, contexts, count, labels, at, conf, decoder, predictor = out[:10]
    after = BeamGraphState(scores, hashes, contexts, count, labels, at, conf, decoder,
                           predictor, offset + lengths)  # fmt: skip
    scores = after.scores
    for automaton, state_of in zip(automata, after.contexts, strict=True):
        scores += tf.gather(automaton.end, state_of)
    best = tf.argmax(scores, axis=1, output_type=tf.int32)[:, None]  # [B, 1]
    hyps = GraphHypotheses(
        labels=_gather_rows(after.labels, best)[:, 0],
        label_length=_gather_rows(after.count, best)[:, 0],
        frames=_gather_rows(after.frames, best)[:, 0],
        confidence=_gather_rows(after.confidence, best)[:, 0],
        scores=_gather_rows(scores, best)[:, 0],
        joint_evaluations=out[10],
    )
    return hyps, after


def modified_beam_graph(
    encoder: TensorLike,
    lengths: TensorLike,
    steps: GraphSteps,
    beam: int = 4,
    blank: int = 0,
    confidence: str = "entropy",
    hotwords: HotwordGraph | None = None,
    token_lm: TokenLm | None = None,
    lm_scale: float = 0.3,
) -> GraphHypotheses:
    """Batched modified beam search of an RNN-T, as one graph.

    Args:
      encoder: float [B, T, J] projected encoder frames.
      lengths: int [B] valid frames of each utterance.
      steps: the model's `GraphSteps` (a joint of token logits).
      beam: hypotheses kept per utterance, and growths tried per frame.
      blank: the blank class.
      confidence: each label's confidence measure, "entropy" or "max_prob"
        (of the distribution it was emitted from).
      hotwords: a `HotwordGraph` whose boosts are added to the growths'
        scores; each hypothesis' unfinished partial match is taken back
        before the best is chosen.
      token_lm: a `TokenLm` (a token n-gram) for shallow fusion: each
        growth's score gains lm_scale * ln P(label | its context), and
        each hypothesis lm_scale * ln P(</s> | context) before the best is
        chosen (icefall's modified beam search with an n-gram).
      lm_scale: the token n-gram's weight.

    Returns:
      `GraphHypotheses` of each utterance's best hypothesis (L = T: one
      label per frame at most); joint_evaluations counts the joint's runs
      on live hypotheses.
    """
    _check_options(None, 1, blank, confidence)
    _check_automata(hotwords, token_lm, lm_scale)  # (before the start)
    encoder = tf.convert_to_tensor(encoder)
    if encoder.shape.rank != 3:
        raise ValueError(f"encoder must be [B, T, J], got shape {encoder.shape}")
    start = beam_graph_start(
        steps, tf.shape(encoder)[0], beam, blank, hotwords, token_lm
    )
    hyps, _ = modified_beam_continue(encoder, lengths, steps, start, blank, confidence,
                                     hotwords, token_lm, lm_scale)  # fmt: skip
    return hyps


def transducer_beam_graph(
    model: "Transducer",
    inputs: tuple[TensorLike, TensorLike],
    beam: int = 4,
    confidence: str = "entropy",
    hotwords: HotwordGraph | None = None,
    token_lm: TokenLm | None = None,
    lm_scale: float = 0.3,
    max_symbols_per_frame: int = 3,
) -> GraphHypotheses:
    """Beam search of a Keras `Transducer` on (features, lengths), as one graph.

    The encoder and the search in one graph (wrap it in `tf.function`, with
    `jit_compile=True` for XLA). An RNN-T is decoded by `modified_beam_graph`:
    `hotwords` (a `HotwordGraph`) boosts its phrases, `token_lm` (a
    `TokenLm`) is fused with weight `lm_scale`. A Token-and-Duration
    Transducer (a joiner with durations) is decoded by `tdt_beam_graph`,
    with at most `max_symbols_per_frame` labels of duration 0 in a row;
    its search takes no hotwords or token_lm.
    """
    from tf_transducer.decoding.graph_tdt_beam import tdt_beam_graph  # (imports us)

    durations = getattr(model.joiner, "durations", None)
    if durations is not None and (hotwords is not None or token_lm is not None):
        raise ValueError(
            "hotwords and token_lm are fused by the beam search of an RNN-T: this "
            "model's joiner has a duration head (use transducer_greedy_graph for "
            "hotwords)"
        )
    if token_lm is not None:
        check_token_lm(token_lm, model.joiner.vocab_size)
    encoded, lengths = model.encode(inputs, training=False)
    projected = model.joiner.project_encoder(encoded)
    steps = keras_graph_steps(model)
    if durations is not None:
        return tdt_beam_graph(
            projected, lengths, steps, durations, beam, max_symbols_per_frame,
            confidence=confidence,
        )  # fmt: skip
    return modified_beam_graph(
        projected, lengths, steps, beam, confidence=confidence,
        hotwords=hotwords, token_lm=token_lm, lm_scale=lm_scale,
    )  # fmt: skip
