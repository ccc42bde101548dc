# SPDX-License-Identifier: Apache-2.0
"""The streaming Conformer: chunk by chunk equals offline, no look-ahead, TFLite.

The harness checks (config, unknown sizes, XLA, padding, saving, mixed
precision) run in tests/test_public_api.py.
"""

import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.layers import ConformerBlock
from tf_transducer.layers import ConformerEncoder
from tf_transducer.layers import ConvSubsampling
from tf_transducer.layers import chunk_attention_mask

RNG = np.random.default_rng(0)


def features(batch, frames, width=6, seed=0):
    return (
        np.random.default_rng(seed)
        .normal(size=(batch, frames, width))
        .astype(np.float32)
    )


def encoder(**kwargs):
    keras.utils.set_random_seed(0)
    args = dict(d_model=8, num_layers=2, num_heads=2, conv_kernel=3, chunk_size=2,
                left_context=3, dropout=0.0)  # fmt: skip
    args.update(kwargs)
    return ConformerEncoder(**args)


def stream(layer, x, lengths, chunk_frames):
    """layer.step over consecutive chunks of x (zero-padded to whole chunks)."""
    frames = x.shape[1]
    x = np.pad(x, [[0, 0], [0, -frames % chunk_frames], [0, 0]])
    states = layer.initial_state(x.shape[0])
    outputs = []
    for start in range(0, x.shape[1], chunk_frames):
        valid = np.clip(lengths - start, 0, chunk_frames).astype(np.int32)
        out, states = layer.step(tf.constant(x[:, start : start + chunk_frames]),
                                 states, valid)  # fmt: skip
        outputs.append(out.numpy())
    return np.concatenate(outputs, axis=1), states


def test_chunk_mask_values():
    got = chunk_attention_mask(5, 2, 1).numpy().astype(int)
    want = [
        [1, 1, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 1, 1, 1, 0],  # chunk 1 (frames 2, 3) + 1 frame of left context
        [0, 1, 1, 1, 0],
        [0, 0, 0, 1, 1],
    ]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_subsampling_is_causal_and_counts_frames(factor):
    keras.utils.set_random_seed(0)
    layer = ConvSubsampling(8, factor, channels=4)
    x = features(2, 5 * factor + 1)
    lengths = np.array([5 * factor + 1, 2 * factor + 1])
    y, out = layer(x, lengths)
    assert y.shape == (2, 6, 8)
    np.testing.assert_array_equal(out, [6, 3])  # ceil(lengths / factor)
    assert (y.numpy()[1, 3:] == 0).all()
    # Output j reads input frames up to factor * j + factor - 1 only.
    for j in range(5):
        changed = x.copy()
        changed[:, factor * (j + 1) :] += 1.0
        z = layer(changed, [x.shape[1]] * 2)[0].numpy()
        base = layer(x, [x.shape[1]] * 2)[0].numpy()
        np.testing.assert_array_equal(z[:, : j + 1], base[:, : j + 1])
        assert np.abs(z[:, j + 1] - base[:, j + 1]).max() > 1e-4
    got, _ = stream(layer, x, lengths, 2 * factor)
    for b, n in enumerate(out.numpy()):
        np.testing.assert_allclose(got[b, :n], y[b, :n], atol=1e-5)


def test_block_steps_equal_the_chunk_masked_call():
    keras.utils.set_random_seed(1)
    block = ConformerBlock(8, 2, ff_mult=2, conv_kernel=4, max_relative_position=5)
    x = features(2, 11, 8, seed=1)
    lengths = np.array([11, 6])
    want = block(x, lengths, chunk_attention_mask(11, 3, 4)).numpy()
    assert (want[1, 6:] == 0).all()
    states = block.initial_state(2, 4)
    x = np.pad(x, [[0, 0], [0, 1], [0, 0]])
    got = []
    for start in range(0, 12, 3):
        valid = np.clip(lengths - start, 0, 3)
        out, states = block.step(tf.constant(x[:, start : start + 3]), states, valid)
        got.append(out)
    got = np.concatenate(got, axis=1)
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(got[b, :n], want[b, :n], atol=1e-5)
    # Full context is not the chunk-masked result.
    assert np.abs(block(x[:, :11], lengths).numpy() - want).max() > 1e-3


@pytest.mark.parametrize(
    "chunk_size, left_context, subsampling",
    [(2, 3, 4), (3, 0, 4), (1, 5, 2), (2, 2, 8)],
)
def test_encoder_steps_equal_the_offline_call(chunk_size, left_context, subsampling):
    layer = encoder(chunk_size=chunk_size, left_context=left_context,
                    subsampling=subsampling)  # fmt: skip
    frames = 9 * subsampling + 3  # not a multiple of any chunk
    x = features(3, frames)
    lengths = np.array([frames, frames - 2 * subsampling - 1, 5])
    want, out = layer(x, lengths)
    np.testing.assert_array_equal(out, -(-lengths // subsampling))
    got, states = stream(layer, x, lengths, chunk_size * subsampling)
    for b, n in enumerate(out.numpy()):
        np.testing.assert_allclose(got[b, :n], want[b, :n], atol=1e-5)
        assert (got[b, n:] == 0).all() and (want.numpy()[b, n:] == 0).all()
    assert [s.shape for s in states] == [s.shape for s in layer.initial_state(3)]


def test_a_step_of_another_size_equals_the_call_with_that_chunk():
    layer = encoder(chunk_sizes=[1, 2, 4], chunk_size=2)
    x = features(2, 32)
    lengths = np.array([32, 30])
    want, _ = layer(x, lengths, chunk_size=4)
    got, _ = stream(layer, x, lengths, 16)
    np.testing.assert_allclose(got[0], want[0], atol=1e-5)
    assert np.abs(want - layer(x, lengths)[0]).max() > 1e-3


def test_training_draws_chunk_sizes():
    layer = encoder(chunk_sizes=[1, 4], seed=3)
    x = features(1, 32)
    by_size = {n: layer(x, chunk_size=n)[0].numpy() for n in (1, 4)}
    seen = set()
    compiled = tf.function(lambda x: layer(x, training=True)[0], jit_compile=True)
    for i in range(12):
        y = (compiled(x) if i % 2 else layer(x, training=True)[0]).numpy()
        (size,) = [n for n, v in by_size.items() if np.allclose(y, v, atol=1e-6)]
        seen.add(size)
    assert seen == {1, 4}


def test_no_look_ahead_beyond_the_chunk():
    layer = encoder(chunk_size=2, left_context=2)
    x = features(2, 40)
    base = layer(x)[0].numpy()
    for chunk in range(4):
        changed = x.copy()
        changed[:, (chunk + 1) * 8 :] = RNG.normal(
            size=changed[:, (chunk + 1) * 8 :].shape
        )
        got = layer(changed)[0].numpy()
        end = (chunk + 1) * 2
        np.testing.assert_array_equal(got[:, :end], base[:, :end])
        assert np.abs(got[:, end:] - base[:, end:]).max() > 1e-3


def test_tflite_step_equals_keras():
    from tf_transducer.export._convert import convert
    from tf_transducer.export._runner import Program

    layer = encoder(chunk_size=2, left_context=3)
    layer(features(1, 8))
    states = layer.initial_state(1)
    names = ["features"] + [f"state_{i}" for i in range(len(states))]
    specs = [tf.TensorSpec([1, 8, 6], tf.float32, name="features")] + [
        tf.TensorSpec(s.shape, s.dtype, name=n)
        for s, n in zip(states, names[1:], strict=True)
    ]
    source = f"def f({', '.join(names)}):\n    return body({', '.join(names)})\n"

    def body(chunk, *states):
        out, new = layer.step(chunk, list(states))
        return {"encoded": out, **{f"new_state_{i}": s for i, s in enumerate(new)}}

    scope = {"body": body}
    exec(source, scope)
    function = tf.function(scope["f"], input_signature=specs)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "step.tflite")
        with open(path, "wb") as f:
            f.write(convert(function))
        program = Program(path, inputs=names)
        x = features(1, 24, seed=5)
        lite = [s.numpy() for s in states]
        for start in range(0, 24, 8):
            chunk = x[:, start : start + 8]
            want, states = layer.step(tf.constant(chunk), states)
            got = program(features=chunk, **dict(zip(names[1:], lite, strict=True)))
            np.testing.assert_allclose(got["encoded"], want, atol=1e-5)
            lite = [got[f"new_state_{i}"] for i in range(len(lite))]
            for a, b in zip(lite, states, strict=True):
                np.testing.assert_allclose(a, b, atol=1e-5)


def test_bad_arguments():
    for kwargs, message in [
        (dict(chunk_size=0), "chunk_size must be a positive number"),
        (dict(left_context=-1), "left_context must be an int >= 0"),
        (dict(subsampling=3), r"subsampling must be one of \[2, 4, 8\]"),
        (dict(num_heads=3), "num_heads must divide d_model"),
        (dict(conv_kernel=1), "conv_kernel must be >= 2"),
        (dict(dropout=1.0), r"dropout must lie in \[0, 1\)"),
        (dict(chunk_sizes=[]), "chunk_sizes must be a non-empty list"),
        (dict(chunk_sizes=[2, 0]), "chunk_sizes must be a positive number"),
    ]:
        with pytest.raises(ValueError, match=message):
            encoder(**kwargs)
    with pytest.raises(ValueError, match="factor must be one of"):
        ConvSubsampling(8, 6)
    block = ConformerBlock(8, 2)
    with pytest.raises(ValueError, match=r"x must be \[B, T, 8\]"):
        block(features(1, 4, 6))
    with pytest.raises(ValueError, match="attention_mask must be bool"):
        block(features(1, 4, 8), None, np.ones((4, 4), np.float32))


def test_bad_steps():
    layer = encoder()
    layer(features(2, 8))
    states = layer.initial_state(2)
    with pytest.raises(ValueError, match="static positive multiple of factor=4 frames"):
        layer.step(tf.constant(features(2, 6)), states)
    with pytest.raises(ValueError, match="states must be a list of 6 tensors"):
        layer.step(tf.constant(features(2, 8)), states[:-1])
    with pytest.raises(ValueError, match=r"states\[3\] must be \[B, 2, 8\]"):
        layer.step(tf.constant(features(2, 8)), states[:3] + [states[2]] + states[4:])
    with pytest.raises(ValueError, match="features must be float32"):
        layer(np.zeros((2, 8, 6), np.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="lengths must lie in"):
        layer.step(tf.constant(features(2, 8)), states, np.array([9, 1]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="lengths must lie in"):
        layer(features(2, 8), np.array([9, 1]))
    with pytest.raises(ValueError, match="call or build the layer first"):
        encoder().initial_state(1)


def test_every_weight_gets_a_finite_gradient():
    layer = encoder(dropout=0.1, chunk_sizes=[1, 2])
    x = features(2, 20)
    x[1, 9:] = np.nan  # padding
    revived = ConformerEncoder.from_config(layer.get_config())
    assert revived.chunk_sizes == [1, 2] and revived.max_relative_position == 4
    with tf.GradientTape() as tape:
        y, _ = layer(x, np.array([20, 9]), training=True)
        loss = tf.reduce_sum(y * np.linspace(-1, 1, 8, dtype=np.float32))
    grads = tape.gradient(loss, layer.trainable_weights)
    assert len(grads) == len(layer.trainable_weights) > 20
    for weight, grad in zip(layer.trainable_weights, grads, strict=True):
        assert grad is not None and np.isfinite(grad.numpy()).all(), weight.path
        assert np.abs(grad.numpy()).max() > 0, weight.path


def test_masked_softmax_is_exactly_zero_where_masked_and_bounded():
    from tf_transducer.layers.conformer_block import masked_softmax

    scores = tf.constant([[0.5, 300.0, -2.0, 1.0], [3.0, 1.0, 2.0, 0.0]])
    allowed = tf.constant([[True, False, True, True], [False] * 4])
    with tf.GradientTape() as tape:
        tape.watch(scores)
        probs = masked_softmax(scores, allowed)
        loss = tf.reduce_sum(probs * tf.constant([1.0, 2.0, 3.0, 4.0]))
    want = tf.nn.softmax(tf.constant([0.5, -2.0, 1.0])).numpy()
    np.testing.assert_allclose(probs[0].numpy()[[0, 2, 3]], want, rtol=1e-6)
    assert probs[0, 1] == 0.0  # a masked score of 300 neither leaks nor overflows
    np.testing.assert_array_equal(probs[1], np.zeros(4))  # nothing allowed
    gradient = tape.gradient(loss, scores).numpy()
    assert np.isfinite(gradient).all() and gradient[0, 1] == 0 and not gradient[1].any()
