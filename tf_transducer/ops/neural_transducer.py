# SPDX-License-Identifier: Apache-2.0
"""Best alignment of targets to blocks for the Neural Transducer, in the graph.

The Neural Transducer is Jaitly et al. 2015; the alignment is batched. Each
block of input frames emits up to W outputs, the last one being the
end-of-block symbol <e>: n <= W - 1 labels, then <e>. An alignment is how
many labels each block emits (counts [NB] summing to the target length U).
Its log-probability, for output distributions that depend on the block b,
on the labels s read so far and on the output's index k in its block
(log_probs[b, s, k, :], the layer's teacher-forced distributions), is

    sum over blocks b of  sum_{k < n_b} log_probs[b, s_b + k, k, y[s_b + k]]
                          + log_probs[b, s_b + n_b, n_b, <e>]

with s_b = n_0 + ... + n_{b-1}. It decomposes block by block, so the best
alignment is an exact dynamic programme over (block, labels emitted so
far): O(NB x (U + 1) x W) work, for the whole batch in one `tf.scan` over
blocks.

Shapes: log_probs [B, NB, U + 1, W, V] (B sequences, NB blocks, V outputs
including <e>), labels [B, U], label_lengths [B], num_blocks [B].
"""

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import first_bad
from tf_transducer._checks import in_xla_context
from tf_transducer._checks import integer_tensor
from tf_transducer._checks import require

NEG_INF = float("-inf")


def _block_scores(
    log_probs: tf.Tensor, labels: tf.Tensor, max_width: int, e_symbol: int
) -> tf.Tensor:
    """[W, B, NB, U + 1]: scores of a block that starts after s labels.

    The block emits n of those labels, then <e> (-inf where s + n > U).
    """
    U = tf.shape(labels)[1]
    following = tf.pad(labels, [[0, 0], [0, 1]])  # [B, U + 1]: y[s] (0 at U)
    shape = tf.shape(log_probs)
    following = tf.broadcast_to(following[:, None, :, None], shape[:4])
    label = tf.gather(log_probs, following, batch_dims=4)  # [B, NB, U + 1, W]
    end = log_probs[..., e_symbol]  # [B, NB, U + 1, W]

    def from_start(x, k):
        """x[..., s + k, k] at s (-inf past the end; k may exceed U)."""
        column = x[..., k]
        return tf.pad(
            column[..., k:],
            [[0, 0], [0, 0], [0, tf.minimum(k, U + 1)]],
            constant_values=NEG_INF,
        )

    scores, labels_so_far = [], 0.0
    for n in range(max_width):
        scores.append(labels_so_far + from_start(end, n))
        if n + 1 < max_width:
            read = from_start(label, n)
            read = tf.where(tf.range(U + 1)[None, None] + n < U, read, NEG_INF)
            labels_so_far = labels_so_far + read
    return tf.stack(scores, axis=0)


def best_block_alignment(
    log_probs: TensorLike, labels: TensorLike, label_lengths: TensorLike,
    num_blocks: TensorLike, max_width: int, e_symbol: int,
) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
    """The best alignment of each target sequence to its blocks.

    Args:
      log_probs: float [B, NB, U + 1, W, V] log-probabilities.
      labels: int [B, U] targets (values at and past label_lengths ignored).
      label_lengths: int [B].
      num_blocks: int [B] blocks of each sequence (<= NB).
      max_width: W, outputs per block including <e> (>= 1).
      e_symbol: the id of <e> in [0, V).

    Returns:
      (counts int32 [B, NB]: labels emitted by each block, 0 past
      num_blocks; score [B]: the alignment's log-probability, -inf where no
      alignment exists, i.e. U > (W - 1) x num_blocks; then counts are 0).
      Ties are broken deterministically: the fewest labels in the last block,
      then in the one before, ...
    """
    if not isinstance(max_width, int) or max_width < 1:
        raise ValueError(f"max_width must be an int >= 1, got {max_width!r}")
    log_probs = tf.convert_to_tensor(log_probs)
    if log_probs.shape.rank != 5 or log_probs.shape[3] not in (None, max_width):
        raise ValueError(
            f"log_probs must be [B, NB, U + 1, W={max_width}, V], got shape "
            f"{log_probs.shape}"
        )
    labels, label_lengths, num_blocks = _checked(
        log_probs, labels, label_lengths, num_blocks, e_symbol
    )
    with tf.control_dependencies(
        [c for c in [check_scores(log_probs, label_lengths, num_blocks)] if c]
    ):
        log_probs = tf.identity(log_probs)
    U = tf.shape(labels)[1]
    positions = tf.range(U + 1)[None]  # [1, U + 1]
    valid_labels = tf.range(U)[None] < label_lengths[:, None]
    labels = tf.where(valid_labels, labels, 0)
    scores = _block_scores(log_probs, labels, max_width, e_symbol)  # [W, B, NB, U+1]
    reachable = positions <= label_lengths[:, None]  # [B, U + 1]
    dtype = log_probs.dtype
    start = tf.where(positions == 0, tf.zeros_like(reachable, dtype), NEG_INF)
    start = tf.broadcast_to(start, tf.shape(reachable))

    def step(carry, inputs):
        dp, _ = carry
        block_scores, valid_b = inputs  # [W, B, U + 1], [B]
        # from s = e - n: dp[s] + scores[n, s], placed at e
        width = tf.shape(dp)[1]
        candidates = tf.stack(
            [
                tf.pad(
                    (dp + block_scores[n])[:, : tf.maximum(width - n, 0)],
                    [[0, 0], [tf.minimum(n, width), 0]],
                    constant_values=NEG_INF,
                )
                for n in range(max_width)
            ]
        )
        best_n = tf.cast(tf.argmax(candidates, axis=0), tf.int32)
        new = tf.where(reachable, tf.reduce_max(candidates, axis=0), NEG_INF)
        new = tf.where(valid_b[:, None], new, dp)
        best_n = tf.where(valid_b[:, None], best_n, 0)
        return new, best_n

    blocks = tf.shape(log_probs)[1]
    valid = tf.range(blocks)[:, None] < num_blocks[None]  # [NB, B]
    dps, pointers = tf.scan(
        step,
        (tf.transpose(scores, [2, 0, 1, 3]), valid),
        initializer=(start, tf.zeros_like(start, tf.int32)),
    )
    final = tf.cond(blocks > 0, lambda: dps[-1], lambda: start)
    score = tf.gather(final, label_lengths, batch_dims=1)
    feasible = tf.math.is_finite(score)

    def back(position, pointer_b):
        n = tf.gather(pointer_b, position, batch_dims=1)
        return position - n

    # [NB, B]: labels emitted before each block, and by the end of each block
    before = tf.scan(back, pointers, initializer=label_lengths, reverse=True)
    by_end = tf.concat([before[1:], label_lengths[None]], axis=0)
    counts = tf.transpose(by_end - before)
    counts = tf.where(feasible[:, None], counts, 0)
    return counts, score


def check_scores(
    scores: tf.Tensor,
    label_lengths: TensorLike,
    num_blocks: TensorLike,
    name: str = "log_probs",
    num_blocks_name: str = "num_blocks",
) -> tf.Tensor | None:
    """A check that scores [B, NB, U + 1, W, V] hold no NaN or +inf where read.

    Read are the blocks b < num_blocks and the rows s <= label_lengths (-inf
    is a legal log-probability; padding may hold anything). label_lengths
    and num_blocks must have B entries: a ValueError (static sizes) or an
    InvalidArgumentError names the one that does not. Returns the assertion
    (None eagerly or under XLA); the error names `name`.
    """
    label_lengths = integer_tensor(label_lengths, "label_lengths", 1, "[B]")
    num_blocks = integer_tensor(num_blocks, num_blocks_name, 1, "[B]")
    batch = scores.shape[0]
    size_checks = []
    for what, x in ((num_blocks_name, num_blocks), ("label_lengths", label_lengths)):
        template = f"{what} must hold one entry per sequence (B = {{}}), got {{}}"
        if None not in (batch, x.shape[0]):
            if x.shape[0] != batch:
                raise ValueError(template.format(batch, x.shape[0]))
        else:
            size_checks.append(
                require(
                    tf.equal(tf.size(x), tf.shape(scores)[0]),
                    template,
                    tf.shape(scores)[0],
                    tf.size(x),
                )
            )
    if in_xla_context():
        return None
    with after(*size_checks):
        shape = tf.shape(scores)
    blocks = (
        tf.range(shape[1])[None, :, None] < tf.cast(num_blocks, tf.int32)[:, None, None]
    )
    rows = (
        tf.range(shape[2])[None, None, :]
        <= tf.cast(label_lengths, tf.int32)[:, None, None]
    )
    bad = (blocks & rows)[..., None, None] & ~(
        tf.math.is_finite(scores) | tf.equal(scores, NEG_INF)
    )
    value, index = first_bad(bad, scores)
    return require(
        ~tf.reduce_any(bad),
        f"{name} must be finite or -inf in the blocks and label positions read; "
        "got {} at [b, block, u, k, v] = {}",
        value,
        index,
    )


def _checked(
    log_probs: tf.Tensor,
    labels: TensorLike,
    label_lengths: TensorLike,
    num_blocks: TensorLike,
    e_symbol: int,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """int32 labels [B, U], label_lengths [B], num_blocks [B], checked.

    They are checked against log_probs [B, NB, U + 1, W, V]; errors name the
    argument.
    """
    labels = integer_tensor(labels, "labels", 2, "[B, U]")
    label_lengths = integer_tensor(label_lengths, "label_lengths", 1, "[B]")
    num_blocks = integer_tensor(num_blocks, "num_blocks", 1, "[B]")
    shape = tf.shape(log_probs, out_type=tf.int64)
    if isinstance(e_symbol, bool) or not isinstance(e_symbol, int) or e_symbol < 0:
        raise ValueError(f"e_symbol must be an int >= 0, got {e_symbol!r}")
    vocab = log_probs.shape[4]
    if vocab is not None and e_symbol >= vocab:
        raise ValueError(f"e_symbol must lie in [0, V = {vocab}), got {e_symbol}")
    checks = []
    if None not in (log_probs.shape[2], labels.shape[1]):
        if log_probs.shape[2] != labels.shape[1] + 1:
            raise ValueError(
                f"log_probs must have U + 1 = {labels.shape[1] + 1} label positions "
                f"for labels {labels.shape}, got log_probs {log_probs.shape}"
            )
    else:
        checks.append(
            require(
                tf.equal(shape[2], tf.shape(labels, out_type=tf.int64)[1] + 1),
                "log_probs must have U + 1 label positions for labels [B, U] "
                "= {}, got log_probs {}",
                tf.shape(labels),
                shape,
            )
        )
    for name, x in (
        ("labels", labels),
        ("label_lengths", label_lengths),
        ("num_blocks", num_blocks),
    ):
        checks.append(
            require(
                tf.equal(tf.shape(x, out_type=tf.int64)[0], shape[0]),
                f"{name} has {{}} rows for log_probs' batch of {{}}",
                tf.shape(x)[0],
                shape[0],
            )
        )
    if not in_xla_context():
        for name, x, limit in (
            ("label_lengths", label_lengths, tf.shape(labels, out_type=tf.int64)[1]),
            ("num_blocks", num_blocks, shape[1]),
        ):
            bad = (x < 0) | (x > limit)
            value, index = first_bad(bad, x)
            checks.append(
                require(
                    ~tf.reduce_any(bad),
                    f"{name} must lie in [0, {{}}]; got {{}} at index {{}}",
                    limit,
                    value,
                    index,
                )
            )
        used = (
            tf.range(tf.shape(labels, out_type=tf.int64)[1])[tf.newaxis]
            < (label_lengths[:, tf.newaxis])
        )
        bad = used & ((labels < 0) | (labels >= shape[4]))
        value, index = first_bad(bad, labels)
        checks.append(
            require(
                ~tf.reduce_any(bad),
                "labels must lie in [0, V = {}) (the outputs of log_probs); got {} "
                "at [b, u] = {}",
                shape[4],
                value,
                index,
            )
        )
    with tf.control_dependencies([c for c in checks if c is not None]):
        return (
            tf.cast(labels, tf.int32),
            tf.cast(label_lengths, tf.int32),
            tf.cast(num_blocks, tf.int32),
        )


def aligned_targets(
    counts: TensorLike,
    labels: TensorLike,
    num_blocks: TensorLike,
    max_width: int,
    e_symbol: int,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The targets of each block's outputs under an alignment.

    Args:
      counts: int [B, NB] labels emitted by each block.
      labels: int [B, U] targets.
      num_blocks: int [B] blocks of each sequence.
      max_width: W, outputs per block including <e>.
      e_symbol: the id of <e>.

    Returns:
      (targets int32 [B, NB, W]: block b's outputs y[s_b], ..., y[s_b + n_b - 1],
      <e>, then 0; positions int32 [B, NB, W]: labels emitted before each
      output (s_b + k); mask bool [B, NB, W]: the outputs that exist).
    """
    counts = tf.cast(counts, tf.int32)
    labels = tf.cast(labels, tf.int32)
    starts = tf.math.cumsum(counts, axis=1, exclusive=True)  # [B, NB]
    k = tf.range(max_width)[None, None]  # [1, 1, W]
    positions = starts[..., None] + k
    blocks = tf.range(tf.shape(counts)[1])[None, :, None]
    in_block = blocks < tf.cast(num_blocks, tf.int32)[:, None, None]
    is_label = (k < counts[..., None]) & in_block
    is_end = (k == counts[..., None]) & in_block
    U = tf.shape(labels)[1]
    flat = tf.reshape(
        tf.minimum(positions, tf.maximum(U - 1, 0)), [tf.shape(counts)[0], -1]
    )
    gathered = tf.reshape(
        tf.gather(tf.pad(labels, [[0, 0], [0, 1]]), flat, batch_dims=1),
        tf.shape(positions),
    )
    targets = tf.where(is_label, gathered, tf.where(is_end, e_symbol, 0))
    return targets, positions, is_label | is_end


def aligned_rows(values: TensorLike, positions: tf.Tensor) -> tf.Tensor:
    """values [B, NB, U + 1, W, ...] gathered at each output: [B, NB, W, ...].

    An output's row is its (block, labels before it, index k in its block).
    """
    last = tf.shape(values)[2] - 1
    rows = tf.gather(values, tf.minimum(positions, last), batch_dims=2)
    index = tf.broadcast_to(tf.range(tf.shape(rows)[2]), tf.shape(positions))
    return tf.gather(rows, index, axis=3, batch_dims=3)


def aligned_log_probs(
    log_probs: TensorLike, positions: tf.Tensor, targets: tf.Tensor
) -> tf.Tensor:
    """log_probs [B, NB, U + 1, W, V] gathered at each output: [B, NB, W].

    An output's entry is its (block, labels before it, index, target).
    """
    return tf.gather(aligned_rows(log_probs, positions), targets, batch_dims=3)


def left_aligned(values: TensorLike, mask: TensorLike) -> tuple[tf.Tensor, tf.Tensor]:
    """values [B, N] where mask [B, N] holds, moved to the front, and counts [B].

    The order is stable; the rest of each row is 0.
    """
    mask = tf.cast(mask, tf.bool)
    order = tf.argsort(tf.cast(~mask, tf.int32), axis=1, stable=True)
    counts = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    gathered = tf.gather(values, order, batch_dims=1)
    keep = tf.range(tf.shape(values)[1])[None] < counts[:, None]
    return tf.where(keep, gathered, tf.zeros_like(gathered)), counts


def edit_distance(
    hyp: TensorLike,
    hyp_lengths: TensorLike,
    ref: TensorLike,
    ref_lengths: TensorLike,
) -> tf.Tensor:
    """float32 Levenshtein distances [B] between hyp [B, L1] and ref [B, L2].

    Both hold int labels; each row's first hyp_lengths / ref_lengths entries
    count.

    The dynamic programme D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1,
    D[i - 1, j - 1] + [hyp[i - 1] != ref[j - 1]]) one anti-diagonal k = i + j
    at a time (each needs the two before it), so it is a tf.scan of vector
    steps that XLA compiles (tf.edit_distance's sparse inputs it cannot).
    """
    hyp = tf.convert_to_tensor(hyp)
    ref = tf.cast(tf.convert_to_tensor(ref), hyp.dtype)
    hyp_lengths = tf.cast(hyp_lengths, tf.int32)
    ref_lengths = tf.cast(ref_lengths, tf.int32)
    batch = tf.shape(hyp)[0]
    len1, len2 = tf.shape(hyp)[1], tf.shape(ref)[1]
    i = tf.range(len1 + 1)[None]  # [1, L1 + 1]
    big = tf.cast(len1 + len2 + 1, tf.float32)
    previous_hyp = tf.pad(hyp, [[0, 0], [1, 0]])  # hyp[i - 1] at i

    def step(carry, k):
        d1, d2 = carry  # diagonals k - 1 and k - 2 (index i)
        j = k - i
        inside = (j >= 0) & (j <= len2)
        # ref[j - 1] at each i (any value where j is out of range)
        ref_at = tf.gather(
            tf.pad(ref, [[0, 0], [1, 0]]), tf.clip_by_value(j[0], 0, len2), axis=1
        )
        cost = tf.cast(tf.not_equal(previous_hyp, ref_at), tf.float32)
        shifted1 = tf.pad(d1[:, :-1], [[0, 0], [1, 0]], constant_values=big)
        shifted2 = tf.pad(d2[:, :-1], [[0, 0], [1, 0]], constant_values=big)
        best = tf.minimum(tf.minimum(shifted1 + 1, d1 + 1), shifted2 + cost)
        edge = tf.cast(tf.broadcast_to(k, tf.shape(best)), tf.float32)
        best = tf.where((i == 0) | (j == 0), edge, best)  # D[0, j] = j, D[i, 0] = i
        best = tf.where(inside, best, big)
        return best, d1

    start = tf.fill(tf.stack([batch, len1 + 1]), big)
    diagonals, _ = tf.scan(
        step, tf.range(len1 + len2 + 1), initializer=(start, start)
    )  # [K, B, L1 + 1]
    final = tf.gather(
        tf.transpose(diagonals, [1, 0, 2]), hyp_lengths + ref_lengths, batch_dims=1
    )  # [B, L1 + 1]
    return tf.gather(final, hyp_lengths, batch_dims=1)
