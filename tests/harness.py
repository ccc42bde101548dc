# SPDX-License-Identifier: Apache-2.0
"""One harness for every public layer, loss and model.

In the spirit of keras-hub's `TestCase.run_layer_test`, for what this
library promises: each check builds its object from a `make(**kwargs)`
factory and compares with the object's own eager result.

- config: get_config -> from_config and Keras (de)serialisation through
  JSON give the same config;
- symbolic: a call on `keras.Input`s with unknown batch and time sizes
  gives outputs of the eager outputs' rank (and `compute_output_shape`
  agrees, where a layer defines it);
- graph / XLA: a tf.function with a fully dynamic input_signature, and
  one compiled by XLA, give the eager result;
- padding: inputs padded further, with NaN or 1e30 in the new padding, give
  the same result in every valid position (and 0 past each output length
  where the layer promises it): padding is never read;
- saving: a `.keras` round trip (config and weights) gives the same result;
- TFLite: built-in ops only, and the LiteRT interpreter agrees with Keras
  (layers meant for export);
- mixed precision: under `mixed_float16` and `mixed_bfloat16` the result is
  finite, float outputs are in the compute dtype or float32, and close to
  the float32 result.
"""

import dataclasses
import json
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

from tf_transducer.training import train_loop

GARBAGE = (np.nan, 1e30)


@dataclasses.dataclass(frozen=True)
class Padding:
    """Where a case's batch is padded, and where its result's padding is.

    values / lengths: indices of the padded input and of its lengths among
    the call's inputs (for losses: keys "y_true" / "y_pred" given as
    `extra`); axis: the padded axis of that input; outputs(result) ->
    [(values, lengths or None)] the result's arrays and the lengths that say
    which of their positions (along axis 1) are valid (None: all).
    zero_after: the layer promises 0 past each output length.
    also: more (input index, axis, fill) pads applied together (e.g. the
    labels of a loss), fill None meaning garbage.
    """

    values: int
    lengths: int | None
    outputs: object
    axis: int = 1
    zero_after: bool = False
    also: tuple = ()
    int_fill: int = 7


# ------------------------------------------------------------------ helpers


def to_numpy(structure):
    return tf.nest.map_structure(
        lambda x: np.asarray(x) if x is not None else None, structure
    )


def assert_close(got, want, atol, rtol=1e-5, what=""):
    got, want = tf.nest.flatten(to_numpy(got)), tf.nest.flatten(to_numpy(want))
    assert len(got) == len(want), what
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), atol=atol, rtol=rtol,
                err_msg=what,
            )  # fmt: skip
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def dynamic_spec(x):
    x = np.asarray(x)
    return tf.TensorSpec([None] * x.ndim, tf.as_dtype(x.dtype))


def unknown_batch_and_time(x):
    """x's shape with the batch and time sizes unknown (as keras.Input)."""
    shape = list(np.shape(x))
    return tuple([None] * min(2, len(shape)) + shape[2:])


def check_config(obj):
    """get_config / from_config and Keras serialisation round trips."""
    config = obj.get_config()
    text = json.dumps(config, sort_keys=True)
    revived = type(obj).from_config(json.loads(text))
    assert json.dumps(revived.get_config(), sort_keys=True) == text
    serialized = json.dumps(keras.saving.serialize_keras_object(obj))
    revived = keras.saving.deserialize_keras_object(json.loads(serialized))
    assert type(revived) is type(obj)
    assert json.dumps(revived.get_config(), sort_keys=True) == text
    return revived


def check_graph_and_xla(fn, inputs, want, atol, xla=True):
    """fn(*inputs) traced with unknown sizes, and under XLA, equals `want`."""
    graph = tf.function(fn, input_signature=[dynamic_spec(x) for x in inputs])
    assert_close(graph(*inputs), want, atol, what="tf.function(dynamic shapes)")
    if xla:
        compiled = tf.function(
            fn, input_signature=[dynamic_spec(x) for x in inputs], jit_compile=True
        )
        assert_close(compiled(*inputs), want, atol * 10, 1e-4, what="jit_compile")


def padded_further(inputs, padding, extra, fill):
    """The inputs with `extra` more steps of fill along the padded axes."""
    out = list(inputs)

    def pad(x, axis, value):
        x = np.asarray(x)
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, extra)
        if value is None:
            value = fill if np.issubdtype(x.dtype, np.floating) else padding.int_fill
        return np.pad(x, widths, constant_values=value)

    values = pad(out[padding.values], padding.axis, None)
    if padding.lengths is not None and np.issubdtype(values.dtype, np.floating):
        # The padding the batch had already holds the garbage too.
        lengths = np.asarray(inputs[padding.lengths])
        steps = np.arange(values.shape[padding.axis])
        shape = [1] * values.ndim
        shape[0], shape[padding.axis] = len(lengths), len(steps)
        beyond = (steps[None, :] >= lengths[:, None]).reshape(shape)
        values = np.where(beyond, np.asarray(fill, values.dtype), values)
    out[padding.values] = values
    for index, axis, value in padding.also:
        out[index] = pad(out[index], axis, value)
    return out


def valid_parts(arrays):
    """[(values, lengths)] -> flat list of each row's valid prefix."""
    parts = []
    for values, lengths in arrays:
        values = np.asarray(values)
        if lengths is None:
            parts.append(values)
            continue
        for b, n in enumerate(np.asarray(lengths)):
            parts.append(values[b, : int(n)])
    return parts


def check_padding(fn, inputs, padding, atol):
    """More padding (holding NaN or 1e30) changes no valid output."""
    want = padding.outputs(to_numpy(fn(*inputs)))
    for fill in GARBAGE:
        got = padding.outputs(to_numpy(fn(*padded_further(inputs, padding, 3, fill))))
        assert_close(
            valid_parts(got), valid_parts(want), atol, what=f"padding of {fill}"
        )
        if padding.zero_after:
            for values, lengths in got:
                values = np.asarray(values)
                for b, n in enumerate(np.asarray(lengths)):
                    assert (values[b, int(n) :] == 0).all(), "padding must be 0"


@keras.saving.register_keras_serializable(package="tf_transducer_tests")
class Harnessed(keras.Model):
    """A model around one layer, so that the layer can be saved as .keras."""

    def __init__(self, layer, call_kwargs=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(layer, dict):
            layer = keras.saving.deserialize_keras_object(layer)
        self.inner = layer
        self.call_kwargs = dict(call_kwargs or {})

    def call(self, inputs):
        self._specs = [(list(x.shape), x.dtype.name) for x in inputs]
        return self.inner(*inputs, **self.call_kwargs)

    def get_build_config(self):
        return {"specs": self._specs}

    def build_from_config(self, config):
        """Builds by a call on zeros shaped as the saved model's inputs."""
        self(
            [
                tf.zeros([d or 1 for d in shape], dtype)
                for shape, dtype in config["specs"]
            ]
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            layer=keras.saving.serialize_keras_object(self.inner),
            call_kwargs=self.call_kwargs,
        )
        return config


def check_saving(model, inputs, want, atol, call=None):
    """A .keras round trip keeps the config and the weights."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.keras")
        model.save(path)
        loaded = keras.models.load_model(path, compile=False)
    got = call(loaded, inputs) if call else loaded(inputs)
    assert_close(got, want, atol, what="after .keras save / load")
    return loaded


def check_tflite(fn, inputs, want, atol):
    """The TFLite program (built-in ops only) of fn agrees with Keras."""
    from tf_transducer.export._convert import convert
    from tf_transducer.export._runner import Program

    names = [f"input_{i}" for i in range(len(inputs))]
    flat_want = tf.nest.flatten(to_numpy(want))
    specs = [
        tf.TensorSpec([1] + [None] * (np.ndim(x) - 1), np.asarray(x).dtype)
        for x in inputs
    ]

    def outputs(*args):
        return {f"output_{i}": y for i, y in enumerate(tf.nest.flatten(fn(*args)))}

    source = f"def f({', '.join(names)}):\n    return outputs({', '.join(names)})\n"
    scope = {"outputs": outputs}
    exec(source, scope)
    function = tf.function(
        scope["f"],
        input_signature=[
            tf.TensorSpec(s.shape, s.dtype, name=n)
            for s, n in zip(specs, names, strict=True)
        ],
    )
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "program.tflite")
        with open(path, "wb") as f:
            f.write(convert(function))
        program = Program(path, inputs=names)
        for b in range(np.shape(inputs[0])[0]):
            row = [np.asarray(x)[b : b + 1] for x in inputs]
            got = program(**dict(zip(names, row, strict=True)))
            for i, w in enumerate(flat_want):
                assert_close(got[f"output_{i}"], w[b : b + 1], atol, what="TFLite")


def check_mixed_precision(make, run, reference, want, atol):
    """Under each mixed policy, with the reference's weights: finite results
    near float32's, in the compute dtype or float32."""
    for name, tolerance in (("mixed_float16", 5e-2), ("mixed_bfloat16", 1e-1)):
        policy = keras.DTypePolicy(name)
        # As users do: the global policy, then the model.
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)
        try:
            new = make()
            run(new)  # builds it
        finally:
            keras.config.set_dtype_policy(previous)
        new.set_weights(reference.get_weights())
        got = tf.nest.flatten(to_numpy(run(new)))
        for g, w in zip(got, tf.nest.flatten(to_numpy(want)), strict=True):
            if not np.issubdtype(w.dtype, np.floating):
                continue
            assert g.dtype in (np.float32, np.dtype(policy.compute_dtype)), (
                f"{name}: output dtype {g.dtype}"
            )
            g = g.astype(np.float32)
            assert np.isfinite(g[np.isfinite(w)]).all(), f"{name}: not finite"
            scale = max(1.0, float(np.max(np.abs(w[np.isfinite(w)]), initial=0)))
            np.testing.assert_allclose(
                g, w, atol=max(atol, tolerance * scale), err_msg=name
            )


# ------------------------------------------------------------------ layers


def run_layer_test(
    make,
    inputs,
    *,
    call_kwargs=None,
    padding=None,
    xla=True,
    tflite=False,
    mixed_precision=True,
    saving=True,
    symbolic_shapes=None,
    atol=1e-5,
):
    """Every check for a layer.

    Args:
      make: `make()` -> a new layer.
      inputs: the call's positional inputs (numpy arrays).
      call_kwargs: keyword arguments of the call (e.g. training=False).
      padding: a `Padding`, for layers that take padded batches.
      xla, tflite, mixed_precision, saving: which checks apply.
      symbolic_shapes: the keras.Input shapes (default: the inputs' with
        unknown batch and time sizes).
    """
    call_kwargs = dict(call_kwargs or {})
    layer = make()

    def fn(*args):
        return layer(*args, **call_kwargs)

    want = to_numpy(fn(*inputs))
    revived = check_config(layer)
    if want is None:  # e.g. a cacher without a cache: nothing to compare
        return want
    revived_out = revived(*inputs, **call_kwargs)
    assert tf.nest.map_structure(np.shape, to_numpy(revived_out)) == (
        tf.nest.map_structure(np.shape, want)
    )
    shapes = symbolic_shapes or [unknown_batch_and_time(x) for x in inputs]
    symbolic = make()(
        *[keras.Input(batch_shape=shape, dtype=np.asarray(x).dtype)
          for shape, x in zip(shapes, inputs, strict=True)],
        **call_kwargs,
    )  # fmt: skip
    for s, w in zip(tf.nest.flatten(symbolic), tf.nest.flatten(want), strict=True):
        assert len(s.shape) == w.ndim, f"symbolic rank {s.shape} vs {w.shape}"
        if s.shape and s.shape[-1] is not None:
            assert s.shape[-1] == w.shape[-1], f"symbolic {s.shape} vs {w.shape}"
    if type(layer).compute_output_shape is not keras.layers.Layer.compute_output_shape:
        shapes = layer.compute_output_shape(*[np.shape(x) for x in inputs])
        assert _shape_matches(shapes, want), f"compute_output_shape {shapes}"
    check_graph_and_xla(fn, inputs, want, atol, xla)
    if padding is not None:
        check_padding(fn, inputs, padding, atol)
    if saving:
        wrapped = Harnessed(layer, call_kwargs)
        wrapped(list(inputs))
        check_saving(wrapped, list(inputs), want, atol)
    if tflite:
        check_tflite(fn, inputs, want, atol * 10)
    if mixed_precision:
        check_mixed_precision(
            make, lambda new: new(*inputs, **call_kwargs), layer, want, atol
        )
    return want


def _shape_matches(shapes, want):
    """compute_output_shape's result (tuples of dims) fits the outputs."""
    flat = tf.nest.flatten(want)
    if isinstance(shapes, dict):  # flattened as tf.nest does: sorted keys
        candidates = [shapes[key] for key in sorted(shapes)]
    elif isinstance(shapes, tuple) and shapes and isinstance(shapes[0], (tuple, list)):
        candidates = list(shapes)
    else:
        candidates = [shapes]
    if len(candidates) != len(flat):
        return False
    for shape, w in zip(candidates, flat, strict=True):
        if len(shape) != w.ndim:
            return False
        if any(d is not None and d != v for d, v in zip(shape, w.shape, strict=True)):
            return False
    return True


# ------------------------------------------------------------------ losses


def run_loss_test(make, inputs, *, call=None, padding=None, xla=True, atol=1e-5,
                  mixed_precision=True):  # fmt: skip
    """Every check for a loss.

    Args:
      make: `make(**kwargs)` -> a new loss (kwargs: reduction).
      inputs: arrays; by default (y_true, y_pred).
      call: `call(loss, *inputs)` -> the loss, for losses whose y_pred is a
        mapping (built from the arrays and the model's parts).
      padding: a `Padding` over the inputs; the outputs are the
        per-utterance losses (reduction "none").
    """
    call = call or (lambda loss, *args: loss(*args))
    loss = make(reduction="none")
    want = to_numpy(call(loss, *inputs))
    assert want.shape == (np.shape(inputs[0])[0],)
    revived = check_config(loss)
    assert_close(call(revived, *inputs), want, atol, what="from_config")
    # Reductions and sample weights agree with the per-utterance losses.
    weights = np.linspace(0.5, 1.5, want.shape[0]).astype(np.float32)
    summed = make(reduction="sum")
    summed = summed.__call__  # keyword sample_weight through `call`
    total = call(lambda *a: summed(*a, sample_weight=weights), *inputs)
    np.testing.assert_allclose(total, np.sum(want * weights), rtol=1e-5, atol=atol)
    mean = call(make(), *inputs)
    np.testing.assert_allclose(mean, np.mean(want), rtol=1e-5, atol=atol)
    check_graph_and_xla(lambda *a: call(loss, *a), inputs, want, atol, xla)
    if padding is not None:
        check_padding(lambda *a: call(loss, *a), inputs, padding, atol)
    if mixed_precision:
        for name in ("mixed_float16", "mixed_bfloat16"):
            dtype = keras.DTypePolicy(name).compute_dtype
            half = [
                np.asarray(x).astype(dtype)
                if np.issubdtype(np.asarray(x).dtype, np.floating) and i > 0
                else x
                for i, x in enumerate(inputs)
            ]
            got = to_numpy(call(loss, *half))
            assert np.isfinite(got).all(), name
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got, want, rtol=5e-2, atol=5e-2 * scale)
    return want


# ------------------------------------------------------------------ models


def check_train_loop(make, x, y, loss, optimizer, fitted, history, atol):
    """One step of `train_loop` on (x, y) = the model's `fit` step: the same
    loss and the same weights after it."""
    keras.utils.set_random_seed(0)
    model = make()
    model.compile(optimizer=optimizer, loss=loss())
    got = train_loop(
        model, lambda context, epoch: tf.data.Dataset.from_tensors((x, y)), 1, 1,
        log_every=0, verbose=0,
    )  # fmt: skip
    np.testing.assert_allclose(got["loss"], history.history["loss"], rtol=1e-5)
    for a, b in zip(model.weights, fitted.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=atol, err_msg=a.path)


def run_model_test(
    make,
    x,
    y,
    loss,
    *,
    predict=None,
    padding=None,
    xla=True,
    optimizer="adam",
    atol=1e-5,
    mixed_precision=True,
):
    """Every check for a model: config, a training step in a graph and under
    XLA, the same step through `train_loop` (the multi-worker path), padding,
    .keras save / load, mixed precision.

    Args:
      make: `make()` -> a new model.
      x: the model's input (a tuple of arrays), y: labels.
      loss: `loss()` -> the loss to compile with.
      predict: `predict(model, x)` -> what is compared (default model(x)).
      padding: a `Padding` over x's arrays, on predict's result.
    """
    predict = predict or (lambda model, inputs: model(inputs, training=False))
    keras.utils.set_random_seed(0)
    model = make()
    want = to_numpy(predict(model, x))
    check_config(model)
    # (Eager training runs the same code as the graph: one step in a graph
    # and one under XLA, the two ways Keras compiles a step.)
    for mode in ("graph", "xla") if xla else ("graph",):
        keras.utils.set_random_seed(0)
        trained = make()
        trained.compile(optimizer=optimizer, loss=loss(), jit_compile=mode == "xla")
        history = trained.fit(x, y, epochs=1, batch_size=len(y), verbose=0)
        assert np.isfinite(history.history["loss"]).all(), mode
        if mode == "graph":
            check_train_loop(make, x, y, loss, optimizer, trained, history, atol)
    if padding is not None:
        check_padding(lambda *args: predict(model, tuple(args)), list(x), padding, atol)
    model.compile(optimizer=optimizer, loss=loss())
    loaded = check_saving(model, x, want, atol, call=predict)
    assert type(loaded.loss) is type(model.loss) or loaded.loss is None
    if mixed_precision:
        check_mixed_precision(make, lambda new: predict(new, x), model, want, atol)
    return want
