"""Every Examples section in the library's docstrings runs (doctest), and every public class and
function of the API reference has a docstring."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest
import spherelab

# the CUDA kernels' module needs numba-cuda's typing on import; its docstrings hold no examples
SKIP = {"spherelab.devices.cuda"}
MODULES = sorted(m.name for m in pkgutil.walk_packages(spherelab.__path__, "spherelab.") if m.name not in SKIP)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that save files write here
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with spherelab.models.capped():  # the examples' iteration limits are short for speed: meant
        for test in finder.find(module, name):
            if test.examples and (test.filename or "").startswith(spherelab.__path__[0]):
                runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def _public():
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr, None)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__.startswith("spherelab"):
                yield f"{name}.{attr}", obj


def test_every_public_class_and_function_has_a_docstring():
    missing = sorted({qual for qual, obj in _public() if not (obj.__doc__ or "").strip()})
    assert not missing, missing


KERNELS_AND_FEATURES = ["kernels.ArcCosine", "kernels.DeepArcCosine", "kernels.NTK", "kernels.Matern",
                        "kernels.IntrinsicMatern", "kernels.PolynomialDecay", "kernels.Truncated", "kernels.Parity",
                        "features.HarmonicFeatures", "features.PhaseTruncatedHarmonics", "features.ActivatedFeatures",
                        "features.InducingPoints", "VISH", "OrthogonalSVGP", "HarmonicSVGP"]


@pytest.mark.parametrize("path", KERNELS_AND_FEATURES)
def test_kernels_features_and_models_have_parameters_and_examples(path):
    obj = spherelab
    for part in path.split("."):
        obj = getattr(obj, part)
    doc = inspect.getdoc(obj) or ""
    assert "Parameters\n----------" in doc and "Examples\n--------" in doc, path


def test_each_api_page_opens_with_a_table_of_its_modules_classes_and_functions():
    """docs/api/<module>.rst: an autosummary of exactly the callables of the module's __all__, in order."""
    from pathlib import Path

    for rst in sorted((Path(__file__).resolve().parents[1] / "docs" / "api").glob("*.rst")):
        text = rst.read_text(encoding="utf-8")
        name = text.split(".. automodule:: ")[1].split()[0]
        module = importlib.import_module(name)
        listed = text.split(".. autosummary::")[1].split(".. automodule::")[0].split()[1:]
        assert listed == [n for n in module.__all__ if callable(getattr(module, n))
                          and not inspect.ismodule(getattr(module, n))], rst.name
