# SPDX-License-Identifier: Apache-2.0
"""train_loop in this process: mixed precision policies, checkpoints of
another model refused, arguments and distributions checked."""

import logging
import re
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.losses import RnntLoss
from tf_transducer.models import Transducer
from tf_transducer.training import loss_sums
from tf_transducer.training import model_description
from tf_transducer.training import strategy_from_environment
from tf_transducer.training import train_loop

rng = np.random.default_rng(1)
X = rng.normal(size=(8, 12, 6)).astype(np.float32)
N = np.array([12, 9, 12, 6, 10, 12, 7, 11], np.int32)
Y = np.array([[1, 2, 3], [4, 5, -1], [6, -1, -1], [2, 2, -1]] * 2, np.int32)


def _dataset_fn(context, epoch):
    data = tf.data.Dataset.from_tensor_slices(((X, N), Y))
    return data.shuffle(8, seed=epoch).batch(4)


def _transducer(vocab_size=7, lr=0.05, augment=None):
    keras.utils.set_random_seed(0)
    model = Transducer(
        vocab_size,
        TransducerEncoder(units=8),
        PredictionNetwork(vocab_size, embedding_dim=4, units=8),
        TransducerJoiner(vocab_size, units=8),
        feature_dim=6,
        augment=augment,
    )
    model.build()
    model.compile(optimizer=keras.optimizers.Adam(lr), loss=RnntLoss())
    return model


def _validation(model, worker, workers):
    return loss_sums(model, tf.data.Dataset.from_tensor_slices(((X, N), Y)).batch(3))


@pytest.fixture
def policy(request):
    keras.mixed_precision.set_global_policy(request.param)
    yield request.param
    keras.mixed_precision.set_global_policy("float32")


def _train(epochs=3):
    """(model, loss before training, history)."""
    model = _transducer()
    total, count = _validation(model, 0, 1)["loss"]
    history = train_loop(model, _dataset_fn, epochs=epochs, steps_per_epoch=2,
                         validation=_validation, log_every=0)  # fmt: skip
    return model, total / count, history


@pytest.fixture(scope="module")
def float32_run():
    return _train()


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"], indirect=True)
def test_mixed_precision_trains_close_to_float32(policy, float32_run):
    model, initial, history = _train()
    if policy == "mixed_float16":  # Keras' compile adds the loss scaling
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.compute_dtype == policy.split("_")[1]
    assert all(w.dtype == "float32" for w in model.trainable_weights)
    assert np.all(np.isfinite(history["loss"] + history["val_loss"]))
    # The same weights: the loss (in float32 on 16-bit logits) is within
    # the network's 16-bit rounding of float32's.
    tolerance = 2e-3 if policy == "mixed_float16" else 2e-2
    np.testing.assert_allclose(initial, float32_run[1], rtol=tolerance)
    # It learns (float16 may skip a first step whose scaled gradients overflow).
    assert history["val_loss"][-1] < initial
    assert history["loss"][-1] < history["loss"][0]


def test_checkpoint_of_another_model_is_refused(tmp_path):
    train_loop(_transducer(), _dataset_fn, epochs=1, steps_per_epoch=1,
               checkpoint_dir=str(tmp_path), log_every=0)  # fmt: skip
    other = _transducer(vocab_size=9)
    with pytest.raises(ValueError, match="another model") as error:
        train_loop(other, _dataset_fn, epochs=1, steps_per_epoch=1,
                   checkpoint_dir=str(tmp_path), log_every=0)  # fmt: skip
    message = str(error.value)
    assert "config.vocab_size: 7 -> 9" in message
    assert '"vocab_size": 7' in message and '"vocab_size": 9' in message
    assert model_description(other)["config"]["vocab_size"] == 9


def test_resumed_run_draws_what_the_uninterrupted_run_draws(tmp_path):
    # SpecAugment's seed generator, Adam's moments and the step are in the
    # checkpoint: two runs of one epoch each = one run of two epochs.
    augment = dict(freq_mask_max_bins=2, time_mask_max_frames=3)
    whole = _transducer(augment=augment)
    want = train_loop(whole, _dataset_fn, epochs=2, steps_per_epoch=2, log_every=0)
    first = _transducer(augment=augment)
    train_loop(first, _dataset_fn, epochs=1, steps_per_epoch=2,
               checkpoint_dir=str(tmp_path), log_every=0)  # fmt: skip
    second = _transducer(augment=augment)
    got = train_loop(second, _dataset_fn, epochs=2, steps_per_epoch=2,
                     checkpoint_dir=str(tmp_path), log_every=0)  # fmt: skip
    assert got["loss"] == want["loss"][1:]
    for a, b in zip(whole.weights, second.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def _spanning_dataset_fn(calls, epochs):
    """The batches of `_dataset_fn`'s epochs from `epoch` to the next
    restart (epoch 2) as one pipeline."""

    def dataset_fn(context, epoch):
        calls.append(epoch)
        end = 2 if epoch < 2 else epochs
        spans = [_dataset_fn(context, e) for e in range(epoch, end)]
        data = spans[0]
        for span in spans[1:]:
            data = data.concatenate(span)
        return data

    return dataset_fn


def test_one_pipeline_spans_epochs_up_to_each_restart(tmp_path):
    want = train_loop(_transducer(), _dataset_fn, epochs=4, steps_per_epoch=2,
                      log_every=0)  # fmt: skip
    calls = []
    got = train_loop(_transducer(), _spanning_dataset_fn(calls, 4), epochs=4,
                     steps_per_epoch=2, log_every=0, new_pipeline_at={2})  # fmt: skip
    assert calls == [0, 2]
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    # Resumed at epoch 2 (after a restart) and at epoch 1 (within a span).
    for done in (2, 1):
        calls = []
        folder = str(tmp_path / str(done))
        train_loop(_transducer(), _dataset_fn, epochs=done, steps_per_epoch=2,
                   checkpoint_dir=folder, log_every=0)  # fmt: skip
        rest = train_loop(_transducer(), _spanning_dataset_fn(calls, 4), epochs=4,
                          steps_per_epoch=2, checkpoint_dir=folder, log_every=0,
                          new_pipeline_at={2})  # fmt: skip
        assert calls == sorted({done, 2})
        np.testing.assert_allclose(rest["loss"], want["loss"][done:], rtol=1e-5)


def test_finished_checkpoint_is_resumed_not_retrained(tmp_path):
    model = _transducer()
    train_loop(model, _dataset_fn, epochs=1, steps_per_epoch=2,
               checkpoint_dir=str(tmp_path), log_every=0)  # fmt: skip
    again = _transducer()
    history = train_loop(again, _dataset_fn, epochs=1, steps_per_epoch=2,
                         checkpoint_dir=str(tmp_path), log_every=0)  # fmt: skip
    assert history == {}  # nothing left to train
    for a, b in zip(model.weights, again.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(epochs=0), "epochs must be a positive int"),
        (dict(steps_per_epoch=1.5), "steps_per_epoch must be a positive int"),
        (dict(save_every=-1), "save_every must be an int >= 0"),
        (dict(verbose=3), 'verbose must be "auto", 0, 1 or 2, got 3'),
        (dict(verbose=True), 'verbose must be "auto", 0, 1 or 2, got True'),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    args = dict(epochs=1, steps_per_epoch=1) | kwargs
    with pytest.raises(ValueError, match=message):
        train_loop(_transducer(), _dataset_fn, **args)


def test_uncompiled_model_is_refused():
    with pytest.raises(ValueError, match="model: compile it"):
        train_loop(
            Transducer(
                7,
                TransducerEncoder(),
                PredictionNetwork(7),
                TransducerJoiner(7),
                feature_dim=6,
            ),
            _dataset_fn,
            1,
            1,
        )


def test_distribution_choices(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="distribution must be one of"):
        strategy_from_environment("ring")
    with pytest.raises(ValueError, match="needs TF_CONFIG"):
        strategy_from_environment("multi_worker")
    assert strategy_from_environment("none") is tf.distribute.get_strategy()
    assert strategy_from_environment("auto") is tf.distribute.get_strategy()


BAR = re.compile(r"\x1b\[1m(\d+)/(\d+)\x1b\[0m")  # Progbar's "steps done/total"


def _printed(capsys, monkeypatch, terminal, **kwargs):
    """What the chief prints training 2 epochs of 3 steps (validated)."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    capsys.readouterr()
    train_loop(_transducer(), lambda c, e: _dataset_fn(c, e).repeat(), epochs=2,
               steps_per_epoch=3, validation=_validation, log_every=1,
               **kwargs)  # fmt: skip
    return capsys.readouterr().out


@pytest.mark.parametrize("verbose", ["auto", 1])
def test_progress_bar_on_a_terminal(capsys, monkeypatch, verbose):
    out = _printed(capsys, monkeypatch, True, verbose=verbose)
    # Each epoch: a header, a bar redrawn in place ending at 3/3 with the
    # running loss, then the epoch's line (with the validation loss).
    lines = out.split("\n")
    assert [line for line in lines if line.startswith("epoch ") and " (" not in line] \
        == ["epoch 1/2", "epoch 2/2"]  # fmt: skip
    bars = [line.split("\r")[-1] for line in lines if BAR.search(line)]
    assert len(bars) == 2
    for bar in bars:
        assert BAR.findall(bar) == [("3", "3")]
        assert re.search(r" - loss: \d+\.\d{4}", bar)
    counts = {(int(done), int(total)) for done, total in BAR.findall(out)}
    assert counts <= {(1, 3), (2, 3), (3, 3)} and (3, 3) in counts
    assert len(re.findall(r"^epoch \d/2 \(.*val_loss", out, re.M)) == 2
    assert "step 1/3" not in out  # the bar replaces the step lines


@pytest.mark.parametrize("terminal,verbose", [(False, "auto"), (False, 1),
                                              (True, 2), (False, 2)])  # fmt: skip
def test_lines_without_a_terminal_or_with_verbose_2(
    capsys, monkeypatch, terminal, verbose
):
    out = _printed(capsys, monkeypatch, terminal, verbose=verbose)
    assert not BAR.search(out) and "\x1b" not in out and "\r" not in out
    steps = re.findall(r"^epoch (\d) step (\d)/3: loss \d+\.\d{4}$", out, re.M)
    assert steps == [(e, s) for e in "12" for s in "123"]
    epochs = re.findall(r"^epoch (\d)/2 \([\d.]+ s\): loss: \S+ - val_loss: \S+$",
                        out, re.M)  # fmt: skip
    assert epochs == ["1", "2"]


def test_verbose_0_prints_nothing(capsys, monkeypatch):
    assert _printed(capsys, monkeypatch, True, verbose=0) == ""


def test_checkpoints_log_no_saver_info(tmp_path, caplog):
    # The saver's "Sharding callback duration" INFO lines go through absl's
    # logger, which absl's app.run sets to INFO (set here on that logger
    # itself: the root's level alone leaves it to what earlier tests did).
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="absl")
    train_loop(_transducer(), _dataset_fn, epochs=1, steps_per_epoch=2,
               checkpoint_dir=str(tmp_path), save_every=1, log_every=1,
               verbose=0)  # fmt: skip
    messages = [record.getMessage() for record in caplog.records]
    assert any("step 2/2" in m for m in messages)  # verbose=0: absl's log
    assert not [m for m in messages if "Sharding callback" in m], messages
