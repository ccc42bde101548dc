# SPDX-License-Identifier: Apache-2.0
"""The public API of every package but the command lines (cli) is typed.

TYPED_PACKAGES: ops, losses, lattice, decoding, data, export, layers, models
and training. mypy (`make lint`, the `files` of pyproject.toml's [tool.mypy])
checks that the annotations agree with the code; this test keeps them
complete: every function and class in each package's `__all__`, and each
such class's `__init__` and public methods, annotate every parameter and the
return value.
"""

import importlib
import inspect

import pytest

TYPED_PACKAGES = (
    "tf_transducer.ops",
    "tf_transducer.losses",
    "tf_transducer.lattice",
    "tf_transducer.decoding",
    "tf_transducer.data",
    "tf_transducer.export",
    "tf_transducer.layers",
    "tf_transducer.models",
    "tf_transducer.training",
)


def public_callables(package):
    """(qualified name, function) of the package's public API."""
    module = importlib.import_module(package)
    assert hasattr(module, "__all__"), f"{package} has no __all__"
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isfunction(value):
            yield f"{package}.{name}", value
        elif inspect.isclass(value):
            for attr, member in vars(value).items():
                if isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                if inspect.isfunction(member) and (
                    attr == "__init__" or not attr.startswith("_")
                ):
                    yield f"{package}.{name}.{attr}", member


def missing_annotations(function):
    signature = inspect.signature(function)
    missing = [
        p.name
        for p in signature.parameters.values()
        if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


@pytest.mark.parametrize("package", TYPED_PACKAGES)
def test_public_api_is_annotated(package):
    untyped = {
        name: missing
        for name, function in public_callables(package)
        if (missing := missing_annotations(function))
    }
    assert not untyped, f"unannotated public API in {package}: {untyped}"


def test_the_check_sees_the_api():
    # A guard against a vacuous pass: the walk finds the well-known entries.
    names = {
        name for package in TYPED_PACKAGES for name, _ in public_callables(package)
    }
    for expected in (
        "tf_transducer.ops.rnnt_loss",
        "tf_transducer.losses.RnntLoss.__init__",
        "tf_transducer.lattice.RecognitionLattice.shortest_path",
        "tf_transducer.decoding.WordScorer.extend",
        "tf_transducer.data.SpeechDataset.dataset",
        "tf_transducer.export.TransducerStream.feed",
        "tf_transducer.layers.ConformerEncoder.step",
        "tf_transducer.layers.SpecAugment.call",
        "tf_transducer.models.Transducer.from_preset",
        "tf_transducer.models.Transducer.compute_loss",
        "tf_transducer.training.train_loop",
        "tf_transducer.training.RunDirectory.__init__",
    ):
        assert expected in names
    assert missing_annotations(lambda x, y: x) == ["x", "y", "return"]
