# SPDX-License-Identifier: Apache-2.0
"""The MI recursion: the C++ op and the pure-TF path against a numpy loop."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tests.ops.mi_reference import mi_reference

HERE = os.path.dirname(os.path.abspath(__file__))
IMPLEMENTATIONS = {
    "op": tt.mutual_information_recursion,
    "tf": tt.mutual_information_recursion_tf,
}
TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


def random_case(rng, B, S, T, modified, dtype, boundary=False, neg_inf=0.0):
    """Random px, py (some entries -inf with probability neg_inf), boundary."""
    px = rng.normal(size=(B, S, T if modified else T + 1)) * 2
    py = rng.normal(size=(B, S + 1, T)) * 2
    for x in (px, py):
        x[rng.random(x.shape) < neg_inf] = -np.inf
    bnd = None
    if boundary:
        s_begin = rng.integers(0, S // 2 + 1, size=B)
        t_begin = rng.integers(0, T // 2 + 1, size=B)
        s_end = rng.integers(s_begin, S + 1)
        t_end = rng.integers(t_begin, T + 1)
        if modified:  # keep at least one path: S steps need S frames
            t_end = np.maximum(t_end, np.minimum(t_begin + s_end - s_begin, T))
            s_end = np.minimum(s_end, s_begin + t_end - t_begin)
        bnd = np.stack([s_begin, t_begin, s_end, t_end], 1).astype(np.int64)
    return px.astype(dtype), py.astype(dtype), bnd


def run(impl, px, py, boundary=None):
    scores, (px_grad, py_grad) = IMPLEMENTATIONS[impl](
        px, py, boundary, return_grad=True
    )
    return scores.numpy(), px_grad.numpy(), py_grad.numpy()


def assert_matches_reference(impl, px, py, boundary=None):
    got = run(impl, px, py, boundary)
    want = mi_reference(px, py, boundary)
    for name, g, w in zip(("scores", "px_grad", "py_grad"), got, want, strict=True):
        assert g.dtype == px.dtype, name
        np.testing.assert_allclose(g, w, err_msg=name, **TOL[px.dtype.type])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("modified", [False, True], ids=["regular", "modified"])
@pytest.mark.parametrize("boundary", [False, True], ids=["full", "boundary"])
def test_matches_numpy_reference(impl, dtype, modified, boundary):
    rng = np.random.default_rng([7, modified, boundary])
    for B, S, T in [(1, 1, 1), (3, 4, 7), (2, 6, 6), (4, 3, 9)]:
        px, py, bnd = random_case(rng, B, S, T, modified, dtype, boundary)
        assert_matches_reference(impl, px, py, bnd)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("modified", [False, True], ids=["regular", "modified"])
def test_neg_inf_entries_give_finite_gradients(impl, modified):
    rng = np.random.default_rng(3)
    px, py, _ = random_case(rng, 3, 5, 8, modified, np.float64, neg_inf=0.2)
    if not modified:
        px[:, :, -1] = -np.inf  # the RNN-T convention: no symbol after the end
    assert_matches_reference(impl, px, py)
    scores, px_grad, py_grad = run(impl, px, py)
    finite = np.isfinite(scores)
    assert finite.any()
    assert np.isfinite(px_grad).all() and np.isfinite(py_grad).all()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("modified", [False, True], ids=["regular", "modified"])
def test_occupations_count_the_steps_of_a_path(impl, modified):
    # Every path takes s_end - s_begin x-steps and, for regular px,
    # t_end - t_begin y-steps (modified: t_end - t_begin steps in all).
    rng = np.random.default_rng(4)
    px, py, bnd = random_case(rng, 5, 6, 9, modified, np.float64, boundary=True)
    _, px_grad, py_grad = run(impl, px, py, bnd)
    ds, dt = bnd[:, 2] - bnd[:, 0], bnd[:, 3] - bnd[:, 1]
    np.testing.assert_allclose(px_grad.sum((1, 2)), ds, rtol=1e-12)
    np.testing.assert_allclose(py_grad.sum((1, 2)), dt - ds if modified else dt)


@pytest.mark.parametrize("modified", [False, True], ids=["regular", "modified"])
def test_gradient_matches_finite_differences(modified):
    rng = np.random.default_rng(5)
    px, py, bnd = random_case(rng, 2, 3, 4, modified, np.float64, boundary=True)
    bnd[0] = [0, 0, 3, 4]

    def f(px, py):
        return tt.mutual_information_recursion(px, py, bnd) * [1.0, -2.0]

    analytic, numeric = tf.test.compute_gradient(f, [px, py])
    for a, n in zip(analytic, numeric, strict=True):
        np.testing.assert_allclose(a, n, atol=1e-7)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_eager_and_tf_function_agree(impl):
    # The kernel is bitwise deterministic; graph mode may fuse the pure-TF
    # path's elementwise ops differently, which moves the last float bits.
    rng = np.random.default_rng(6)
    px, py, bnd = random_case(rng, 3, 5, 7, False, np.float32, boundary=True)
    fn = IMPLEMENTATIONS[impl]
    eager = fn(px, py, bnd, return_grad=True)
    graph = tf.function(lambda a, b, c: fn(a, b, c, return_grad=True))(px, py, bnd)
    for e, g in zip(tf.nest.flatten(eager), tf.nest.flatten(graph), strict=True):
        if impl == "op":
            np.testing.assert_array_equal(e.numpy(), g.numpy())
        else:
            np.testing.assert_allclose(e.numpy(), g.numpy(), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("modified", [False, True], ids=["regular", "modified"])
def test_op_and_tf_path_agree_on_long_sequences(modified):
    # Many sequences: the kernel gives each thread whole sequences.
    rng = np.random.default_rng([8, modified])
    px, py, bnd = random_case(rng, 8, 30, 200, modified, np.float64, boundary=True)
    bnd[0] = [0, 0, 30, 200]
    for got, want in zip(run("op", px, py, bnd), run("tf", px, py, bnd), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_wavefront_schedule_matches_the_tf_path():
    # Fewer sequences than threads: the kernel splits each sequence into
    # tiles run as a pipelined wavefront.  Thread counts are fixed when
    # TensorFlow starts, so this runs in a fresh interpreter with 3 threads.
    script = os.path.join(HERE, "wavefront_check.py")
    result = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("ok") == 4, result.stdout


def test_gradient_tape_scales_by_the_incoming_gradient():
    rng = np.random.default_rng(8)
    px, py, bnd = random_case(rng, 3, 4, 5, False, np.float64, boundary=True)
    px, py = tf.Variable(px), tf.Variable(py)
    weights = tf.constant([0.5, -1.0, 3.0], tf.float64)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(weights * tt.mutual_information_recursion(px, py, bnd))
    d_px, d_py = tape.gradient(loss, [px, py])
    _, want_px, want_py = mi_reference(px.numpy(), py.numpy(), bnd)
    w = weights.numpy()[:, None, None]
    np.testing.assert_allclose(d_px, w * want_px, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d_py, w * want_py, rtol=1e-10, atol=1e-12)


# Closed forms.


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_zero_symbols_is_the_sum_of_one_row(impl):
    # s_begin == s_end: the only path is y-steps along row s_begin.
    rng = np.random.default_rng(9)
    px, py, _ = random_case(rng, 2, 3, 5, False, np.float64)
    bnd = np.array([[0, 0, 0, 5], [2, 1, 2, 4]])
    scores, px_grad, py_grad = run(impl, px, py, bnd)
    np.testing.assert_allclose(scores, [py[0, 0, :5].sum(), py[1, 2, 1:4].sum()])
    assert not px_grad.any()
    np.testing.assert_array_equal(py_grad[1, 2], [0, 1, 1, 1, 0])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_modified_with_as_many_symbols_as_frames_has_one_path(impl):
    rng = np.random.default_rng(10)
    px, py, _ = random_case(rng, 2, 4, 4, True, np.float64)
    scores, px_grad, py_grad = run(impl, px, py)
    diag = np.arange(4)
    np.testing.assert_allclose(scores, px[:, diag, diag].sum(1))
    np.testing.assert_array_equal(px_grad, np.broadcast_to(np.eye(4), px.shape))
    assert not py_grad.any()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_regular_with_zero_frames_is_the_sum_of_one_column(impl):
    rng = np.random.default_rng(11)
    px, py, _ = random_case(rng, 1, 4, 3, False, np.float64)
    scores, _, _ = run(impl, px, py, [[1, 2, 4, 2]])
    np.testing.assert_allclose(scores, [px[0, 1:4, 2].sum()])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("modified", [False, True], ids=["regular", "modified"])
def test_equal_weights_count_paths_with_a_binomial(impl, modified):
    # Every path of the regular grid has S + T steps and there are C(S + T, S)
    # of them; a modified path has T steps, S of them x-steps: C(T, S) paths.
    S, T, c = 5, 7, -0.25
    px = np.full((1, S, T if modified else T + 1), c)
    py = np.full((1, S + 1, T), c)
    scores, _, _ = run(impl, px, py)
    paths, steps = (math.comb(T, S), T) if modified else (math.comb(S + T, S), S + T)
    np.testing.assert_allclose(scores, [math.log(paths) + c * steps], rtol=1e-12)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_no_surviving_path_gives_neg_inf_and_zero_gradients(impl):
    # Modified: 3 symbols cannot fit into 2 frames.
    px = np.zeros((1, 3, 4))
    py = np.zeros((1, 4, 4))
    scores, px_grad, py_grad = run(impl, px, py, [[0, 0, 3, 2]])
    assert scores[0] == -np.inf
    assert not px_grad.any() and not py_grad.any()
