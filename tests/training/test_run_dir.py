# SPDX-License-Identifier: Apache-2.0
"""RunDirectory: what training again in a run's folder does."""

import json

import pytest
import tensorflow as tf

from tf_transducer.training import RunDirectory

CONFIG = {"model": {"units": 16, "layers": [1, 2]}, "training": {"epochs": 3}}


def test_new_run_writes_its_config_and_starts(tmp_path, capsys):
    run = RunDirectory(str(tmp_path / "r"), CONFIG, owned=("best.keras",))
    saved = json.loads((tmp_path / "r" / "run.json").read_text())
    assert saved == {"config": CONFIG, "state": {"epochs_done": 0}}
    assert run.announce(3) == "start"
    assert "training from epoch 1 of 3" in capsys.readouterr().out


def test_same_config_resumes_or_is_done(tmp_path, capsys):
    folder = tmp_path / "r"
    run = RunDirectory(str(folder), CONFIG)
    assert run.resume_epoch() == 0  # no checkpoint yet
    # train_loop's checkpoint of a step in epoch 3.
    tf.train.Checkpoint(step=tf.Variable(5)).save(str(folder / "backup" / "ckpt"))
    run.save_state(epochs_done=2, best=1.5, best_epoch=2)
    again = RunDirectory(str(folder), json.loads(json.dumps(CONFIG)))
    assert again.state["best"] == 1.5 and again.resume_epoch() == 2
    assert again.announce(3) == "resume"
    assert "resuming at epoch 3 of 3" in capsys.readouterr().out
    again.save_state(finished=True, stopped="all 3 epochs")
    assert RunDirectory(str(folder), CONFIG).announce(3) == "done"
    assert "training finished earlier (all 3 epochs)" in capsys.readouterr().out


def test_another_config_is_refused_naming_each_difference(tmp_path):
    folder = tmp_path / "r"
    RunDirectory(str(folder), CONFIG)
    other = {"model": {"units": 8, "layers": [1, 2]}, "training": {"epochs": 3}}
    with pytest.raises(ValueError, match=r"model.units: 16 -> 8\); use --overwrite"):
        RunDirectory(str(folder), other)
    # A model written without run.json is refused too.
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "best.keras").write_text("x")
    with pytest.raises(ValueError, match="already holds best.keras from a run without"):
        RunDirectory(str(bare), CONFIG, owned=("best.keras",))


def test_overwrite_removes_only_what_runs_write(tmp_path):
    folder = tmp_path / "r"
    RunDirectory(str(folder), CONFIG, owned=("best.keras", "summaries"))
    (folder / "best.keras").write_text("x")
    (folder / "summaries").mkdir()
    (folder / "notes.txt").write_text("the user's")
    run = RunDirectory(
        str(folder), {"other": 1}, owned=("best.keras", "summaries"), overwrite=True
    )
    assert run.state == {"epochs_done": 0}
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "run.json"]


def test_history_of_epochs_the_backup_lacks_is_dropped(tmp_path):
    run = RunDirectory(str(tmp_path), CONFIG)
    (tmp_path / "history.csv").write_text("epoch,loss\n0,3.0\n1,2.0\n2,1.5\n")
    run.trim_history("history.csv", 2)
    assert (tmp_path / "history.csv").read_text() == "epoch,loss\n0,3.0\n1,2.0\n"


def test_unreadable_run_file_is_named(tmp_path):
    (tmp_path / "run.json").write_text("{oops")
    with pytest.raises(ValueError, match="run.json: unreadable run file"):
        RunDirectory(str(tmp_path), CONFIG)


def test_read_only_checks_but_writes_nothing(tmp_path, capsys):
    # The workers of a cluster other than the chief.
    folder = tmp_path / "r"
    RunDirectory(str(folder / "new"), CONFIG, read_only=True).save_state(best=1.0)
    assert not folder.exists()
    RunDirectory(str(folder), CONFIG, owned=("best.keras",))
    (folder / "best.keras").write_text("x")
    other = {"model": {"units": 8, "layers": [1, 2]}, "training": {"epochs": 3}}
    with pytest.raises(ValueError, match="model.units: 16 -> 8"):
        RunDirectory(str(folder), other, read_only=True)
    run = RunDirectory(str(folder), other, ("best.keras",), overwrite=True,
                       read_only=True)  # fmt: skip
    assert run.announce(3) == "start" and capsys.readouterr().out == ""
    run.trim_history("history.csv", 0)
    assert sorted(p.name for p in folder.iterdir()) == ["best.keras", "run.json"]
    assert json.loads((folder / "run.json").read_text())["config"] == CONFIG
