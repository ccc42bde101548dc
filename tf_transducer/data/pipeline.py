# SPDX-License-Identifier: Apache-2.0
"""SpeechDataset: manifest -> shuffled, decoded, featurised, bucketed batches."""

import bisect
import math
import threading
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import TypeAlias

import numpy as np
import tensorflow as tf
from absl import logging

from tf_transducer.data.audio import BadAudioError
from tf_transducer.data.audio import decode_wav
from tf_transducer.data.audio import decoded_samples
from tf_transducer.data.audio import probe
from tf_transducer.data.audio import read_audio
from tf_transducer.data.audio import segment_of
from tf_transducer.data.manifest import Utterance
from tf_transducer.data.manifest import read_manifest
from tf_transducer.data.text import PAD_ID
from tf_transducer.data.text import TextEncoder

# (audio [n], seed [2] int64) -> augmented audio [m], e.g. a WaveAugment.
Augment: TypeAlias = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
# Bucket boundaries in seconds, "auto", or None (no buckets).
BucketBoundaries: TypeAlias = Sequence[float] | str | None


class SpeechDataset:
    """The utterances of a manifest, checked, as a `tf.data` pipeline.

    Every audio file is checked when the SpeechDataset is made (readable, not
    empty, not truncated, has samples; files of float samples are read to
    check that none is NaN or infinite) and every transcript encoded (not
    empty, every character known to the encoder). By default the first bad
    item raises ValueError naming the manifest line, the file and the
    problem. With `skip_bad=True` bad items are dropped and listed in
    `skipped`; files that pass the check but fail to decode later are dropped
    and counted too, and at the end of each pass over the data a log line
    (and an entry of `epoch_reports`) says how many items were dropped and
    why. Items longer than `max_duration` seconds or `max_label_length`
    labels are left out and counted in `filtered`.

    Args:
      manifest: a manifest path (see `read_manifest`) or a list of
        `Utterance`s.
      text_encoder: `CharacterAlphabet` or `SubwordEncoder` (ids 1..N).
      sample_rate: the model's rate; other files are resampled (in numpy).
      features: optional callable (audio [1, N], lengths [1]) ->
        (features [1, T, F], lengths [1]), e.g. a `LogMelSpectrogram` layer;
        without it the batches carry audio.
      max_duration: seconds, or None.
      max_label_length: labels, or None.
      skip_bad: drop bad items (counted) instead of raising.
      item_check: optional callable (labels, seconds) -> None for a usable
        item, or the reason it is not (a string): such items are bad items
        like the others (e.g. too short for their transcript under CTC).
    """

    def __init__(
        self,
        manifest: str | Iterable[Utterance],
        text_encoder: TextEncoder,
        sample_rate: int = 16000,
        features: Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]
        | None = None,
        max_duration: float | None = None,
        max_label_length: int | None = None,
        skip_bad: bool = False,
        item_check: Callable[[list[int], float], str | None] | None = None,
    ) -> None:
        _check_int("sample_rate", sample_rate, 1)
        _check_limit("max_duration", max_duration, (int, float))
        _check_limit("max_label_length", max_label_length, int)
        for name, function in (("features", features), ("item_check", item_check)):
            if function is not None and not callable(function):
                raise ValueError(f"{name} must be a callable or None, got {function!r}")
        feature_rate = getattr(features, "sample_rate", sample_rate)
        if feature_rate != sample_rate:
            raise ValueError(
                f"features expect audio at {feature_rate} Hz but sample_rate is "
                f"{sample_rate} Hz: give both the same rate (files at other rates "
                "are resampled to sample_rate)"
            )
        self.skipped: list[tuple[str, str]] = []  # (path, reason)
        if isinstance(manifest, str):
            self.name = manifest
            # With skip_bad a malformed row is skipped as a bad item is.
            utterances = read_manifest(manifest, self._bad_row if skip_bad else None)
        else:
            self.name = "utterances"
            utterances = _utterance_list(manifest)
        self.sample_rate = sample_rate
        self.features = features
        self.skip_bad = skip_bad
        self.filtered = 0
        self.epoch_reports: list[dict[str, Any]] = []
        self._late_skips: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._paths: list[str] = []
        self._labels: list[list[int]] = []
        self._transcripts: list[str] = []
        self._in_graph: list[bool] = []
        self._durations: list[float] = []
        self._segments: list[tuple[float, float]] = []
        self._samples: list[int] = []  # what decoding each item gives, at sample_rate
        for utterance in utterances:
            try:
                info, labels = self._check(utterance, text_encoder)
                offset, duration = segment_of(utterance, info)
                if info.float_samples:
                    # Float samples may be NaN or inf: read them once now
                    # (BadAudioError if so), not only when decoding.
                    read_audio(utterance.path, info.sample_rate, offset, duration)
                reason = item_check and item_check(labels, duration)
                if reason is not None and not isinstance(reason, str):
                    raise ValueError(
                        f"item_check must return None or a reason (a string), "
                        f"got {reason!r} for {utterance.path}"
                    )
                if reason:
                    raise BadAudioError(utterance.path, reason)
            except BadAudioError as error:
                self._bad(utterance, error.reason)
                continue
            if (max_duration is not None and duration > max_duration) or (
                max_label_length is not None and len(labels) > max_label_length
            ):
                self.filtered += 1
                continue
            self._paths.append(utterance.path)
            self._labels.append(labels)
            self._transcripts.append(utterance.transcript)
            self._in_graph.append(info.in_graph and info.sample_rate == sample_rate)
            self._durations.append(duration)
            whole = offset == 0 and utterance.duration is None
            self._segments.append((0.0, -1.0) if whole else (offset, duration))
            self._samples.append(decoded_samples(info, self._segments[-1], sample_rate))
        if self.skipped or self.filtered:
            logging.warning(
                "%s: %d items kept, %d bad ones skipped, %d over the length limits",
                self.name,
                len(self._paths),
                len(self.skipped),
                self.filtered,
            )
        if not self._paths:
            raise ValueError(f"{self.name}: no usable utterances")

    @staticmethod
    def _check(utterance, text_encoder):
        if not utterance.transcript.strip():
            raise BadAudioError(utterance.path, "empty transcript")
        try:
            labels = text_encoder.encode(utterance.transcript)
        except ValueError as error:
            raise BadAudioError(utterance.path, f"transcript: {error}") from None
        if not labels:
            raise BadAudioError(utterance.path, "transcript encodes to no labels")
        return probe(utterance.path), labels

    def _bad_row(self, where: str, problem: str) -> None:
        """A manifest row that names no item (skip_bad): warned of, counted."""
        logging.warning("%s: %s; skipped (skip_bad)", where, problem)
        self.skipped.append((where, problem))

    def _bad(self, utterance: Utterance, reason):
        if not self.skip_bad:
            where = f"{utterance.source}: " if utterance.source else ""
            raise ValueError(
                f"{where}{utterance.path}: {reason} (skip_bad=True drops such items)"
            )
        self.skipped.append((utterance.path, reason))

    def __len__(self) -> int:
        return len(self._paths)

    @property
    def durations(self) -> list[float]:
        """Seconds of audio of each kept utterance."""
        return list(self._durations)

    @property
    def paths(self) -> list[str]:
        """Audio file of each kept utterance."""
        return list(self._paths)

    @property
    def labels(self) -> list[list[int]]:
        """Label ids of each kept utterance."""
        return [list(labels) for labels in self._labels]

    @property
    def transcripts(self) -> list[str]:
        """Transcript of each kept utterance."""
        return list(self._transcripts)

    # -- the pipeline ---------------------------------------------------------

    def _read_numpy(self, index):
        path = self._paths[int(index)]
        offset, duration = self._segments[int(index)]
        try:
            return read_audio(
                path, self.sample_rate, offset, None if duration < 0 else duration
            )
        except BadAudioError as error:
            if not self.skip_bad:
                raise
            with self._lock:
                self._late_skips.append((path, error.reason))
            return np.zeros([0], np.float32)

    def _report_epoch(self):
        with self._lock:
            late, self._late_skips = self._late_skips, []
        report = {
            "skipped": len(self.skipped) + len(late),
            "filtered": self.filtered,
            "failed_to_decode": late,
        }
        self.epoch_reports.append(report)
        logging.warning(
            "%s: end of an epoch: %d items skipped as bad (%d when checked, %d "
            "failed to decode%s), %d over the length limits",
            self.name,
            report["skipped"],
            len(self.skipped),
            len(late),
            "".join(f"; {p}: {r}" for p, r in late[:5]),
            self.filtered,
        )
        return False

    def _load(self, index, paths, labels, in_graph, segments, augment=None, seed=None):
        """The element of index (-1: the end-of-epoch marker, empty)."""
        safe = tf.maximum(index, 0)

        def graph_decode():
            audio = decode_wav(tf.io.read_file(paths[safe]))
            start, count = tf.unstack(tf.cast(segments[safe], tf.int32))
            end = tf.where(count < 0, tf.shape(audio)[0], start + count)
            return audio[start:end]

        def numpy_decode():
            audio = tf.numpy_function(self._read_numpy, [safe], tf.float32)
            return tf.reshape(audio, [-1])

        if all(self._in_graph):
            decode = graph_decode
        elif not any(self._in_graph):
            decode = numpy_decode
        else:

            def decode():
                return tf.cond(in_graph[safe], graph_decode, numpy_decode)

        audio = tf.cond(index >= 0, decode, lambda: tf.zeros([0], tf.float32))
        if augment is not None:
            seeds = tf.stack([tf.cast(seed, tf.int64), index])
            audio = tf.reshape(augment(audio, seeds), [-1])
        length = tf.shape(audio)[0]
        label = labels[safe]
        element = {
            "index": index,
            "audio_length": length,
            "labels": label,
            "label_length": tf.shape(label)[0],
        }
        if self.features is None:
            element["audio"] = audio
        else:
            values, value_lengths = self.features(audio[tf.newaxis], length[tf.newaxis])
            values = tf.convert_to_tensor(values)[0]
            element["features"] = values[: value_lengths[0]]
            element["feature_length"] = tf.cast(value_lengths[0], tf.int32)
        return element

    def _keep(self, element):
        marker = element["index"] < 0
        report = tf.cond(
            marker,
            lambda: tf.py_function(self._report_epoch, [], tf.bool),
            lambda: tf.constant(True),
        )
        return tf.logical_and(
            tf.logical_not(marker), tf.logical_and(report, element["audio_length"] > 0)
        )

    def dataset(
        self, batch_size: int, shuffle: bool = True, seed: int | None = None,
        bucket_boundaries: BucketBoundaries = None, cache: str | None = None,
        drop_remainder: bool = False, num_parallel_calls: int = tf.data.AUTOTUNE,
        augment: Augment | None = None,
    ) -> tf.data.Dataset:  # fmt: skip
        """Padded batches of dicts.

        Each batch has "labels" [B, S] (padded with -1), "label_length" [B],
        "audio_length" [B] (samples), "index" [B] (into this dataset), and
        either "audio" [B, N] or "features" [B, T, F] + "feature_length" [B]
        (padding is 0).

        Args:
          batch_size: utterances per batch.
          shuffle: reshuffle every epoch (the whole dataset).
          seed: makes the order (and so every batch) the same on every run.
          bucket_boundaries: seconds; batches then hold utterances of one
            duration bucket (`bucket_by_sequence_length`), which cuts
            padding. "auto" picks the quartiles of the durations. None: plain
            padded batches.
          cache: a file path to cache decoded features in (the first epoch
            writes it, the next read it), or None.
          drop_remainder: drop a last, smaller batch.
          num_parallel_calls: parallel decode + features.
          augment: optional callable (audio [n], seed [2] int64) -> audio
            [m], e.g. a `tf_transducer.data.augment.WaveAugment`, applied to
            each decoded utterance before its features. Item i of the pass
            gets the seed [seed, i], so with a seed every run (and every
            resumed one) sees the same augmented audio. Batches stay in the
            buckets of the unaugmented lengths. Not with `cache`.
        """
        _check_batch_and_augment(batch_size, augment)
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
        ):
            raise ValueError(f"seed must be an int or None, got {seed!r}")
        if augment is not None and cache is not None:
            raise ValueError(
                "augment: a cache would freeze the first pass's augmented "
                "features; give one or the other"
            )
        bounds = self._bucket_bounds(bucket_boundaries)
        n = len(self._paths)
        indices = tf.data.Dataset.range(n)
        if shuffle and cache is None:
            indices = indices.shuffle(n, seed=seed, reshuffle_each_iteration=True)
        augment_seed = None
        if augment is not None:
            augment_seed = np.random.randint(2**31) if seed is None else int(seed)
        ds = self._pass(indices, augment, augment_seed, num_parallel_calls)
        if cache is not None:
            ds = ds.cache(cache)
            if shuffle:
                ds = ds.shuffle(n, seed=seed, reshuffle_each_iteration=True)
        ds = self._batch(ds, batch_size, bounds, drop_remainder)
        if not self.skip_bad:
            # Known ahead (decode failures raise), so Keras knows an epoch's
            # length instead of running into its end.
            batches = self.num_batches(batch_size, bucket_boundaries, drop_remainder)
            ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
        return self._finish(ds)

    def epochs(
        self, batch_size: int, seed: int, first_epoch: int, end_epoch: int,
        batches_per_epoch: int, bucket_boundaries: BucketBoundaries = None,
        augment: Augment | None = None, num_parallel_calls: int = tf.data.AUTOTUNE,
    ) -> tf.data.Dataset:  # fmt: skip
        """The batches of epochs first_epoch .. end_epoch - 1 as one pipeline.

        Like `dataset(batch_size, seed=..., bucket_boundaries=...,
        augment=...)` run once per epoch, but built (and its functions
        instantiated) once: a training loop keeps one iterator across the
        epochs instead of paying for a new pipeline at each (about a second
        with waveform augmentation). Epoch e is shuffled and augmented by
        the seeds (seed, e) alone, so a run resumed at epoch e sees the
        batches the interrupted one would have.

        Args:
          batch_size: utterances per batch.
          seed: int; with the epoch, the order and augmentation.
          first_epoch: the first epoch, an int >= 0.
          end_epoch: the epoch after the last, an int above first_epoch.
          batches_per_epoch: each epoch gives exactly this many batches (its
            first ones again if it holds fewer), so that epochs follow each
            other at fixed steps.
          bucket_boundaries: as in `dataset`.
          augment: as in `dataset`.
          num_parallel_calls: as in `dataset`.
        """
        _check_batch_and_augment(batch_size, augment)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        _check_int("first_epoch", first_epoch, 0)
        _check_int("end_epoch", end_epoch, 0)
        if end_epoch <= first_epoch:
            raise ValueError(
                f"end_epoch must be above first_epoch {first_epoch}, got {end_epoch}"
            )
        _check_int("batches_per_epoch", batches_per_epoch, 1)
        bounds = self._bucket_bounds(bucket_boundaries)
        n = len(self._paths)

        def one_epoch(epoch):
            epoch_seed = tf.stack([tf.constant(seed, tf.int64), epoch])
            order = tf.random.experimental.stateless_shuffle(
                tf.range(n, dtype=tf.int64), epoch_seed
            )
            # Its own augmentation stream per epoch (item i gets [s, i]).
            augment_seed = tf.constant(seed, tf.int64) * _EPOCH_STRIDE + epoch
            ds = self._pass(
                tf.data.Dataset.from_tensor_slices(order),
                augment,
                augment_seed,
                num_parallel_calls,
            )
            ds = self._batch(ds, batch_size, bounds, False)
            return ds.repeat().take(batches_per_epoch)

        epochs = tf.data.Dataset.range(first_epoch, end_epoch)
        return self._finish(epochs.flat_map(one_epoch))

    def _pass(self, indices, augment, augment_seed, num_parallel_calls):
        """Indices -> decoded (augmented) elements with features, bad ones dropped.

        With skip_bad or filters, a report comes at the end.
        """
        paths = tf.constant(self._paths)
        labels = tf.ragged.constant(self._labels, dtype=tf.int32, ragged_rank=1)
        in_graph = tf.constant(self._in_graph)
        rate = self.sample_rate
        segments = tf.constant(
            [
                [round(o * rate), -1 if d < 0 else round(d * rate)]
                for o, d in self._segments
            ],
            tf.int64,
        )
        report = self.skip_bad or self.filtered
        if report:
            indices = indices.concatenate(
                tf.data.Dataset.from_tensors(tf.constant(-1, tf.int64))
            )
        ds = indices.map(
            lambda i: self._load(
                i, paths, labels, in_graph, segments, augment, augment_seed
            ),
            num_parallel_calls=num_parallel_calls,
            deterministic=True,
        )
        return ds.filter(self._keep if report else lambda e: e["audio_length"] > 0)

    @staticmethod
    def _finish(ds):
        options = tf.data.Options()
        options.deterministic = True
        return ds.with_options(options).prefetch(tf.data.AUTOTUNE)

    def _bucket_bounds(self, bucket_boundaries):
        """Bucket boundaries in samples (None: no buckets)."""
        if bucket_boundaries is None:
            return None
        if isinstance(bucket_boundaries, str):
            if bucket_boundaries != "auto":
                raise ValueError(
                    'bucket_boundaries must be seconds or "auto", got '
                    f"{bucket_boundaries!r}"
                )
            bucket_boundaries = sorted(
                set(np.quantile(self._durations, [0.25, 0.5, 0.75]))
            )
        if not isinstance(bucket_boundaries, (list, tuple, np.ndarray)):
            raise ValueError(
                'bucket_boundaries must be a list of seconds, "auto" or None, got '
                f"{bucket_boundaries!r}"
            )
        seconds = list(bucket_boundaries)
        if not all(
            _is_number(b) and 0 < b < math.inf for b in seconds
        ) or seconds != sorted(set(seconds)):
            raise ValueError(
                f"bucket_boundaries must be increasing positive seconds, got {seconds}"
            )
        return [max(1, int(round(s * self.sample_rate))) for s in seconds]

    def num_batches(
        self,
        batch_size: int,
        bucket_boundaries: BucketBoundaries = None,
        drop_remainder: bool = False,
    ) -> int:
        """Batches in one epoch of `dataset(batch_size, ...)`.

        Counted as if no item fails to decode.
        """
        _check_int("batch_size", batch_size, 1)
        bounds = self._bucket_bounds(bucket_boundaries)
        counts = np.bincount(
            [bisect.bisect_right(bounds or [], n) for n in self._samples if n > 0],
            minlength=1,
        )
        if drop_remainder:
            return int(sum(c // batch_size for c in counts))
        return int(sum(-(-c // batch_size) for c in counts))

    def _batch(self, ds, batch_size, bounds, drop_remainder):
        padding = {
            key: tf.constant(0, spec.dtype) for key, spec in ds.element_spec.items()
        }
        padding["labels"] = tf.constant(PAD_ID, tf.int32)
        if bounds is None:
            return ds.padded_batch(
                batch_size, padding_values=padding, drop_remainder=drop_remainder
            )
        # By the decoded length, which augmentation does not change.
        samples = tf.constant(self._samples, tf.int32)
        return ds.bucket_by_sequence_length(
            lambda e: samples[e["index"]],
            bucket_boundaries=bounds,
            bucket_batch_sizes=[batch_size] * (len(bounds) + 1),
            padding_values=padding,
            drop_remainder=drop_remainder,
        )


def _check_int(name, value, least):
    """A ValueError naming `name` unless value is an int >= least."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        kind = "a positive int" if least == 1 else f"an int >= {least}"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


def _is_number(value):
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, bool
    )


def _check_limit(name, value, kinds):
    """A ValueError naming `name` unless value is None or a positive finite number."""
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not 0 < value < math.inf
    ):
        kind = "int" if kinds is int else "number"
        raise ValueError(f"{name} must be a positive {kind} or None, got {value!r}")


def _utterance_list(manifest):
    """The Utterances of a manifest given as an iterable; ValueError otherwise."""
    try:
        utterances = list(manifest)
    except TypeError:
        raise ValueError(
            "manifest must be a manifest path or a list of Utterances, got "
            f"{manifest!r}"
        ) from None
    for index, utterance in enumerate(utterances):
        if not isinstance(utterance, Utterance):
            raise ValueError(
                f"manifest must be a manifest path or a list of Utterances; item "
                f"{index} is {utterance!r}"
            )
    return utterances


def _check_batch_and_augment(batch_size, augment):
    _check_int("batch_size", batch_size, 1)
    if augment is not None and not callable(augment):
        raise ValueError(f"augment must be a callable, got {augment!r}")


# Epoch e of `epochs` augments with the seed seed * _EPOCH_STRIDE + e.
_EPOCH_STRIDE = 100_003
