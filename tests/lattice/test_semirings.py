# SPDX-License-Identifier: Apache-2.0
"""Semirings: values by hand, reductions, and gradients at +-inf."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.lattice import semirings
from tf_transducer.lattice.semirings import Cartesian
from tf_transducer.lattice.semirings import Expectation
from tf_transducer.lattice.semirings import Log
from tf_transducer.lattice.semirings import LogLogExpectation
from tf_transducer.lattice.semirings import MaxTropical
from tf_transducer.lattice.semirings import Real
from tf_transducer.lattice.semirings import value_dtype
from tf_transducer.lattice.semirings import value_shape

INF = float("inf")


def test_real():
    a, b = tf.constant([2.0, 3.0]), tf.constant([5.0, 7.0])
    np.testing.assert_allclose(Real.times(a, b), [2 * 5, 3 * 7])
    np.testing.assert_allclose(Real.plus(a, b), [2 + 5, 3 + 7])
    np.testing.assert_allclose(Real.sum(tf.constant([[2.0, 3.0, 4.0]]), -1), [9.0])
    np.testing.assert_allclose(Real.prod(tf.constant([[2.0, 3.0, 4.0]]), 1), [24.0])
    np.testing.assert_allclose(Real.zeros([2]), [0, 0])
    np.testing.assert_allclose(Real.ones([2]), [1, 1])


def test_log_and_max_tropical():
    a, b = tf.constant([math.log(2.0)]), tf.constant([math.log(3.0)])
    np.testing.assert_allclose(Log.plus(a, b), [math.log(2 + 3)], rtol=1e-6)
    np.testing.assert_allclose(Log.times(a, b), [math.log(2 * 3)], rtol=1e-6)
    np.testing.assert_allclose(MaxTropical.plus(a, b), [math.log(3)], rtol=1e-6)
    np.testing.assert_allclose(MaxTropical.times(a, b), [math.log(6)], rtol=1e-6)
    x = tf.math.log(tf.constant([[1.0, 2.0, 5.0]]))
    np.testing.assert_allclose(Log.sum(x, 1), [math.log(1 + 2 + 5)], rtol=1e-6)
    np.testing.assert_allclose(Log.prod(x, 1), [math.log(1 * 2 * 5)], rtol=1e-6)
    np.testing.assert_allclose(MaxTropical.sum(x, 1), [math.log(5)], rtol=1e-6)
    for s in (Log, MaxTropical):
        assert s.zeros([1]).numpy()[0] == -INF and s.ones([1]).numpy()[0] == 0.0


@pytest.mark.parametrize("semiring", [Real, Log, MaxTropical])
def test_binary_operations_broadcast(semiring):
    a, b = tf.zeros([3, 1]), tf.zeros([1, 4])
    assert semiring.plus(a, b).shape == [3, 4]
    assert semiring.times(a, b).shape == [3, 4]


@pytest.mark.parametrize("semiring", [Real, Log, MaxTropical])
def test_empty_reductions(semiring):
    empty = tf.zeros([2, 0, 3])
    np.testing.assert_array_equal(semiring.sum(empty, 1), semiring.zeros([2, 3]))
    np.testing.assert_array_equal(semiring.prod(empty, -2), semiring.ones([2, 3]))


def test_bad_axis():
    with pytest.raises(ValueError, match="axis 2 is out of range for a value of shape"):
        Log.sum(tf.zeros([2, 3]), 2)
    with pytest.raises(ValueError, match="axis must be an int"):
        Real.sum(tf.zeros([2, 3]), 0.5)


def grads(fn, *values):
    values = [tf.constant(v, tf.float32) for v in values]
    with tf.GradientTape() as tape:
        tape.watch(values)
        out = fn(*values)
    return out.numpy(), [g.numpy() for g in tape.gradient(out, values)]


def test_log_plus_gradients_at_infinities():
    # finite: softmax weights 2/(2+3), 3/(2+3)
    out, (ga, gb) = grads(Log.plus, [math.log(2.0)], [math.log(3.0)])
    np.testing.assert_allclose([ga[0], gb[0]], [2 / 5, 3 / 5], rtol=1e-6)
    # -inf and finite: the -inf side gets 0, the other 1
    out, (ga, gb) = grads(Log.plus, [-INF], [1.5])
    assert out[0] == pytest.approx(1.5) and ga[0] == 0.0 and gb[0] == 1.0
    # both -inf: -inf, no NaN
    out, (ga, gb) = grads(Log.plus, [-INF], [-INF])
    assert out[0] == -INF and ga[0] == 0.0 and gb[0] == 0.0
    # +inf is an overflow: NaN for it, 0 for the finite side
    out, (ga, gb) = grads(Log.plus, [INF], [1.0])
    assert out[0] == INF and np.isnan(ga[0]) and gb[0] == 0.0


def test_log_sum_gradients_at_infinities():
    out, (g,) = grads(lambda x: Log.sum(x, 0), [math.log(1.0), math.log(3.0), -INF])
    np.testing.assert_allclose(g, [1 / 4, 3 / 4, 0.0], rtol=1e-6)
    out, (g,) = grads(lambda x: Log.sum(x, 0), [-INF, -INF])
    assert out == -INF and list(g) == [0.0, 0.0]
    out, (g,) = grads(lambda x: Log.sum(x, 0), [INF, 2.0])
    assert out == INF and np.isnan(g[0]) and g[1] == 0.0


def test_max_tropical_gradient_goes_to_the_first_maximum():
    out, (g,) = grads(lambda x: MaxTropical.sum(x, 0), [1.0, 4.0, 4.0, 2.0])
    assert out == 4.0 and list(g) == [0.0, 1.0, 0.0, 0.0]
    out, (g,) = grads(lambda x: MaxTropical.sum(x, 1), [[3.0, 3.0], [-INF, -INF]])
    assert g.tolist() == [[1.0, 0.0], [1.0, 0.0]]
    _, (ga, gb) = grads(MaxTropical.plus, [2.0, 1.0, 5.0], [2.0, 3.0, 4.0])
    assert ga.tolist() == [1.0, 0.0, 1.0] and gb.tolist() == [0.0, 1.0, 0.0]


def test_cartesian():
    s = Cartesian(Real, MaxTropical)
    a = (tf.constant([2.0]), tf.constant([1.0]))
    b = (tf.constant([3.0]), tf.constant([5.0]))
    assert [v.numpy()[0] for v in s.times(a, b)] == [2 * 3, 1 + 5]
    assert [v.numpy()[0] for v in s.plus(a, b)] == [2 + 3, max(1, 5)]
    zero = s.zeros([1])
    assert zero[0].numpy()[0] == 0.0 and zero[1].numpy()[0] == -INF
    total = s.sum((tf.constant([[1.0, 2.0]]), tf.constant([[7.0, 4.0]])), 1)
    assert [v.numpy()[0] for v in total] == [3.0, 7.0]


def test_expectation_gives_the_entropy():
    p = tf.constant([0.5, 0.25, 0.25, 0.0])
    w = tf.math.log(p)
    # value of each outcome: -log p (>= 0; its log is stored), 0 log 0 = 0
    v = tf.math.log(-tf.math.log(tf.where(p > 0, p, 1.0)))
    total_w, total_x = LogLogExpectation.sum(LogLogExpectation.weighted(w, v), 0)
    entropy = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    assert total_w.numpy() == pytest.approx(0.0, abs=1e-6)
    assert math.exp(total_x.numpy()) == pytest.approx(entropy, rel=1e-6)


def test_expectation_times_is_the_product_rule():
    s = Expectation(Real, Real, lambda w: w)
    out = s.times(
        (tf.constant(2.0), tf.constant(10.0)), (tf.constant(3.0), tf.constant(7.0))
    )
    # (w1 w2, w1 x2 + w2 x1) = (6, 2 * 7 + 3 * 10)
    assert [float(v) for v in out] == [6.0, 44.0]
    one = s.ones([])
    assert [float(v) for v in one] == [1.0, 0.0]


def test_value_shape_and_dtype():
    value = (tf.zeros([2, 3]), tf.zeros([2, 3], tf.float64))
    assert value_shape(value) == [2, 3]
    assert value_dtype(value) == (tf.float32, tf.float64)
    with pytest.raises(ValueError, match="share one shape"):
        value_shape((tf.zeros([2]), tf.zeros([3])))
    assert semirings.value_shape(tf.zeros([4])) == [4]
