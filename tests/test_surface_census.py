"""The census over the user-facing surface (tests/surface.py): every argument of every public function,
class and model method a user calls, given each bad value of its kind in turn (the others valid),
raises a clear error naming it — 0 obscure errors, 0 silent acceptances, 0 hangs — and a property
suite (hypothesis) draws further bad values of each kind. A completeness check keeps the table
true: every parameter of the surface's callables is in it, or exempt here with the reason."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
import spherelab as sl
import surface
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spherelab import activations as A
from spherelab import kernels as K

SETTINGS = settings(max_examples=int(os.environ.get("SPHERELAB_EXAMPLES", "150")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
CASES = list(surface.cases())


@pytest.mark.parametrize("entry, name, bad", CASES,
                         ids=[f"{e.name}-{n}-{type(b).__name__}:{str(b)[:12]}" for e, n, b in CASES])
def test_every_bad_argument_is_refused_by_name(entry, name, bad):
    outcome, message = surface.classify(entry, name, bad)
    assert outcome == "clear error", f"{entry.name}({name}={bad!r}): {outcome} {message}"


def test_the_valid_calls_are_valid():
    for entry in surface.CALLS:
        entry()  # the baseline every bad value is measured against


# ---- hypothesis: more bad values of each kind ------------------------------------------------------
def _bad(arg: surface.Arg):
    text = st.text(min_size=1, max_size=4)
    if arg.kind == "count":
        low = (arg.minimum if arg.minimum is not None else 0)
        out = [st.integers(max_value=low - 1), st.floats(allow_nan=True).filter(lambda v: v != int(v)
                                                                                if np.isfinite(v) else True),
               st.booleans(), text]
        if arg.size:
            out.append(st.integers(min_value=10**13, max_value=10**30))
        return st.one_of(*out)
    if arg.kind in ("positive", "nonneg"):
        below = st.floats(max_value=0.0, exclude_max=arg.kind == "nonneg", allow_nan=False, allow_infinity=False)
        return st.one_of(below, st.just(np.nan), st.sampled_from([np.inf, -np.inf]).filter(
            lambda v: v not in arg.accepts), st.booleans(), text, st.complex_numbers(min_magnitude=1e-3))
    if arg.kind == "real":
        return st.one_of(st.sampled_from([np.nan, np.inf, -np.inf]), st.booleans(), text)
    if arg.kind == "array":
        return st.one_of(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), min_size=1, max_size=4).map(np.array),
                         text, st.lists(st.complex_numbers(min_magnitude=1e-3), min_size=1, max_size=3).map(np.array))
    if arg.kind == "choice":
        return st.one_of(text.filter(lambda v: v != arg.valid), st.integers(), st.none())
    if arg.kind == "flag":
        return st.one_of(st.integers(), text, st.floats())
    if arg.kind == "seed":
        return st.one_of(st.integers(max_value=-1), st.floats().filter(lambda v: not (np.isfinite(v) and v == int(v))),
                         st.booleans(), text)
    if arg.kind == "custom":
        return st.sampled_from(arg.bad)
    return st.one_of(st.integers(), text)


ARGS = [(e, n) for e in surface.CALLS for n in e.args]


@SETTINGS
@given(data=st.data())
def test_any_bad_value_of_any_argument_is_refused_by_name(data):
    entry, name = data.draw(st.sampled_from(ARGS), label="argument")
    bad = data.draw(_bad(entry.args[name]), label="value")
    outcome, message = surface.classify(entry, name, bad)
    assert outcome == "clear error", f"{entry.name}({name}={bad!r}): {outcome} {message}"


# ---- completeness: the table covers the surface ----------------------------------------------------
#: the surface's callables -> the table's entries that call them
TARGETS = {
    sl.sample_sphere: ["sample_sphere"], sl.SphericalHarmonics: ["SphericalHarmonics"],
    sl.SphericalHarmonics.__call__: ["SphericalHarmonics.__call__"], sl.product_quadrature: ["product_quadrature"],
    sl.lonlat_grid: ["lonlat_grid"], sl.orthographic_grid: ["orthographic_grid"], sl.gegenbauer: ["gegenbauer"],
    sl.gegenbauer_table: ["gegenbauer_table"], sl.gegenbauer_series: ["gegenbauer_series"],
    sl.zonal_table: ["zonal_table"], sl.zonal_series: ["zonal_series"], sl.zonal_series_vjp: ["zonal_series_vjp"],
    sl.num_harmonics: ["num_harmonics"], sl.cumulative_num_harmonics: ["cumulative_num_harmonics"],
    sl.log_num_harmonics: ["log_num_harmonics"], sl.log_omega: ["log_omega"], sl.funk_hecke: ["funk_hecke"],
    sl.truncated_shape: ["truncated_shape"], sl.rkhs_norm_truncated: ["rkhs_norm_truncated"],
    sl.mismatch_report: ["mismatch_report"],
    K.Matern: ["Matern"], K.ArcCosine: ["ArcCosine"], K.DeepArcCosine: ["DeepArcCosine"], K.NTK: ["NTK"],
    K.IntrinsicMatern: ["IntrinsicMatern"], K.PolynomialDecay: ["PolynomialDecay"], K.Truncated: ["Truncated"],
    K.Parity: ["Parity"], K.ZonalKernel.K: ["kernel.K"], A.Softplus: ["Softplus"], A.Swish: ["Swish"],
    A.Erf: ["Erf"], sl.likelihoods.Gaussian: ["Gaussian"], sl.likelihoods.Bernoulli: ["Bernoulli"],
    sl.groups.Reflection: ["Reflection"], sl.groups.Rotation: ["Rotation"],
    sl.HarmonicFeatures: ["HarmonicFeatures"], sl.InducingPoints: ["InducingPoints"],
    sl.ActivatedFeatures: ["ActivatedFeatures"], sl.PhaseTruncatedHarmonics: ["PhaseTruncatedHarmonics"],
    sl.VISH: ["VISH"], sl.VISH.fit: ["VISH.fit"], sl.VISH.fit_svi: ["VISH.fit_svi"],
    sl.OrthogonalSVGP: ["OrthogonalSVGP"], sl.OrthogonalSVGP.fit: ["OrthogonalSVGP.fit"],
    sl.OrthogonalSVGP.from_vish: ["OrthogonalSVGP.from_vish"], sl.features.greedy_variance: ["greedy_variance"],
    sl.features.kmeans_centres: ["kmeans_centres"],
    sl.selection.fit_hybrid: ["fit_hybrid"], sl.selection.fit_budget: ["fit"],
    sl.selection.fit_additive: ["fit_additive"],
    sl.models.NeighbourResidual: ["NeighbourResidual"], K.Additive.from_groups: ["Additive.from_groups"],
    sl.features.AdditiveHarmonics: ["AdditiveHarmonics"],
    sl.OrthogonalSVGP.fit_svi: ["OrthogonalSVGP.fit_svi"], sl.HarmonicSVGP: ["HarmonicSVGP"],
    sl.models.ExactGP: ["ExactGP"], sl.VISH.predict_f: ["VISH.predict_f"],
    sl.OrthogonalSVGP.predict_f: ["OrthogonalSVGP.predict_f"], sl.HarmonicSVGP.optimal_q: ["HarmonicSVGP.optimal_q"],
    sl.OrthogonalSVGP.elbo: ["Model.elbo"], sl.save: ["save"],
    sl.datasets.synthetic_regression: ["synthetic_regression"], sl.datasets.snelson_like: ["snelson_like"],
    sl.datasets.banana_like: ["banana_like"], sl.datasets.susy_like: ["susy_like"],
    sl.datasets.mirror_symmetric: ["mirror_symmetric"], sl.datasets.uci_like: ["uci_like"],
    sl.datasets.load: ["datasets.load"], sl.set_threads: ["set_threads"], sl.thread_limit: ["thread_limit"],
    sl.metrics.rmse: ["metrics.rmse"], sl.metrics.nlpd: ["metrics.nlpd"], sl.metrics.roc_auc: ["metrics.roc_auc"],
}

#: parameters not in the table, each with the reason
EXEMPT = {
    "ops": "the device's operations: a spherelab Operations or a device name, resolved by backend.resolve "
           "(tested in test_backend)",
    "device": "a device name, resolved by backend.resolve (tested in test_backend)",
    "features": "VISH's given features: a SphericalFeatures or None (type-checked; tests/models)",
    "orthogonal_inputs": "an array of num_orthogonal rows (shape-checked; tests/models)",
    "inducing_inputs": "HarmonicSVGP's per-block arrays (shape-checked; tests/models)",
    "weights": "ActivatedFeatures' initial weights, an array of num_units rows (shape-checked; tests/features)",
    "directions": "PhaseTruncatedHarmonics' initial directions (checked on the sphere; tests/features)",
    "kinks": "funk_hecke's breakpoints in (-1, 1) (checked; tests/sphere)",
    "parity": "funk_hecke's parity: None, 'even' or 'odd' (checked; tests/sphere)",
    "method": "funk_hecke's quadrature: 'angle' or 'gegenbauer' (checked; tests/sphere)",
    "num_nodes": "funk_hecke's fixed node count (checked: an integer in [2, 8192])",
    "init_q": "q's initialisation, a choice (in OrthogonalSVGP.fit's entry; shared by every inducing model)",
    "chunk": "synthetic_regression's generation chunk (a keyword for memory, not data)",
    "out": "SphericalHarmonics' output buffer: checked for shape, dtype and layout (tests/sphere)",
    "callback": "fit's per-iteration callable or None (checked: tests/models/test_hybrid.py)",
    "components": "Additive's kernels, one per group (type-checked, distinct objects; tests/models/test_additive.py)",
    "fit_model": "NeighbourResidual.fit's flag (not on the census's call)",
    "inputs": "AdditiveHarmonics' input count, set by a model (a count; tests/models/test_additive.py)",
    "path": "a file name: the operating system's error names it (FileNotFoundError, PermissionError)",
}


def _parameters(target):
    params = inspect.signature(target).parameters
    return [n for n, p in params.items() if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def test_every_parameter_of_the_surface_is_in_the_table_or_exempt_with_a_reason():
    by_name = {e.name: e for e in surface.CALLS}
    missing = []
    for target, names in TARGETS.items():
        covered = set().union(*(by_name[n].args for n in names))
        for p in _parameters(target):
            if p not in covered and p not in EXEMPT:
                missing.append(f"{getattr(target, '__qualname__', target)}({p})")
    assert not missing, "arguments of the public surface missing from tests/surface.py: " + ", ".join(missing)


def test_every_top_level_callable_is_on_the_surface_or_named_here():
    outside = {"get_threads", "warmup", "load", "FormatError", "harmonic_decomposition", "log_sphere_area",
               "log_gegenbauer_at_one", "normalized_gegenbauer_table", "normalized_gegenbauer_derivative_table",
               "ActivatedSVGP", "ConvergenceWarning", "ScaleWarning"}
    # (above: no arguments, or tested in their own files: test_surface, test_load_budget, test_fit_warnings, ...)
    covered = {getattr(t, "__name__", None) for t in TARGETS}
    public = [n for n in sl.__all__ if callable(getattr(sl, n)) and not inspect.ismodule(getattr(sl, n))]
    assert not [n for n in public if n not in covered and n not in outside]
