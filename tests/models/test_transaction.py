"""All-or-nothing fits: an exception anywhere inside a fit (KeyboardInterrupt, a numerical failure,
a failed Dask block) leaves the model — its kernel, likelihood, features and posterior, shared parts
included — exactly as before the fit: predictions bit for bit the same, an unfitted model still
unfitted; ``fit_report_["interrupted"]`` says what stopped it."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import hvgp_data, sine_data
from spherelab import kernels as K
from spherelab.features.harmonic import SphericalFeatures
from spherelab.linalg import NumericalFailure
from spherelab.models import capped, exact

G = sl.likelihoods.Gaussian


# model, the method to interrupt (patched on the class: raises at its 4th call), and the fit
CASES = {
    # (every evaluation of VISH's bound, in both stages of its fit, reads the features' prior variances)
    "vish fit": (lambda X: sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)), (SphericalFeatures, "Kuu_inverse_diag"),
                 capped()(lambda m, X, y: m.fit(X, y, maxiter=20, lift_maxiter=10))),
    "vish fit_svi": (lambda X: sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)), "features.Kuu_inverse_diag",
                     lambda m, X, y: m.fit_svi(X, y, iterations=20, batch_size=16)),
    "orthogonal fit (collapsed)": (lambda X: sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 4, G(0.1)),
                                   "_collapsed_elbo_and_gradient", capped()(lambda m, X, y: m.fit(X, y, maxiter=20))),
    "orthogonal fit (joint)": (lambda X: sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 4, G(0.1)),
                               "elbo_and_gradient", capped()(lambda m, X, y: m.fit(X, y, maxiter=20, collapsed=False))),
    "orthogonal fit_svi": (lambda X: sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 4, G(0.1)),
                           "elbo_and_gradient", lambda m, X, y: m.fit_svi(X, y, iterations=20, batch_size=16)),
    "activated fit": (lambda X: sl.ActivatedSVGP(K.ArcCosine(1), sl.ActivatedFeatures(sl.activations.ReLU(), 3, 3),
                                                 G(0.1)), "_collapsed_elbo_and_gradient",
                      capped()(lambda m, X, y: m.fit(X, y, maxiter=20))),
    "hvgp fit": (lambda X: sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, G(0.1)),
                 "_collapsed_elbo_and_gradient", capped()(lambda m, X, y: m.fit(X, y, maxiter=20))),
}

def _interrupt(monkeypatch, model, name, exc, after=3):
    """Patch method ``name`` of the model's class (``features.NAME``: of its features' class; a
    ``(class, NAME)`` pair: of that class, for a part a first fit has not built yet)."""
    if isinstance(name, tuple):
        cls, name = name
    else:
        owner, _, name = name.rpartition(".")
        cls = type(getattr(model, owner)) if owner else type(model)
    original = getattr(cls, name)
    calls = []

    def patched(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > after:
            raise exc
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, patched)
    return calls


def _fingerprint(model, Xs):
    mean, var = model.predict_f(Xs)
    return mean.tobytes() + var.tobytes()


# (a NumericalFailure inside an evaluation is a rejected trial point, not an interruption: the
# optimiser steps back; the ExactGP test below lets one through)
@pytest.mark.parametrize("exc", [KeyboardInterrupt(), MemoryError("injected"), RuntimeError("a Dask block failed")],
                         ids=["KeyboardInterrupt", "MemoryError", "failed block"])
@pytest.mark.parametrize("case", list(CASES))
def test_an_interrupted_fit_leaves_the_model_as_it_was(case, exc, monkeypatch):
    build, method, fit = CASES[case]
    X, y = hvgp_data(np.random.default_rng(0)) if "hvgp" in case else sine_data(50)
    model = build(X)
    fit(model, X, y)  # fitted once: the state to keep
    kernel = model.kernel
    Xs = X[:6] + 0.05
    before = _fingerprint(model, Xs)
    params = {k: np.array(v, copy=True) for k, v in model.get_params().items()}
    calls = _interrupt(monkeypatch, model, method, exc)
    with pytest.raises(type(exc)):
        fit(model, X[::-1].copy(), y[::-1].copy() + 0.3)
    assert len(calls) > 3  # the fit really ran (and moved parameters) before the interrupt
    monkeypatch.undo()
    assert model.kernel is kernel  # the same objects, their state restored
    assert _fingerprint(model, Xs) == before
    for k, v in model.get_params().items():
        assert np.array_equal(np.asarray(v), params[k]), k
    assert type(exc).__name__ in model.fit_report_["interrupted"]


@pytest.mark.parametrize("case", ["vish fit", "orthogonal fit (collapsed)", "hvgp fit"])
def test_an_interrupted_first_fit_leaves_the_model_unfitted(case, monkeypatch):
    build, method, fit = CASES[case]
    X, y = hvgp_data(np.random.default_rng(0)) if "hvgp" in case else sine_data(50)
    model = build(X)
    params = model.kernel.hyperparameters
    _interrupt(monkeypatch, model, method, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        fit(model, X, y)
    monkeypatch.undo()
    assert not model._initialised()
    with pytest.raises(RuntimeError, match="not fitted"):
        model.predict_f(X[:2])
    assert model.kernel.hyperparameters == params
    fit(model, X, y)  # and it fits normally afterwards
    assert np.all(np.isfinite(model.predict_f(X[:2])[0]))


def test_a_shared_kernel_is_restored_for_every_model_holding_it(monkeypatch):
    X, y = sine_data(50)
    kernel = K.Matern(1.5, 1.0)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        first = sl.VISH(kernel, 3, G(0.1)).fit(X, y, maxiter=10, lift_maxiter=5)
    second = sl.OrthogonalSVGP(kernel, sl.InducingPoints(X[:5]), 4, G(0.1))
    before = _fingerprint(first, X[:4])
    _interrupt(monkeypatch, second, "_collapsed_elbo_and_gradient", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        second.fit(X, y, maxiter=20)
    monkeypatch.undo()
    assert _fingerprint(first, X[:4]) == before


def test_exact_gp_fit_is_all_or_nothing(monkeypatch):
    X, y = sine_data(50)
    gp = sl.models.ExactGP(K.Matern(1.5), 0.1).fit(X, y)
    before = _fingerprint(gp, X[:4])
    from spherelab.models import exact

    def failing(*args, **kwargs):
        raise NumericalFailure("injected")

    monkeypatch.setattr(exact, "cho_solve", failing)  # after the new factor is assigned
    with pytest.raises(NumericalFailure):
        gp.fit(X[:30], y[:30])
    monkeypatch.undo()
    assert _fingerprint(gp, X[:4]) == before and gp._X.shape == (50, 2)


def test_a_user_s_own_attribute_is_kept_and_never_blocks_a_fit():
    """A user's attribute (a note on the model) neither blocks a fit nor is lost: a failed fit
    restores it with the rest, a successful one keeps it; the library itself sets only declared
    fields."""
    X, y = sine_data(40)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)).fit(X, y, maxiter=5, lift_maxiter=3)
    assert model.fields.undeclared(model) == []
    before = _fingerprint(model, X[:4])
    model.my_note = "run 3"
    bad = y[:30].copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="y"):
        model.fit(X[:30], bad, maxiter=5)
    assert _fingerprint(model, X[:4]) == before and model.my_note == "run 3"
    with sl.models.capped():
        model.fit(X[:30], y[:30], maxiter=5, lift_maxiter=3)
    assert model.stats.n == 30 and model.my_note == "run 3"
    assert model.fields.undeclared(model) == ["my_note"]


@pytest.mark.parametrize("failure", ["nan", "lengths", "interrupt"])
def test_a_failed_fit_leaves_an_exact_gp_that_fits_again(monkeypatch, failure):
    """After any failed fit (bad data, or a Ctrl-C inside the factorisation) the same object
    fits again, and its report is declared state."""
    X, y = sine_data(50)
    gp = sl.models.ExactGP(K.Matern(1.5, 1.0), 0.01).fit(X, y)
    before = _fingerprint(gp, X[:4])
    if failure == "nan":
        bad = y.copy()
        bad[0] = np.nan
        with pytest.raises(ValueError, match="y"):
            gp.fit(X, bad)
    elif failure == "lengths":
        with pytest.raises(ValueError, match="rows"):
            gp.fit(X, y[:-1])
    else:
        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(exact, "cho_solve", interrupted)
        with pytest.raises(KeyboardInterrupt):
            gp.fit(X[:30], y[:30])
        monkeypatch.undo()
    assert _fingerprint(gp, X[:4]) == before and "interrupted" in gp.fit_report_
    assert gp.fields.undeclared(gp) == []
    gp.fit(X[:30], y[:30])
    assert gp._X.shape == (30, 2) and gp.fit_report_["rows"] == 30 and "interrupted" not in gp.fit_report_


def test_an_exact_gp_saves_and_loads(tmp_path):
    X, y = sine_data(40)
    gp = sl.models.ExactGP(K.Matern(1.5, 1.0), 0.01).fit(X, y)
    gp.save(tmp_path / "gp.npz")
    loaded = sl.load(tmp_path / "gp.npz")
    assert isinstance(loaded, sl.models.ExactGP) and loaded.fit_report_ == gp.fit_report_
    np.testing.assert_array_equal(loaded.predict_y(X[:5])[0], gp.predict_y(X[:5])[0])
    unfitted = sl.models.ExactGP(K.Matern(1.5, 1.0), 0.01)
    unfitted.save(tmp_path / "u.npz")
    assert sl.load(tmp_path / "u.npz")._X is None
