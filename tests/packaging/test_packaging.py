# SPDX-License-Identifier: Apache-2.0
"""What the package promises its installers: optional dependencies that name
their extra, corpora read from a checkout, one version, console scripts.

(The built source archive and wheel themselves are checked by
.ci/package_test, in clean venvs.)
"""

import importlib
import os
import sys
from importlib import metadata

import pytest
import tomllib

import tf_transducer as tt
from tf_transducer import _optional
from tf_transducer.data import corpora

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPROJECT = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))


def _extra_packages(extra):
    names = set()
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        if requirement.startswith("tf_transducer["):
            for sub in requirement[len("tf_transducer[") : -1].split(","):
                names |= _extra_packages(sub)
        else:
            names.add(requirement.split("[")[0].split("=")[0].split(">")[0])
    return names


@pytest.mark.parametrize("module", sorted(_optional.OPTIONAL))
def test_each_optional_dependency_is_in_the_extra_it_names(module):
    distribution, extra, _ = _optional.OPTIONAL[module]
    assert distribution in _extra_packages(extra)
    assert distribution in _extra_packages("all")


@pytest.mark.parametrize("module", sorted(_optional.OPTIONAL))
def test_a_missing_dependency_names_its_extra(module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    extra = _optional.OPTIONAL[module][1]
    with pytest.raises(ImportError, match=rf"tf_transducer\[{extra}\]"):
        _optional.require(module)
    assert not _optional.available(module)


def test_require_refuses_an_unknown_module():
    with pytest.raises(ValueError, match="module must be one of"):
        _optional.require("numpy")


def test_features_without_their_extra_say_which_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "soundfile", None)
    with pytest.raises(ImportError, match=r"tf_transducer\[data\]"):
        tt.data.read_audio(str(tmp_path / "speech.flac"), 16000)
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(ImportError, match=r"tf_transducer\[data\]"):
        tt.SubwordEncoder.train(["one two"], vocab_size=8)
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    from tf_transducer.export._runner import Program

    with pytest.raises(ImportError, match=r"tf_transducer\[export\]"):
        Program(str(tmp_path / "model.tflite"))


def test_core_dependencies_are_only_tensorflow_numpy_absl():
    requires = [r for r in metadata.requires("tf_transducer") if "extra ==" not in r]
    names = sorted(r.split("=")[0].split(">")[0].split("<")[0] for r in requires)
    assert names == ["absl-py", "numpy", "tensorflow"]


def test_version_comes_from_the_installed_metadata():
    assert tt.__version__ == metadata.version("tf_transducer")
    assert tt.__version__ == PYPROJECT["project"]["version"]


@pytest.mark.parametrize("script", sorted(PYPROJECT["project"]["scripts"]))
def test_console_scripts_point_at_functions(script):
    module, function = PYPROJECT["project"]["scripts"][script].split(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_corpora_come_from_the_checkout_or_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(corpora.ENV_VAR, raising=False)
    train = corpora.manifest("digits_train")
    assert os.path.isfile(train)
    assert os.path.isdir(corpora.path("librivox"))
    monkeypatch.setenv(corpora.ENV_VAR, os.path.dirname(os.path.dirname(train)))
    assert corpora.manifest("digits_train") == train
    monkeypatch.setenv(corpora.ENV_VAR, str(tmp_path))  # e.g. a wheel install
    with pytest.raises(FileNotFoundError, match=corpora.ENV_VAR):
        corpora.manifest("digits_train")
    with pytest.raises(ValueError, match="name must be one of"):
        corpora.path("timit")
    with pytest.raises(ValueError, match="no bundled manifest"):
        corpora.manifest("timit")


def test_every_source_file_carries_its_licence():
    sources = []
    for top in [
        "tf_transducer",
        "cc",
        "tests",
        "benchmarks",
        "examples",
        "docs",
        "notebooks",
        ".ci",
        "third_party",
    ]:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            if "__pycache__" in folder:
                continue
            sources += [
                os.path.join(folder, f)
                for f in files
                if f.endswith((".py", ".cc", ".h", ".cu", ".bzl"))
            ]
    sources.append(os.path.join(ROOT, "setup.py"))
    assert len(sources) > 150
    unlicensed = [
        os.path.relpath(path, ROOT)
        for path in sources
        if "SPDX-License-Identifier: Apache-2.0"
        not in "".join(open(path).readlines()[:3])
    ]
    assert not unlicensed, unlicensed


def _list_assignment(path, name):
    """The literal list assigned to `name` in a Python or Starlark file."""
    import ast

    for node in ast.parse(open(os.path.join(ROOT, path)).read()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} assigns no {name}")


def test_clang_and_nvcc_build_the_same_gpus():
    # The wheel's build (clang, CLANG_CUDA_FLAGS), a local nvcc's
    # (NVCC_FLAGS) and the check of the built library (.ci/cuda_binaries.py)
    # agree on the cubins and the PTX.
    import re

    nvcc = " ".join(_list_assignment("setup.py", "NVCC_FLAGS"))
    clang = " ".join(_list_assignment("setup.py", "CLANG_CUDA_FLAGS"))
    cubins = sorted(int(a) for a in re.findall(r"code=sm_(\d+)", nvcc))
    assert cubins == [80, 86, 89, 90]
    assert cubins == sorted(int(a) for a in re.findall(r"gpu-arch=sm_(\d+)", clang))
    assert re.findall(r"code=compute_(\d+)", nvcc) == ["90"]
    assert re.findall(r"--cuda-include-ptx=sm_(\d+)", clang) == ["90"]
    assert "--no-cuda-include-ptx=all" in clang
    assert list(_list_assignment(".ci/cuda_binaries.py", "ARCHS")) == cubins


def test_bazel_compiles_with_setup_py_flags():
    # Bazel cannot read setup.py, so the two lists are kept equal here.
    assert _list_assignment("BUILD.bazel", "OPT_COPTS") == _list_assignment(
        "setup.py", "OPT_FLAGS"
    )
    assert _list_assignment("BUILD.bazel", "NVCC_FLAGS") == _list_assignment(
        "setup.py", "NVCC_FLAGS"
    )
