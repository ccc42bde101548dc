# SPDX-License-Identifier: Apache-2.0
"""SpecAugment: property tests over many seeds, domains, seeds, export, config."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.layers import SpecAugment
from tf_transducer.layers import spec_augment as sa

SEEDS = range(20)


def features(B=4, T=120, F=40, seed=0, lengths=(120, 90, 17, 0)):
    """Positive features (a mask's 0 is recognisable), random padding."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 2.0, size=(B, T, F)).astype(np.float32)
    return x, np.array(lengths, np.int32)


def draws(seed):
    return sa.Draws(keras.random.SeedGenerator(seed))


def runs(flags):
    """(start, width) of each run of True in a 1-D bool array."""
    out, start = [], None
    for i, f in enumerate(list(flags) + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            out.append((start, i - start))
            start = None
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_block_masks_respect_their_bounds(seed):
    lengths = tf.constant([100, 40, 5, 1])
    keep = sa.block_mask(draws(seed), lengths, 120, 1, max_width=27, max_ratio=0.2)
    for b, n in enumerate(lengths.numpy()):
        masked = keep[b].numpy() < 0.5
        (blocks,) = [runs(masked)] if masked.any() else [[]]
        assert len(blocks) <= 1
        for start, width in blocks:
            assert width < 27 and width <= max(int(0.2 * n), 1)
            assert start + width <= n


@pytest.mark.parametrize("seed", SEEDS)
def test_time_and_frequency_masks_count_and_width(seed):
    x, lengths = features(seed=seed)
    layer = SpecAugment(
        freq_mask_max_bins=8,
        freq_mask_count=2,
        time_mask_max_frames=10,
        time_mask_count=3,
        seed=seed,
    )
    y = layer(x, lengths, training=True).numpy()
    for b, n in enumerate(lengths):
        zero = y[b, :n] == 0
        frames = zero.all(axis=1)
        bins = zero[~frames].all(axis=0) if (~frames).any() else np.zeros(40, bool)
        assert frames.sum() <= 3 * 9  # 3 masks narrower than 10 frames
        assert bins.sum() <= 2 * 7
        for _, width in runs(bins):
            assert width <= 14  # two masks may touch
        # Outside the masks the values are the input's.
        keep = ~zero
        np.testing.assert_array_equal(y[b, :n][keep], x[b, :n][keep])


@pytest.mark.parametrize("seed", SEEDS)
def test_padding_and_empty_utterances_never_change(seed):
    x, lengths = features(seed=seed)
    layer = SpecAugment(
        freq_mask_max_bins=10,
        freq_mask_count=2,
        time_mask_max_frames=30,
        time_mask_count=2,
        freq_warp_max_bins=6,
        time_warp_max_frames=20,
        time_warp_max_ratio=0.5,
        freq_noise_max_stddev=0.3,
        use_noise=True,
        seed=seed,
    )
    y = layer(x, lengths, training=True).numpy()
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(y[b, n:], x[b, n:])


@pytest.mark.parametrize("seed", SEEDS)
def test_warps_keep_shape_and_end_frames(seed):
    x, lengths = features(seed=seed, lengths=(120, 64, 3, 2))
    xt = tf.constant(x[..., None])
    warped = sa.time_warp(xt, lengths, draws(seed), 30, 1.0).numpy()[..., 0]
    assert warped.shape == x.shape
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(warped[b, 0], x[b, 0], rtol=1e-6)
        np.testing.assert_allclose(warped[b, n - 1], x[b, n - 1], rtol=1e-6)
    source = sa.warp_positions(draws(seed), tf.constant(lengths), 120, 30).numpy()
    for b, n in enumerate(lengths):
        assert np.all(np.diff(source[b, :n]) >= 0) and source[b, n - 1] == n - 1
        assert np.all(source[b, n:] == np.arange(n, 120))
    fwarped = sa.frequency_warp(xt, lengths, draws(seed), 8).numpy()[..., 0]
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(fwarped[b, :n, 0], x[b, :n, 0], rtol=1e-6)
        np.testing.assert_allclose(fwarped[b, :n, -1], x[b, :n, -1], rtol=1e-6)


def test_warp_moves_by_at_most_the_bound():
    for seed in SEEDS:
        lengths = tf.constant([200, 50])
        source = sa.warp_positions(draws(seed), lengths, 200, 10, max_ratio=0.1).numpy()
        shift = np.abs(source - np.arange(200))
        assert shift[0].max() <= 10 + 1e-4
        assert shift[1].max() <= 5 + 1e-4  # 0.1 * 50


def test_dynamic_time_masks_scale_with_length():
    widths = {100: [], 1000: []}
    for seed in range(200):
        lengths = tf.constant([100, 1000])
        keep = sa.block_mask(draws(seed), lengths, 1000, 1, None, max_ratio=0.1)
        for b, n in enumerate((100, 1000)):
            masked = (keep[b].numpy() < 0.5)[:n]
            assert masked.sum() <= 0.1 * n
            widths[n].append(masked.sum())
    ratio = np.mean(widths[1000]) / np.mean(widths[100])
    assert 7 < ratio < 13, ratio  # widths ~ U(0, 0.1 n)


def test_masks_per_frame_limits_the_count():
    for seed in SEEDS:
        lengths = tf.constant([100, 20])
        keep = sa.block_mask(
            draws(seed), lengths, 100, 10, 3, 1.0, masks_per_frame=0.05
        )
        blocks = [len(runs(keep[b].numpy() < 0.5)) for b in range(2)]
        assert blocks[0] <= 5 and blocks[1] <= 1  # min(10, 0.05 n)


def test_noisy_masks_hold_gaussian_noise():
    x = tf.ones([8, 400, 40, 1]) * 5.0
    lengths = tf.fill([8], 400)
    y = sa.time_mask(x, lengths, draws(3), 100, 2, use_noise=True, gaussian_noise=True)
    y = y.numpy()[..., 0]
    noise = y[y != 5.0]
    assert noise.size > 10000
    assert abs(noise.mean()) < 0.05 and abs(noise.std() - 1.0) < 0.05


def test_frequency_noise_warms_up_with_the_step():
    x, lengths = features()
    layer = SpecAugment(
        freq_mask_count=0,
        time_mask_count=0,
        freq_noise_max_stddev=0.5,
        freq_noise_warmup_steps=100,
        seed=1,
    )
    np.testing.assert_array_equal(layer(x, lengths, training=True, step=0), x)
    moved = layer(x, lengths, training=True, step=200).numpy()
    ratio = moved[0] / x[0]
    assert not np.allclose(ratio, 1.0)
    np.testing.assert_allclose(
        ratio, np.broadcast_to(ratio[:1], ratio.shape), rtol=1e-5
    )
    layer(x, lengths, training=True)  # no step: its own count of calls
    assert int(layer.step.numpy()) == 1


def test_domains_get_their_own_policy():
    x, lengths = features(lengths=(120, 120, 120, 120))
    domains = np.array([1, 2, 3, 1])
    layer = SpecAugment(
        domain_ids=[1, 2],
        time_mask_count=[3, 0],
        time_mask_max_frames=[20, 20],
        freq_mask_count=[0, 2],
        freq_mask_max_bins=10,
        seed=4,
    )
    for seed in range(5):
        y = layer(x, lengths, domain_ids=domains, training=True).numpy()
        np.testing.assert_array_equal(y[2], x[2])  # domain 3: not augmented
        zero_frames = [(y[b] == 0).all(axis=1).sum() for b in range(4)]
        zero_bins = [(y[b] == 0).all(axis=0).sum() for b in range(4)]
        assert zero_bins[0] == zero_bins[3] == 0  # domain 1: time masks only
        assert zero_frames[1] == 0  # domain 2: frequency masks only
        del seed
    with pytest.raises(ValueError, match="pass domain_ids"):
        layer(x, lengths, training=True)


def test_same_seed_same_output_different_seeds_differ():
    x, lengths = features()

    def run(seed):
        layer = SpecAugment.from_preset("LD", seed=seed)
        return [layer(x, lengths, training=True).numpy() for _ in range(2)]

    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], a[1])  # a new draw every call
    assert not np.array_equal(a[0], c[0])


def test_input_dependent_seeds_are_a_function_of_the_input():
    x, lengths = features()
    one = SpecAugment.from_preset("LD", use_input_dependent_random_seed=True, seed=1)
    two = SpecAugment.from_preset("LD", use_input_dependent_random_seed=True, seed=2)
    first = one(x, lengths, training=True).numpy()
    np.testing.assert_array_equal(first, one(x, lengths, training=True))
    np.testing.assert_array_equal(first, two(x, lengths, training=True))
    graph = tf.function(lambda a, n: one(a, n, training=True))
    np.testing.assert_allclose(first, graph(x, lengths), rtol=1e-5)  # same draws
    other = x.copy()
    other[0, 0, 0] += 0.5
    assert not np.array_equal(first, one(other, lengths, training=True))
    padded = x.copy()
    padded[1, 100:] = 7.0  # padding does not enter the seed
    np.testing.assert_array_equal(
        first[:, :90], one(padded, lengths, training=True)[:, :90]
    )


def test_unstack_augments_the_unstacked_frames():
    rng = np.random.default_rng(7)
    x = rng.uniform(1, 2, size=(2, 40, 3 * 10)).astype(np.float32)
    lengths = np.array([40, 25], np.int32)
    options = dict(time_mask_max_frames=12, time_mask_count=2, freq_mask_count=0)
    stacked = SpecAugment(unstack=True, stack_height=3, seed=9, **options)
    flat = SpecAugment(seed=9, **options)
    got = stacked(x, lengths, training=True).numpy()
    want = flat(x.reshape(2, 120, 10), lengths * 3, training=True).numpy()
    np.testing.assert_array_equal(got, want.reshape(2, 40, 30))
    assert (got.reshape(2, 120, 10) == 0).all(axis=2).any()


def test_four_dimensional_input_and_keras_mask():
    x, lengths = features()
    x4 = np.stack([x, x + 1], axis=-1)
    y = SpecAugment.from_preset("LB", seed=3)(x4, lengths, training=True).numpy()
    assert y.shape == x4.shape
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(y[b, n:], x4[b, n:])
    inputs = keras.Input((None, 40))
    masked = keras.layers.Masking(0.0)(inputs)
    out = SpecAugment.from_preset("LB", seed=3)(masked, training=True)
    model = keras.Model(inputs, out)
    padded = x.copy()
    padded[1, 90:] = 0.0  # the Masking layer's padding
    y = model(padded, training=True).numpy()
    np.testing.assert_array_equal(y[1, 90:], 0.0)


def test_inference_is_the_identity_and_exports_to_tflite():
    from ai_edge_litert.interpreter import Interpreter

    inputs = keras.Input((50, 20))
    hidden = SpecAugment.from_preset("LD", seed=1)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(4)(hidden))
    x = np.random.default_rng(1).normal(size=(1, 50, 20)).astype(np.float32)
    np.testing.assert_array_equal(SpecAugment.from_preset("LD")(x, training=False), x)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    got = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, model(x, training=False), atol=1e-5)


def test_start_step_passes_features_unchanged_before_it():
    x, lengths = features()
    layer = SpecAugment(freq_mask_max_bins=10, freq_mask_count=2, start_step=3, seed=1)
    for step in (0, 2):
        np.testing.assert_array_equal(layer(x, lengths, training=True, step=step), x)
    assert not np.array_equal(layer(x, lengths, training=True, step=3), x)
    counting = SpecAugment(freq_mask_max_bins=10, freq_mask_count=2, start_step=2)
    outputs = [counting(x, lengths, training=True).numpy() for _ in range(3)]
    np.testing.assert_array_equal(outputs[0], x)  # its own count: calls 1, 2
    np.testing.assert_array_equal(outputs[1], x)
    assert not np.array_equal(outputs[2], x)
    assert SpecAugment.from_config(layer.get_config()).start_step == 3


def test_from_arg():
    assert SpecAugment.from_arg(None) is None
    assert SpecAugment.from_arg("LB").freq_mask_max_bins == 27
    assert SpecAugment.from_arg(dict(time_mask_count=3)).time_mask_count == 3
    with pytest.raises(ValueError, match="augment must be None, a preset name"):
        SpecAugment.from_arg(3)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(start_step=-1), "start_step must be an int >= 0"),
        (dict(freq_mask_max_bins=-1), "freq_mask_max_bins must be an int >= 0"),
        (dict(time_mask_count=1.5), "time_mask_count must be an int >= 0"),
        (dict(time_mask_max_ratio=1.5), r"time_mask_max_ratio must lie in \[0, 1\]"),
        (dict(time_masks_per_frame=-0.1), "time_masks_per_frame must be >= 0"),
        (dict(time_warp_bound="linear"), 'time_warp_bound must be "static" or'),
        (dict(freq_noise_max_stddev=-1.0), "freq_noise_max_stddev must be >= 0"),
        (dict(freq_noise_warmup_steps=-3), "freq_noise_warmup_steps must be an int"),
        (dict(stack_height=0), "stack_height must be an int >= 1"),
        (dict(domain_ids=[]), "domain_ids must be a non-empty list"),
        (dict(domain_ids=[1, 1]), "domain_ids must not repeat"),
        (
            dict(domain_ids=[1, 2], time_mask_count=[1, 2, 3]),
            "time_mask_count has 3 values but domain_ids has 2 domains",
        ),
        (
            dict(use_dynamic_time_mask_max_frames="yes"),
            "use_dynamic_time_mask_max_frames must be a bool",
        ),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SpecAugment(**kwargs)


def test_bad_shapes_and_presets():
    with pytest.raises(ValueError, match="preset must be one of"):
        SpecAugment.from_preset("XL")
    with pytest.raises(ValueError, match=r"features must be \[B, T, F\]"):
        SpecAugment()(np.zeros((2, 3), np.float32), training=True)
    with pytest.raises(ValueError, match="not a multiple of stack_height=3"):
        SpecAugment(unstack=True)(np.zeros((1, 4, 10), np.float32), training=True)


def test_integer_and_non_finite_features_are_refused():
    x, lengths = features(lengths=(120, 90, 17, 0))
    layer = SpecAugment(time_warp_max_frames=5, time_warp_max_ratio=0.2, seed=1)
    for training in (True, False):
        with pytest.raises(ValueError, match="features must be float32 .*got int16"):
            layer(x.astype(np.int16), lengths, training=training)
    bad = x.copy()
    bad[2, 16, 3] = np.nan  # the last valid frame of utterance 2
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"features must be finite within its lengths.*nan.*\[2, 16, 3\]",
    ):
        layer(bad, lengths, training=True)
    traced = tf.function(lambda f, n: layer(f, n, training=True))
    with pytest.raises(tf.errors.InvalidArgumentError, match="features must be finite"):
        traced(bad, lengths)
    # Inference is the identity: the values pass as they are, NaN included.
    np.testing.assert_array_equal(layer(bad, lengths, training=False), bad)
    # Padding may hold anything: it comes back unchanged.
    bad[2, 16, 3] = x[2, 16, 3]
    bad[2, 17:] = np.inf
    bad[3] = np.nan
    out = layer(bad, lengths, training=True).numpy()
    np.testing.assert_array_equal(out[2, 17:], bad[2, 17:])
    assert np.isnan(out[3]).all() and np.isfinite(out[:3, :17]).all()


def test_bad_domain_ids_are_named():
    x, lengths = features()
    layer = SpecAugment(domain_ids=[0, 1], time_mask_max_frames=5, seed=1)
    for domain_ids, message in [
        ([0, 1, 1], "domain_ids has 3 entries for a batch of 4"),
        ([0, 1, 1, 0, 1], "domain_ids has 5 entries for a batch of 4"),
        ([0.0, 1.0, 1.0, 0.0], "domain_ids must be integers, got dtype float32"),
        ([[0, 1, 1, 0]], r"domain_ids must be \[B\], got shape \(1, 4\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            layer(x, lengths, domain_ids=domain_ids, training=True)
    traced = tf.function(
        lambda f, d: layer(f, lengths, domain_ids=d, training=True),
        input_signature=[
            tf.TensorSpec([None, None, 40], tf.float32),
            tf.TensorSpec([None], tf.int32),
        ],
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"domain_ids has \] \[3\]"
    ):
        traced(x, [0, 1, 1])
    assert traced(x, [0, 1, 1, 0]).shape == x.shape
