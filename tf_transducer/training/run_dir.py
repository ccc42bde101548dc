# SPDX-License-Identifier: Apache-2.0
"""A training run's folder: its configuration, progress, and what a re-run does.

`run.json` holds the configuration a run was started with and how far it
got. Starting training again in the same folder:

- with the same configuration, an interrupted run resumes (the
  checkpoints of `train_loop` in `backup/` hold its last step) and a
  finished one is left as it is;
- with another configuration it is refused, naming what differs, unless
  `overwrite` is set, which removes what an earlier run wrote first;
- a folder that holds a model but no `run.json` is refused the same way.

Writes are atomic (a temporary file renamed into place).
"""

import json
import os
import shutil
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf
from absl import logging

RUN_FILE = "run.json"
BACKUP_DIR = "backup"


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _normalise(config: Any) -> Any:
    """As it reads back from JSON (tuples become lists, ...)."""
    return json.loads(json.dumps(config))


def config_differences(
    saved: Mapping[str, Any], wanted: Mapping[str, Any]
) -> list[str]:
    """["key: saved value -> wanted value", ...] between two configurations."""
    a, b = _flatten(saved), _flatten(_normalise(wanted))
    return [
        f"{key}: {a.get(key, '(unset)')!r} -> {b.get(key, '(unset)')!r}"
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key)
    ]


class RunDirectory:
    """The folder of one training run.

    Args:
      path: the folder (created when missing).
      config: the run's configuration, a JSON-able dict; compared with the
        saved one when the folder already holds a run.
      owned: the names this kind of run writes into the folder (removed by
        `overwrite`), besides run.json and the backup folder.
      overwrite: replace an earlier run whatever its configuration.
      read_only: check the folder but write nothing (the workers of a
        multi-worker run other than the chief).
      upgrade: optional, a saved configuration -> the same in today's
        layout (a run.json of an older release), compared then; it raises
        ValueError for one it cannot read. The folder's run.json is written
        in today's layout as the run goes on.

    Raises:
      ValueError: the folder holds a run of another configuration (each
        difference named, saved value -> this one), or a model without
        run.json, and overwrite is False.
    """

    def __init__(
        self, path: str, config: Mapping[str, Any], owned: Iterable[str] = (),
        overwrite: bool = False, read_only: bool = False,
        upgrade: Callable[[Any], Mapping[str, Any]] | None = None,
    ) -> None:  # fmt: skip
        self.path = path
        self.config = _normalise(config)
        self.owned = tuple(owned)
        self.read_only = read_only
        if not read_only:
            os.makedirs(path, exist_ok=True)
        saved = self._read()
        if overwrite:
            if not read_only:
                self._remove_earlier_run()
            saved = None
        elif saved is None:
            earlier = [name for name in self.owned if self._exists(name)]
            if earlier:
                raise ValueError(
                    f"{path} already holds {', '.join(earlier)} from a run without "
                    f"{RUN_FILE}; use --overwrite to replace it, or another folder"
                )
        elif self._saved_config(saved, upgrade) != self.config:
            differences = config_differences(
                self._saved_config(saved, upgrade), self.config
            )
            raise ValueError(
                f"{path} holds a run with another configuration ("
                + "; ".join(differences[:8])
                + (f"; {len(differences) - 8} more" if len(differences) > 8 else "")
                + "); use --overwrite to replace it, or another folder"
            )
        self.state: dict[str, Any] = (
            dict(saved["state"]) if saved else {"epochs_done": 0}
        )
        if saved is None:
            self.save_state()

    # -- the saved file -------------------------------------------------------

    def _saved_config(self, saved, upgrade):
        """The saved configuration, in today's layout where `upgrade` can read it."""
        if upgrade is None:
            return saved["config"]
        try:
            return _normalise(upgrade(saved["config"]))
        except ValueError as error:
            raise ValueError(
                f"{self.file(RUN_FILE)}: {error}; use --overwrite to replace the "
                "run, or another folder"
            ) from None

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _exists(self, name):
        return os.path.exists(self.file(name))

    def _read(self):
        path = self.file(RUN_FILE)
        if not os.path.isfile(path):
            return None
        try:
            with open(path) as f:
                saved = json.load(f)
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: unreadable run file ({error})") from None
        if not isinstance(saved, dict) or not {"config", "state"} <= set(saved):
            raise ValueError(f"{path}: not a run file (needs config and state)")
        return saved

    def save_state(self, **updates: Any) -> None:
        """Records progress (epochs_done, best, finished, stopped, ...)."""
        self.state.update(updates)
        if self.read_only:
            return
        path = self.file(RUN_FILE)
        with open(path + ".tmp", "w") as f:
            json.dump({"config": self.config, "state": self.state}, f, indent=2)
        os.replace(path + ".tmp", path)

    def _remove_earlier_run(self):
        for name in (*self.owned, RUN_FILE, BACKUP_DIR):
            path = self.file(name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)

    # -- what a (re-)run does --------------------------------------------------

    @property
    def finished(self) -> bool:
        return bool(self.state.get("finished"))

    def resume_epoch(self) -> int:
        """The epoch an interrupted run continues from (0: from the start)."""
        if tf.train.latest_checkpoint(self.file(BACKUP_DIR)) is None:
            return 0
        return int(self.state.get("epochs_done", 0))

    def announce(self, epochs: int) -> str:
        """Logs and returns what this start does: "start", "resume" or "done"."""
        if self.finished:
            message = (
                f"{self.path}: training finished earlier ("
                f"{self.state.get('stopped', 'all epochs')}); nothing to do "
                "(--overwrite trains again)"
            )
            action = "done"
        else:
            epoch = self.resume_epoch()
            if epoch:
                message = f"{self.path}: resuming at epoch {epoch + 1} of {epochs}"
                action = "resume"
            else:
                message = f"{self.path}: training from epoch 1 of {epochs}"
                action = "start"
        logging.info("%s", message)
        if not self.read_only:
            print(message, flush=True)
        return action

    def trim_history(self, name: str, epochs_done: int) -> None:
        """Drops rows of a CSV history past epochs_done.

        Those are an interrupted epoch's row, or rows of epochs the backup does
        not hold.
        """
        if self.read_only:
            return
        path = self.file(name)
        if not os.path.isfile(path):
            return
        with open(path) as f:
            rows = f.read().splitlines()
        if not rows:
            return
        kept = rows[:1] + [r for r in rows[1:] if int(r.split(",", 1)[0]) < epochs_done]
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(kept) + "\n")
        os.replace(path + ".tmp", path)


class RunStateCallback(keras.callbacks.Callback):
    """Keeps run.json's progress current and says why training stopped.

    Args:
      run_dir: the RunDirectory.
      monitor: the logged value whose best the run keeps (e.g. "val_loss").
      early_stopping: the EarlyStopping callback, if any (to say that it
        stopped the run).
    """

    def __init__(
        self,
        run_dir: RunDirectory,
        monitor: str,
        early_stopping: keras.callbacks.EarlyStopping | None = None,
    ) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.monitor = monitor
        self.early_stopping = early_stopping
        self.epochs: int | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.epochs = self.params.get("epochs")

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        value = (logs or {}).get(self.monitor)
        best = self.run_dir.state.get("best")
        updates: dict[str, Any] = {"epochs_done": epoch + 1}
        if value is not None and (best is None or float(value) < best):
            updates.update(best=float(value), best_epoch=epoch + 1)
        self.run_dir.save_state(**updates)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        state = self.run_dir.state
        stopper = self.early_stopping
        if stopper is not None and stopper.stopped_epoch > 0:
            why = (
                f"early stopping after epoch {stopper.stopped_epoch + 1}: "
                f"{stopper.monitor} did not improve by {abs(stopper.min_delta)} "
                f"for {stopper.patience} epochs"
            )
        elif self.epochs is not None and state.get("epochs_done", 0) >= self.epochs:
            why = f"all {self.epochs} epochs"
        else:
            return  # interrupted: resumes later
        if "best" in state:
            why += (
                f"; best {self.monitor} {state['best']:.4f} at epoch "
                f"{state['best_epoch']}"
            )
        self.run_dir.save_state(finished=True, stopped=why)
        logging.info("training stopped: %s", why)
        print(f"training stopped: {why}", flush=True)
