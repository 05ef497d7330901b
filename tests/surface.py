"""The user-facing surface of spherelab as a table: every public function, class and model method a
user passes arguments to, with one valid call and the kind of each argument. The property suite
(test_surface_census.py) and the robustness census (benchmarks/tools/robustness_census.py) draw bad
values of each kind for each argument in turn, the others kept valid, and require a clear error that
names the argument — never a silent acceptance, an obscure exception or a hang.

Kinds: ``count`` (an integer >= ``minimum``; ``size`` marks one that sizes an allocation, so a
count of terabytes must be refused before NumPy sees it), ``positive`` / ``nonneg`` / ``real``
(finite numbers), ``array`` (finite real arrays), ``choice`` (one of some strings), ``flag``
(True or False), ``seed``, ``object`` (a spherelab object of a given class)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import spherelab as sl
from spherelab import activations as A
from spherelab import kernels as K
from spherelab.likelihoods import Bernoulli, Gaussian
from spherelab.models import capped

RNG = np.random.default_rng(0)
X = RNG.uniform(-1, 1, (40, 2))
Y = np.sin(3 * X[:, 0]) + 0.1 * RNG.standard_normal(40)
T = np.linspace(-0.9, 0.9, 7)
P3 = sl.sample_sphere(6, 3, rng=0)


@dataclass
class Arg:
    kind: str
    valid: Any
    minimum: int | None = None  # counts
    size: bool = False  # a count that sizes an allocation
    optional: bool = False  # None is valid
    words: tuple = ()  # other words a clear error may name the argument by
    accepts: tuple = ()  # values valid here although the kind's bad list holds them
    bad: tuple = ()  # for a structured argument (kind "custom"): its bad values


@dataclass
class Call:
    name: str
    call: Callable[..., Any]
    args: dict[str, Arg] = field(default_factory=dict)

    def __call__(self, **override):
        return self.call(**{**{k: a.valid for k, a in self.args.items()}, **override})


def _vish():
    return sl.VISH(K.Matern(1.5, 1.0), 2, Gaussian(0.1))


def _orth():
    return sl.OrthogonalSVGP(K.Matern(1.5, 1.0), sl.InducingPoints(X[:4]), 3, Gaussian(0.1))


def _hvgp():
    return sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, Gaussian(0.1))


_FITTED: dict = {}


def fitted(name):
    """A fitted model of each family (fitted once, read by predictions only)."""
    if name not in _FITTED:
        with capped():  # short fits by design
            _FITTED[name] = {"vish": lambda: _vish().fit(X, Y, maxiter=3, lift_maxiter=2),
                             "orth": lambda: _orth().fit(X, Y, maxiter=3),
                             "hvgp": lambda: _hvgp().fit(X, Y, maxiter=3)}[name]()
    return _FITTED[name]


C = Arg  # brevity below
#: orthogonal_inputs: a (K, D) array, "random" or "greedy" (None: "random")
_ORTHOGONAL_BAD = ("nonsense", 5, True, np.array([[np.nan, 0.0]] * 3), np.ones((3, 2), dtype=complex))
KERNEL_ARGS = {"variance": C("positive", 1.0), "bias": C("nonneg", 1.0), "input_scale": C("positive", 1.0)}

CALLS = [
    # ---- the sphere
    Call("sample_sphere", lambda num_points, dim, rng: sl.sample_sphere(num_points, dim, rng),
         {"num_points": C("count", 5, 0, size=True), "dim": C("count", 3, 2), "rng": C("seed", 0, optional=True)}),
    Call("SphericalHarmonics", lambda dim, max_degree: sl.SphericalHarmonics(dim, max_degree)(P3),
         {"dim": C("count", 3, 2), "max_degree": C("count", 2, 0, size=True)}),
    Call("SphericalHarmonics.__call__", lambda X, atol: sl.SphericalHarmonics(3, 2)(X, atol=atol),
         {"X": C("array", P3), "atol": C("nonneg", 1e-6)}),
    Call("product_quadrature", lambda dim, degree: sl.product_quadrature(dim, degree),
         {"dim": C("count", 3, 2), "degree": C("count", 3, 0, size=True)}),
    Call("lonlat_grid", lambda n_lat, n_lon: sl.lonlat_grid(n_lat, n_lon),
         {"n_lat": C("count", 4, 1, size=True), "n_lon": C("count", 5, 1, size=True)}),
    Call("orthographic_grid", lambda n, lon0, lat0: sl.orthographic_grid(n, lon0, lat0),
         {"n": C("count", 8, 2, size=True), "lon0": C("real", 0.0), "lat0": C("real", 0.3)}),
    Call("gegenbauer", lambda n, alpha, t: sl.gegenbauer(n, alpha, t),
         {"n": C("count", 3, 0, accepts=(2.0,)), "alpha": C("nonneg", 1.5), "t": C("array", T)}),
    Call("gegenbauer_table", lambda max_degree, alpha, t: sl.gegenbauer_table(max_degree, alpha, t),
         {"max_degree": C("count", 4, 0, size=True), "alpha": C("nonneg", 1.5), "t": C("array", T)}),
    Call("gegenbauer_series", lambda coeffs, alpha, t, normalized, derivative:
         sl.gegenbauer_series(coeffs, alpha, t, normalized=normalized, derivative=derivative),
         {"coeffs": C("array", np.ones(3)), "alpha": C("nonneg", 1.5), "t": C("array", T),
          "normalized": C("flag", False), "derivative": C("flag", False)}),
    Call("zonal_table", lambda max_degree, dim, t: sl.zonal_table(max_degree, dim, t),
         {"max_degree": C("count", 4, 0, size=True), "dim": C("count", 3, 2), "t": C("array", T)}),
    Call("zonal_series", lambda coeffs, dim, t, derivative: sl.zonal_series(coeffs, dim, t, derivative=derivative),
         {"coeffs": C("array", np.ones(3)), "dim": C("count", 3, 2), "t": C("array", T),
          "derivative": C("flag", False)}),
    Call("zonal_series_vjp", lambda weights, dim, t, max_degree: sl.zonal_series_vjp(weights, dim, t, max_degree),
         {"weights": C("array", np.ones(7)), "dim": C("count", 3, 2), "t": C("array", T),
          "max_degree": C("count", 3, 0, size=True)}),
    Call("num_harmonics", lambda degree, dim: sl.num_harmonics(degree, dim),
         {"degree": C("count", 3, 0), "dim": C("count", 3, 2)}),
    Call("cumulative_num_harmonics", lambda max_degree, dim: sl.cumulative_num_harmonics(max_degree, dim),
         {"max_degree": C("count", 3, 0), "dim": C("count", 3, 2)}),
    Call("log_num_harmonics", lambda degree, dim, real: sl.log_num_harmonics(degree, dim, real=real),
         {"degree": C("count", 3, 0, accepts=(2.0,)), "dim": C("count", 3, 2), "real": C("flag", False)}),
    Call("log_omega", lambda dim: sl.log_omega(dim), {"dim": C("count", 3, 2)}),
    Call("funk_hecke", lambda shape, dim, max_degree, rtol, return_error, of_gap:
         sl.funk_hecke(shape, dim, max_degree, rtol=rtol, return_error=return_error, of_gap=of_gap),
         {"shape": C("object", np.cos, words=("callable",)), "dim": C("count", 3, 2),
          "max_degree": C("count", 4, 0, size=True), "rtol": C("positive", 1e-12),
          "return_error": C("flag", False), "of_gap": C("flag", False)}),
    Call("truncated_shape", lambda coeffs, dim, t, max_degree: sl.truncated_shape(coeffs, dim, t, max_degree),
         {"coeffs": C("array", np.ones(4)), "dim": C("count", 3, 2), "t": C("array", T),
          "max_degree": C("count", 3, 0, optional=True)}),
    Call("rkhs_norm_truncated", lambda activation_coeffs, kernel_spectrum, dim, rtol:
         sl.rkhs_norm_truncated(activation_coeffs, kernel_spectrum, dim, rtol),
         {"activation_coeffs": C("array", np.ones(4)), "kernel_spectrum": C("array", np.ones(4)),
          "dim": C("count", 3, 2), "rtol": C("nonneg", 0.0)}),
    Call("mismatch_report", lambda kernel_spectrum, activation_coeffs, rtol:
         sl.mismatch_report(kernel_spectrum, activation_coeffs, rtol),
         {"kernel_spectrum": C("array", np.ones(4)), "activation_coeffs": C("array", np.ones(4)),
          "rtol": C("nonneg", 0.0)}),
    # ---- kernels, activations, likelihoods, groups
    Call("Matern", lambda nu, lengthscale, **kw: K.Matern(nu, lengthscale, **kw).K(X[:4]),
         {"nu": C("positive", 1.5, accepts=(np.inf,)), "lengthscale": C("positive", 1.0), **KERNEL_ARGS}),
    Call("ArcCosine", lambda order, **kw: K.ArcCosine(order, **kw).K(X[:4]),
         {"order": C("count", 1, 0), **KERNEL_ARGS}),
    Call("DeepArcCosine", lambda depth, order, **kw: K.DeepArcCosine(depth, order, **kw).K(X[:4]),
         {"depth": C("count", 2, 1), "order": C("count", 1, 0), **KERNEL_ARGS}),
    Call("NTK", lambda depth, **kw: K.NTK(depth, **kw).K(X[:4]), {"depth": C("count", 1, 1), **KERNEL_ARGS}),
    Call("IntrinsicMatern", lambda dim, nu, lengthscale, **kw: K.IntrinsicMatern(dim, nu, lengthscale, **kw).K(X[:4]),
         {"dim": C("count", 3, 2), "nu": C("positive", 1.5, accepts=(np.inf,)), "lengthscale": C("positive", 1.0),
          **KERNEL_ARGS}),
    Call("PolynomialDecay", lambda dim, beta, max_degree, **kw:
         K.PolynomialDecay(dim, beta, max_degree=max_degree, **kw).K(X[:4]),
         {"dim": C("count", 3, 2), "beta": C("positive", 4.0), "max_degree": C("count", 20, 0, optional=True),
          **KERNEL_ARGS}),
    Call("Truncated", lambda kernel, dim, max_degree: K.Truncated(kernel, dim, max_degree).K(X[:4]),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)), "dim": C("count", 3, 2),
          "max_degree": C("count", 5, 0, size=True)}),
    Call("Parity", lambda kernel, even: K.Parity(kernel, even).K(X[:4]),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)), "even": C("flag", True)}),
    Call("kernel.K", lambda X, X2: K.Matern(1.5).K(X, X2), {"X": C("array", X[:4]), "X2": C("array", X[:3],
                                                                                             optional=True)}),
    Call("Softplus", lambda beta: A.Softplus(beta).shape(T), {"beta": C("positive", 3.0)}),
    Call("Swish", lambda beta: A.Swish(beta).shape(T), {"beta": C("positive", 1.0)}),
    Call("Erf", lambda scale: A.Erf(scale).shape(T), {"scale": C("positive", 1.0)}),
    Call("Gaussian", lambda variance, floor: Gaussian(variance, floor),
         {"variance": C("positive", 0.1), "floor": C("nonneg", 1e-6, optional=True)}),
    Call("Bernoulli", lambda num_points: Bernoulli(num_points),
         {"num_points": C("count", 20, 1, size=True, optional=True)}),
    Call("Reflection", lambda dim, groups, basis: sl.groups.Reflection(dim, groups, basis),
         {"dim": C("count", 3, 1), "groups": C("custom", None, bad=("x", [[0, 5]], [[0], [0]], [["a"]], [[1.5]], 5)),
          "basis": C("custom", None, bad=(np.ones((3, 3)), "x", np.eye(2), np.full((3, 3), np.nan)))}),
    Call("Rotation", lambda dim, T, plane: sl.groups.Rotation(dim, T, plane),
         {"dim": C("count", 3, 2), "T": C("count", 4, 1),
          "plane": C("custom", (0, 1), bad=("ab", (0, 0), (0, 5), (0,), (0.5, 1), None, 3))}),
    # ---- features
    Call("HarmonicFeatures", lambda max_degree, dim: sl.HarmonicFeatures(max_degree, dim),
         {"max_degree": C("count", 2, 0, size=True), "dim": C("count", 3, 2, optional=True)}),
    Call("InducingPoints", lambda Z, fixed: sl.InducingPoints(Z, fixed), {"Z": C("array", X[:4]),
                                                                           "fixed": C("flag", False)}),
    Call("ActivatedFeatures", lambda activation, num_units, truncation:
         sl.ActivatedFeatures(activation, num_units, truncation),
         {"activation": C("object", A.ReLU(), words=("activation",)), "num_units": C("count", 3, 1, size=True),
          "truncation": C("count", 3, 0, size=True)}),
    Call("PhaseTruncatedHarmonics", lambda dim, max_degree, max_phases, seed:
         sl.PhaseTruncatedHarmonics(dim, max_degree, max_phases, seed=seed),
         {"dim": C("count", 3, 2), "max_degree": C("count", 2, 0, size=True),
          "max_phases": C("count", 2, 1), "seed": C("seed", 0)}),  # (more phases than harmonics: all of them)
    # ---- models: construction, fits, predictions
    Call("VISH", lambda kernel, max_degree, likelihood, chunk_size, prior, gram_dtype:
         sl.VISH(kernel, max_degree, likelihood, chunk_size=chunk_size, prior=prior, gram_dtype=gram_dtype),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)), "max_degree": C("count", 2, 0, size=True),
          "likelihood": C("object", Gaussian(0.1), optional=True, words=("likelihood",)),
          "chunk_size": C("count", 64, 1, optional=True), "prior": C("choice", "kernel"),
          "gram_dtype": C("choice", "float64")}),
    Call("VISH.fit", capped()(lambda X, y, optimize, train_lift, lift_subsample, lift_maxiter, maxiter, seed, lift_ftol,
         progress, max_time:
         _vish().fit(X, y, optimize=optimize, train_lift=train_lift, lift_subsample=lift_subsample,
                     lift_maxiter=lift_maxiter, maxiter=maxiter, seed=seed, lift_ftol=lift_ftol, progress=progress,
                     max_time=max_time)),
         {"X": C("array", X), "y": C("array", Y), "optimize": C("flag", True), "train_lift": C("flag", True),
          "lift_subsample": C("count", 30, 1), "lift_maxiter": C("count", 2, 0), "maxiter": C("count", 2, 0),
          "seed": C("seed", 0), "lift_ftol": C("nonneg", 1e-4, optional=True),
          "progress": C("flag", False, optional=True), "max_time": C("positive", 60.0, optional=True)}),
    Call("Additive.from_groups", lambda kernel, groups: K.Additive.from_groups(kernel, groups).K(X),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)),
          "groups": C("custom", [0, 1, (0, 1)], bad=("x", 5.5, [()], [[0, 0]], [[-1]], [(0, 1), (1, 0)], [True], [],
                                                      [[0.5]], [[0, 7]]), words=("groups", "column"))}),
    Call("AdditiveHarmonics", capped()(lambda degrees: sl.VISH(K.Additive.from_groups(K.Matern(1.5), [0, 1]),
                                                              features=sl.features.AdditiveHarmonics(degrees))
                                       .fit(X, Y, maxiter=2, lift_maxiter=2)),
         {"degrees": C("custom", [3, 2], bad=(-1, 2.0, "a", [], [1, -1], [1.5], True, [1, 2, 3]),
                       words=("degrees",))}),
    Call("fit_additive", capped()(lambda X, y, interactions, order, max_interactions, num_features, subsample, seed,
                                  max_time:
         sl.selection.fit_additive(X, y, interactions=interactions, order=order, max_interactions=max_interactions,
                                num_features=num_features, subsample=subsample, seed=seed, max_time=max_time)),
         {"X": C("array", X), "y": C("array", Y),
          "interactions": C("custom", [(0, 1)], bad=(5, "pairs", [(0, 0)], [(0, 5)], [(0,)], [(0.5, 1)]),
                            words=("interactions",)),
          "order": C("count", 2, 2), "max_interactions": C("count", 1, 0, optional=True),
          "num_features": C("count", 40, 2, size=True), "subsample": C("count", 30, 10), "seed": C("seed", 0),
          "max_time": C("positive", 30.0, optional=True)}),
    Call("fit", lambda X, y, seconds, validation, seed, progress:
         sl.fit(X, y, seconds=seconds, validation=validation, seed=seed, progress=progress),
         {"X": C("array", X), "y": C("array", Y), "seconds": C("positive", 1.0),
          "validation": C("positive", 0.1, accepts=(0.25,)), "seed": C("seed", 0),
          "progress": C("flag", False, optional=True)}),
    Call("NeighbourResidual", lambda model, num_neighbours, subsample, seed:
         sl.models.NeighbourResidual(model, num_neighbours, subsample, seed).fit(X, Y, fit_model=False),
         {"model": C("object", fitted("vish"), words=("model",)), "num_neighbours": C("count", 8, 1),
          "subsample": C("count", 20, 10), "seed": C("seed", 0)}),
    Call("VISH.fit_svi", lambda X, y, batch_size, iterations, lr, gamma, seed, train_directions, progress:
         sl.VISH(K.Matern(1.5), 2, Bernoulli()).fit_svi(X, y, batch_size=batch_size, iterations=iterations, lr=lr,
                                                         gamma=gamma, seed=seed, train_directions=train_directions,
                                                         progress=progress),
         {"X": C("array", X), "y": C("array", (Y > 0).astype(float)), "batch_size": C("count", 16, 1),
          "iterations": C("count", 2, 0), "lr": C("positive", 0.01), "gamma": C("positive", 0.1),
          "seed": C("seed", 0), "train_directions": C("flag", True), "progress": C("flag", False, optional=True)}),
    Call("OrthogonalSVGP", lambda kernel, features, num_orthogonal, likelihood, orthogonal_inputs, whiten, jitter,
         sufficient_statistics:
         sl.OrthogonalSVGP(kernel, features, num_orthogonal, likelihood, orthogonal_inputs=orthogonal_inputs,
                           whiten=whiten, jitter=jitter, sufficient_statistics=sufficient_statistics),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)),
          "features": C("object", sl.InducingPoints(X[:4]), words=("features",)),
          "num_orthogonal": C("count", 3, 0, size=True),
          "likelihood": C("object", Gaussian(0.1), optional=True, words=("likelihood",)),
          "orthogonal_inputs": C("custom", "greedy", bad=_ORTHOGONAL_BAD),
          "whiten": C("flag", True), "jitter": C("nonneg", 1e-6), "sufficient_statistics": C("flag", True)}),
    Call("OrthogonalSVGP.from_vish", lambda model, num_orthogonal, orthogonal_inputs:
         sl.OrthogonalSVGP.from_vish(model, num_orthogonal, orthogonal_inputs=orthogonal_inputs),
         {"model": C("object", sl.VISH(K.Matern(1.5), 2, prior="kernel").fit(X, Y), words=("model", "VISH")),
          "num_orthogonal": C("count", 3, 0, size=True),
          "orthogonal_inputs": C("custom", "greedy", bad=_ORTHOGONAL_BAD)}),
    Call("greedy_variance", lambda kernel, X, count, features, jitter:
         sl.features.greedy_variance(kernel, X, count, features, jitter=jitter),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)), "X": C("array", X), "count": C("count", 3, 0),
          "features": C("object", None, optional=True, words=("features",)), "jitter": C("nonneg", 1e-6)}),
    Call("kmeans_centres", lambda X, count, seed, iterations, max_rows:
         sl.features.kmeans_centres(X, count, seed=seed, iterations=iterations, max_rows=max_rows),
         {"X": C("array", X), "count": C("count", 3, 1), "seed": C("seed", 0), "iterations": C("count", 2, 0),
          "max_rows": C("count", 30, 1)}),
    Call("OrthogonalSVGP.fit", capped()(lambda X, y, optimize, maxiter, seed, init_q, collapsed, max_time, progress:
         _orth().fit(X, y, optimize=optimize, maxiter=maxiter, seed=seed, init_q=init_q, collapsed=collapsed,
                     max_time=max_time, progress=progress)),
         {"X": C("array", X), "y": C("array", Y), "optimize": C("flag", True), "maxiter": C("count", 2, 0),
          "seed": C("seed", 0), "init_q": C("choice", "optimal"), "collapsed": C("flag", True, optional=True),
          "max_time": C("positive", 60.0, optional=True), "progress": C("flag", False, optional=True)}),
    Call("fit_hybrid", capped()(lambda kernel, X, y, degree, num_orthogonal, time_budget, likelihood, maxiter,
         max_orthogonal, seed:
         sl.selection.fit_hybrid(kernel, X, y, degree=degree, num_orthogonal=num_orthogonal, time_budget=time_budget,
                              likelihood=likelihood, maxiter=maxiter, max_orthogonal=max_orthogonal,
                              seed=seed)),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)), "X": C("array", X), "y": C("array", Y),
          "degree": C("count", 2, 0, optional=True), "num_orthogonal": C("count", 3, 1, size=True, optional=True),
          "time_budget": C("positive", 60.0, optional=True),
          "likelihood": C("object", Gaussian(0.1), optional=True, words=("likelihood",)),
          "maxiter": C("count", 2, 1), "max_orthogonal": C("count", 50, 1),
          "seed": C("seed", 0)}),
    Call("OrthogonalSVGP.fit_svi", lambda X, y, batch_size, iterations, lr, seed, init_q, progress:
         _orth().fit_svi(X, y, batch_size=batch_size, iterations=iterations, lr=lr, seed=seed, init_q=init_q,
                         progress=progress),
         {"X": C("array", X), "y": C("array", Y), "batch_size": C("count", 16, 1), "iterations": C("count", 2, 0),
          "lr": C("positive", 0.01), "seed": C("seed", 0), "init_q": C("choice", "optimal"),
          "progress": C("flag", False, optional=True)}),
    Call("HarmonicSVGP", lambda kernel, group, num_inducing_per_block, likelihood, jitter:
         sl.HarmonicSVGP(kernel, group, num_inducing_per_block, likelihood, jitter=jitter),
         {"kernel": C("object", K.Matern(2.5), words=("kernel",)),
          "group": C("object", sl.groups.Reflection(2), words=("group",)),
          "num_inducing_per_block": C("count", 3, 1, size=True),
          "likelihood": C("object", Gaussian(0.1), optional=True, words=("likelihood",)),
          "jitter": C("nonneg", 1e-6)}),
    Call("ExactGP", lambda kernel, noise: sl.models.ExactGP(kernel, noise).fit(X, Y),
         {"kernel": C("object", K.Matern(1.5), words=("kernel",)), "noise": C("positive", 0.1)}),
    Call("VISH.predict_f", lambda X: fitted("vish").predict_f(X), {"X": C("array", X[:5])}),
    Call("OrthogonalSVGP.predict_f", lambda X, chunk_size: fitted("orth").predict_f(X, chunk_size),
         {"X": C("array", X[:5]), "chunk_size": C("count", 64, 1)}),
    Call("HarmonicSVGP.optimal_q", lambda X, y, chunk_size: _hvgp().fit(X, Y, optimize=False).optimal_q(X, y,
                                                                                                         chunk_size),
         {"X": C("array", X), "y": C("array", Y), "chunk_size": C("count", 64, 1)}),
    Call("Model.elbo", lambda X, y: fitted("orth").elbo(X, y), {"X": C("array", X), "y": C("array", Y)}),
    Call("save", lambda model, include_data: sl.save(model, _TMP() / "m.npz", include_data=include_data),
         {"model": C("object", _orth(), words=("model",)), "include_data": C("flag", False)}),
    # ---- data, threads, metrics
    Call("synthetic_regression", lambda num_points, num_inputs, noise, seed:
         sl.datasets.synthetic_regression(num_points, num_inputs, noise, seed),
         {"num_points": C("count", 10, 1, size=True), "num_inputs": C("count", 3, 1, size=True),
          "noise": C("nonneg", 0.1), "seed": C("seed", 0, optional=True)}),
    Call("snelson_like", lambda num_points, noise, seed: sl.datasets.snelson_like(num_points, noise, seed),
         {"num_points": C("count", 10, 1, size=True), "noise": C("nonneg", 0.25), "seed": C("seed", 0)}),
    Call("banana_like", lambda num_points, seed: sl.datasets.banana_like(num_points, seed),
         {"num_points": C("count", 10, 2, size=True), "seed": C("seed", 0)}),
    Call("susy_like", lambda num_points, seed: sl.datasets.susy_like(num_points, seed),
         {"num_points": C("count", 10, 2, size=True), "seed": C("seed", 0)}),
    Call("mirror_symmetric", lambda num_points, noise, seed: sl.datasets.mirror_symmetric(num_points, noise, seed),
         {"num_points": C("count", 10, 1, size=True), "noise": C("nonneg", 0.1), "seed": C("seed", 0)}),
    Call("uci_like", lambda name, seed: sl.datasets.uci_like(name, seed),
         {"name": C("choice", "yacht"), "seed": C("seed", 0)}),
    Call("datasets.load", lambda name, split, seed, stand_in: sl.datasets.load(name, split, seed=seed,
                                                                               stand_in=stand_in),
         {"name": C("choice", "yacht"), "split": C("count", 0, 0), "seed": C("seed", 0),
          "stand_in": C("choice", "allow")}),
    Call("set_threads", lambda n: (sl.set_threads(n), sl.set_threads(1)), {"n": C("count", 1, 1, optional=True)}),
    Call("thread_limit", lambda n: sl.thread_limit(n).__enter__(), {"n": C("count", 1, 1)}),
    Call("metrics.rmse", lambda y, mean: sl.metrics.rmse(y, mean), {"y": C("array", Y), "mean": C("array", Y)}),
    Call("metrics.nlpd", lambda y, mean, var: sl.metrics.nlpd(y, mean, var),
         {"y": C("array", Y), "mean": C("array", Y), "var": C("array", np.ones(40))}),
    Call("metrics.roc_auc", lambda y, score: sl.metrics.roc_auc(y, score),
         {"y": C("array", (Y > 0).astype(float)), "score": C("array", Y)}),
]


def _TMP():  # noqa: N802 - a folder of this process's for the save case
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.gettempdir()) / f"spherelab-surface-{__import__('os').getpid()}"
    folder.mkdir(exist_ok=True)
    return folder


CLEAR = (ValueError, TypeError, MemoryError, RuntimeError)


def classify(entry: Call, name: str, bad: Any, seconds: int = 30) -> tuple[str, str]:
    """``entry`` called with ``name`` = ``bad`` (the rest valid): ("clear error" | "obscure error" |
    "silent acceptance" | "hang", the message)."""
    import signal
    import warnings

    class Hang(BaseException):
        pass

    def alarm(*_):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            entry(**{name: bad})
    except Hang:
        return "hang", ""
    except CLEAR as exc:
        words = (name,) + entry.args[name].words
        text = str(exc)
        return ("clear error" if any(w in text for w in words) else "obscure error"), f"{type(exc).__name__}: {text}"
    except Exception as exc:  # noqa: BLE001 - the census's point: any other exception is obscure
        return "obscure error", f"{type(exc).__name__}: {exc}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return "silent acceptance", ""


def cases():
    """Every (call, argument, canonical bad value) of the table."""
    for entry in CALLS:
        for name, arg in entry.args.items():
            for bad in bad_values(arg):
                if not any(bad is a or (type(bad) is type(a) and bad == a) for a in arg.accepts):
                    yield entry, name, bad


def bad_values(arg: Arg) -> list:
    """The canonical bad values of an argument's kind (the census's list; hypothesis draws more)."""
    common = ["x", 1j, [[1.0, 2.0], [3.0]]]
    if arg.kind == "count":
        low = (arg.minimum if arg.minimum is not None else 0) - 1
        out = [True, 2.5, 2.0, np.nan, low, *common] + ([] if arg.optional else [None])
        return out + ([10**13] if arg.size else [])
    if arg.kind in ("positive", "nonneg", "real"):
        out = [np.nan, np.inf, -np.inf, True, *common] + ([] if arg.optional else [None])
        return out + ([-1.0] + ([0.0] if arg.kind == "positive" else []) if arg.kind != "real" else [])
    if arg.kind == "array":  # (shapes are each function's own: the shape cases live beside it)
        return [np.array([[np.nan] * 2] * 3), np.ones((2, 2), dtype=complex), "x", np.array([[np.inf, 0.0]])]
    if arg.kind == "choice":
        return ["nonsense", 5, None]
    if arg.kind == "flag":
        return ["no", 2, "True"] + ([] if arg.optional else [None])
    if arg.kind == "seed":
        return [-1, 2.5, "x", True, 1j]
    if arg.kind == "custom":
        return list(arg.bad)
    if arg.kind == "object":
        return [5, "x"] + ([] if arg.optional else [None])
    raise AssertionError(arg.kind)
