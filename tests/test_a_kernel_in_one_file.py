"""A new zonal kernel and a new feature set, each written in this file and registered here, run
through the library unchanged: the gradient checker, the model contract (fit, fit_svi, save/load,
the simulated device), Dask arrays, and the rows floor on a device — their sums travel by name, so
the kernel's own hyper-parameter ``alpha`` reaches the optimiser with no library file naming it.

The kernel is the rational quadratic one, a scale mixture of squared exponentials in the chordal
distance (Rasmussen & Williams 2006, eq. 4.19), so positive definite on every sphere; the features
average the function over a window, :math:`u_m = \\tfrac12(f(z_m + \\delta) + f(z_m - \\delta))`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import spherelab as sl
from spherelab._state import Fields, Hyper  # (not yet public: the docs' source pages mislink them)
from spherelab.rows.device import DeviceRows
from spherelab.sphere.lift import lift_backward_rows, lifted_row_gradients
from spherelab.testing import ModelContract


def _positive(value, name):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if not (np.isfinite(v) and 1e-100 <= v <= 1e100):
        raise ValueError(f"{name} must be a finite number in [1e-100, 1e100], got {value!r}")
    return v


def rq_parts(xp, t, lengthscale: float, alpha: float):
    r"""Unit-variance :math:`\kappa(t) = (1 + s)^{-\alpha}`, :math:`s = (1 - t)/(\alpha\ell^2)` (the
    chordal distance's square is 2 - 2t), its t-derivative and its shape parameters' derivatives,
    in any array module ``xp``: the one definition the host's hooks and the device's columns use."""
    s = (1.0 - t) / (alpha * lengthscale ** 2)
    base = 1.0 + s
    kap = base ** (-alpha)
    tail = base ** (-alpha - 1.0)
    return kap, tail / lengthscale ** 2, {"lengthscale": 2.0 * alpha * s * tail / lengthscale,
                                          "alpha": kap * (s / base - xp.log1p(s))}


class RationalQuadratic(sl.kernels.QuadratureSpectrum):
    """The rational quadratic kernel at chordal distance (its spectrum by the library's quadrature)."""

    shape_params = ("lengthscale", "alpha")
    lengthscale = Hyper(_positive, "lengthscale of the chordal distance")
    alpha = Hyper(_positive, "the mixture's shape: large alpha tends to the squared exponential")

    def __init__(self, lengthscale=1.0, alpha=1.0, variance=1.0, bias=1.0, input_scale=1.0):
        self.lengthscale, self.alpha = lengthscale, alpha
        super().__init__(variance, bias, input_scale)

    def unit_shape(self, t, ops):
        return rq_parts(np, t, self.lengthscale, self.alpha)[0]

    def unit_shape_dt(self, t, ops):
        return rq_parts(np, t, self.lengthscale, self.alpha)[1]

    def unit_shape_gradients(self, t, ops):
        return rq_parts(np, t, self.lengthscale, self.alpha)[2]

    def unit_shape_all(self, t, ops):
        return rq_parts(np, t, self.lengthscale, self.alpha)


class WindowedPoints(sl.features.Features):
    r""":math:`u_m = \tfrac12(f(z_m + \delta) + f(z_m - \delta))`: with :math:`S = [Z + \delta; Z - \delta]`
    and :math:`W = \tfrac12[I; I]`, :math:`K_{uu} = W^\top k(S, S)W`, :math:`K_{uf} = W^\top k(S, X)`."""

    fields = Fields(config=("Z", "delta"))

    def __init__(self, Z, delta):
        self.Z, self.delta = np.array(Z, dtype=np.float64), np.array(delta, dtype=np.float64)

    @property
    def num_features(self):
        return self.Z.shape[0]

    def initialise(self, dim, rng):
        if self.Z.shape[1] + 1 != dim:
            raise ValueError(f"Z has {self.Z.shape[1]} columns but the data have {dim - 1}")

    def points(self):
        return np.vstack([self.Z + self.delta, self.Z - self.delta])

    def weights(self):
        return 0.5 * np.vstack([np.eye(self.num_features)] * 2)

    def _both(self, dS):
        M = self.num_features
        return dS[:M] + dS[M:]

    def Kuu(self, kernel, *, ops="cpu"):
        W = self.weights()
        return W.T @ kernel.K(self.points(), ops=ops) @ W

    def Kuf(self, kernel, X, *, ops="cpu"):
        return self.weights().T @ kernel.K(self.points(), X, ops=ops)

    def Kuu_gradients(self, kernel, G, *, ops="cpu"):
        W = self.weights()
        out, dS, _ = kernel.gradients_with_inputs(W @ (0.5 * (G + G.T)) @ W.T, self.points(), ops=ops)
        out["Z"] = self._both(dS)
        return out

    def Kuf_gradients(self, kernel, G, X, *, ops="cpu"):
        out, dS, dX = kernel.gradients_with_inputs(self.weights() @ G, self.points(), np.asarray(X), ops=ops)
        out["Z"], out["X"] = self._both(dS), dX
        return out

    def get_params(self):
        return self.Z.ravel().copy()

    def set_params(self, values):
        self.Z = np.asarray(values, dtype=np.float64).reshape(self.Z.shape).copy()

    def param_gradient(self, grads):
        return np.asarray(grads.get("Z", np.zeros_like(self.Z))).ravel()

    def has_device_columns(self, kernel):
        return isinstance(kernel, RationalQuadratic)

    def device_columns(self, kernel, ops):
        return WindowColumns(self, kernel, ops)


class WindowColumns:
    """The windows' columns of :math:`K_{fu}` on a device, a column source of the rows floor
    (:mod:`spherelab.rows.device`): the kernel's at the window ends, averaged; backwards, the
    kernel's sums by their names and the ends' lifted gradient as ``"sources"``."""

    def __init__(self, features, kernel, ops):
        self.features, self.kernel, self.S = features, kernel, features.points()
        r, U = kernel.lift(self.S, "Z")
        self.r, self.U = ops.to_device(r), ops.to_device(U)
        self.width, self.M = features.num_features, features.num_features

    def columns(self, ops, r, Xh):
        xp, k = ops.array_namespace(), self.kernel
        T = xp.clip(Xh @ self.U.T, -1.0, 1.0)
        parts = rq_parts(xp, T, k.lengthscale, k.alpha)
        KS = k.variance * (r[:, None] * self.r[None, :]) * parts[0]
        return (T, parts), 0.5 * (KS[:, :self.M] + KS[:, self.M:])

    def backward(self, ops, state, dK, r, Xh):
        xp, k = ops.array_namespace(), self.kernel
        T, (kap, kap_t, grads) = state
        G = 0.5 * xp.concatenate([dK, dK], axis=1)
        GR = G * (r[:, None] * self.r[None, :])
        sums = {"variance": xp.sum(GR * kap), **{name: k.variance * xp.sum(GR * g) for name, g in grads.items()}}
        A, B = k.variance * G * (kap - T * kap_t), k.variance * G * kap_t
        dX, dS = lifted_row_gradients(A, B, r, Xh, self.r, self.U)
        return dX, {**sums, "sources": dS}

    def source_gradients(self, dS, scale):
        return lift_backward_rows(self.S, dS, scale)

    def split(self, grads):
        return {"Z": self.features._both(grads["X"])}, None


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """The two classes in the persistence registry (the explicit list a model file may name)."""
    for name in ("RationalQuadratic", "WindowedPoints"):
        monkeypatch.setitem(sl.persistence.REGISTRY, name, __name__)


def _data(rng, n=60):
    X = rng.uniform(-1.5, 1.5, (n, 2))
    return X, np.sin(2.0 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)


def _kernel():
    return RationalQuadratic(0.9, 1.7, bias=0.8, input_scale=np.array([1.1, 0.9]))


class TestWindowedPointsUnderTheNewKernel(ModelContract):
    def make(self, rng, device="cpu"):
        X, y = _data(rng)
        return sl.OrthogonalSVGP(_kernel(), WindowedPoints(X[:6] + 0.05, [0.2, -0.1]), 0,
                                 sl.likelihoods.Gaussian(0.1), device=device), X, y


class TestWindowedPointsWithOrthogonalPoints(TestWindowedPointsUnderTheNewKernel):
    def make(self, rng, device="cpu"):
        X, y = _data(rng)
        return sl.OrthogonalSVGP(_kernel(), WindowedPoints(X[:6] + 0.05, [0.2, -0.1]), 3,
                                 sl.likelihoods.Gaussian(0.1), device=device), X, y


class TestVISHUnderTheNewKernel(ModelContract):
    fit_kwargs = {"maxiter": 30, "lift_maxiter": 20}

    def make(self, rng, device="cpu"):
        X, y = _data(rng)
        return sl.VISH(_kernel(), 4, sl.likelihoods.Gaussian(0.1), device=device), X, y


def test_every_gradient_entry_of_both_against_finite_differences():
    rng = np.random.default_rng(3)
    X, y = _data(rng)
    model = sl.OrthogonalSVGP(_kernel(), WindowedPoints(X[:5] + 0.05, [0.2, -0.1]), 2, sl.likelihoods.Gaussian(0.1))
    model.fit(X, y, optimize=False)
    model.m_u = model.m_u + 0.1  # away from q's optimum: every entry's gradient nonzero
    report = sl.testing.check_model_gradient(model, X, y)
    assert report.ok, report
    assert "alpha" in model.param_names


@pytest.mark.equality  # two orders of the same sums: run again under other chunks and threads
def test_on_a_device_the_rows_stay_there_and_alpha_comes_back_by_name(monkeypatch):
    """The rows floor's pass runs the test's own column source; the gradient equals the CPU's."""
    rng = np.random.default_rng(4)
    X, y = _data(rng, 80)
    feats = WindowedPoints(X[:6] + 0.05, [0.2, -0.1])
    cpu = sl.OrthogonalSVGP(_kernel(), feats, 0, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False)
    sim = sl.OrthogonalSVGP(_kernel(), WindowedPoints(feats.Z, feats.delta), 0, sl.likelihoods.Gaussian(0.1),
                            device="sim").fit(X, y, optimize=False)
    passes = []
    original = DeviceRows.gram
    monkeypatch.setattr(DeviceRows, "gram", lambda self, *a, **kw: passes.append(a) or original(self, *a, **kw))
    va, ga = cpu.elbo_and_gradient(X, y)
    vb, gb = sim.elbo_and_gradient(X, y)
    assert passes, "the device's evaluation did not take the rows floor"
    assert vb == pytest.approx(va, rel=1e-12)
    assert ga["alpha"] != 0.0 and gb["alpha"] == pytest.approx(ga["alpha"], rel=1e-10)
    for name in ga:
        assert np.allclose(gb[name], ga[name], rtol=1e-10, atol=1e-12), name


@pytest.mark.equality  # two orders of the same sums: run again under other chunks and threads
def test_a_dask_array_gives_the_bound_and_gradient_of_memory():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(5)
    X, y = _data(rng, 300)
    Xd, yd = da.from_array(X, chunks=(70, 2)), da.from_array(y, chunks=70)
    model = sl.OrthogonalSVGP(_kernel(), WindowedPoints(X[:6] + 0.05, [0.2, -0.1]), 0, sl.likelihoods.Gaussian(0.1))
    model.fit(X, y, optimize=False)
    va, ga = model.elbo_and_gradient(X, y)
    vb, gb = model.elbo_and_gradient(Xd, yd)
    # the same sums over 300 rows in another order: a few ulps of the terms' size
    assert vb == pytest.approx(va, rel=1e-12)
    for name in ga:
        assert np.allclose(gb[name], ga[name], rtol=1e-9, atol=1e-12), name
    vish = [sl.VISH(_kernel(), 4, sl.likelihoods.Gaussian(0.1)).fit(data, target, optimize=False)
            for data, target in ((X, y), (Xd, yd))]
    assert vish[1].elbo() == pytest.approx(vish[0].elbo(), rel=1e-12)


def test_no_library_file_names_the_new_kernel_or_features():
    lab = Path(sl.__file__).resolve().parent
    for path in lab.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "RationalQuadratic" not in text and "WindowedPoints" not in text, path
