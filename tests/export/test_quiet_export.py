# SPDX-License-Identifier: Apache-2.0
"""Exporting and running TFLite programs leave TensorFlow's chatter out.

The savers, the fingerprint writer, the converter (its C++ INFO and WARNING
lines), the int8 calibrator and LiteRT's interpreter all print to stderr;
the export path keeps their informational lines out, and keeps (or, when
the block fails, writes back) everything else.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from tf_transducer.export._quiet import quiet_tensorflow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# An int8 export of a tiny untrained transducer (float conversions, the
# calibration run through LiteRT, the int8 conversions), then a stream over
# it; under absl's app.run, as the command lines and `make demo` run, where
# absl logs INFO lines, and without TF_CPP_MIN_LOG_LEVEL (a user's script).
CHILD = textwrap.dedent("""
    import os, sys, tempfile
    import numpy as np
    from absl import app
    import tf_transducer as tt
    from tf_transducer.export import TransducerStream, export_transducer

    def main(argv):
        alphabet = tt.CharacterAlphabet.english()
        model = tt.models.Transducer.from_preset(
            "lstm-1m", alphabet.vocab_size, encoder=dict(units=8),
            predictor=dict(kind="lstm", units=8, embedding_dim=4),
            joiner=dict(units=8), feature_dim=20,
        )
        model.build()
        folder = os.path.join(tempfile.mkdtemp(), "e")
        features = tt.LogMelSpectrogram(sample_rate=8000, n_mels=20)
        audio = np.random.default_rng(0).uniform(-0.5, 0.5, 4000)
        audio = audio.astype(np.float32)
        print("START", file=sys.stderr, flush=True)
        sizes = export_transducer(model, folder, alphabet, features,
                                  quantization="int8", calibration_audio=[audio])
        TransducerStream(folder).transcribe(audio)
        print("END", file=sys.stderr, flush=True)
        print(sorted(sizes))

    app.run(main)
""")

# What TensorFlow and LiteRT print while exporting: glog-style INFO lines
# ("I1204 06:36:16.837189 140521827494784 functional_saver.py:440] ..."),
# the converter's warnings about its own options, TF's Python INFO lines,
# LiteRT's and the calibrator's.
CHATTER = re.compile(
    r"^I\d{4} |Sharding callback|fingerprint|Reading SavedModel|"
    r"Ignored output_format|INFO|fully_quantize"
)


def test_export_prints_no_informational_lines(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = ROOT
    script = tmp_path / "export.py"
    script.write_text(CHILD)
    result = subprocess.run([sys.executable, str(script)], capture_output=True,
                            text=True, cwd=ROOT, env=env, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "encoder.tflite" in result.stdout
    lines = result.stderr.splitlines()
    assert "START" in lines and "END" in lines, result.stderr[-3000:]
    during = lines[lines.index("START") + 1 : lines.index("END")]
    chatter = [line for line in during if CHATTER.search(line)]
    assert not chatter, "\n".join(chatter[:20])


NOISE = (
    b"I0000 00:00:1796366157.109073    3042 reader.cc:83] Reading SavedModel\n"
    b"W0000 00:00:1796366157.108600    3042 helpers.cc:364] Ignored output_format.\n"
    b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
    b"fully_quantize: 0, inference_type: 6\n"
)
KEPT = (
    b"E0000 00:00:1796366157.108600    3042 model.cc:1] a real error\n"
    b"W1204 06:36:16.837189 140521827494784 save.py:44] a Python warning\n"
    b"something else\n"
)


def test_quiet_block_keeps_what_is_not_chatter(capfd):
    with quiet_tensorflow():
        os.write(2, NOISE + KEPT)
    assert capfd.readouterr().err == KEPT.decode()


def test_failing_block_writes_everything_back(capfd):
    with pytest.raises(RuntimeError, match="conversion failed"):
        with quiet_tensorflow():
            os.write(2, NOISE + KEPT)
            raise RuntimeError("conversion failed")
    assert capfd.readouterr().err == (NOISE + KEPT).decode()


def test_nested_blocks_write_back_once(capfd):
    with quiet_tensorflow():
        os.write(2, b"outer\n")
        with quiet_tensorflow():
            os.write(2, NOISE + b"inner\n")
        os.write(2, b"after\n")
    assert capfd.readouterr().err == "outer\ninner\nafter\n"
