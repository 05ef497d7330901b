"""The contract every model keeps, as a test case to subclass (GPyTorch ships its
``VariationalTestCase`` the same way): a subclass gives :meth:`ModelContract.make` and every
``test_*`` method runs under pytest (or any runner that collects classes named ``Test*``).

Checked: clear errors before ``fit`` and for bad input, the parameter registry's round trip and
validation, the objective's gradient in sampled directions (:func:`~.gradients.check_model_gradient`),
``fit`` raising the bound and returning self, ``fit_svi`` running and returning self, prediction
shapes, the posterior following a changed hyper-parameter, a save/load round trip that predicts
bit for bit as before, and the bound and gradient on ``device="sim"`` (the CUDA kernels in
numba-cuda's simulator) equal to the CPU's. No pytest import: failures are ``AssertionError``,
skips ``unittest.SkipTest``.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import unittest
from typing import Any, Iterator

import numpy as np

from .gradients import check_model_gradient

__all__ = ["ModelContract"]


@contextlib.contextmanager
def _raises(kind: type, match: str) -> Iterator[None]:
    try:
        yield
    except kind as exc:
        if not re.search(match, str(exc)):
            raise AssertionError(f"{kind.__name__} raised, but its message {str(exc)!r} does not match {match!r}")
        return
    raise AssertionError(f"{kind.__name__} (matching {match!r}) not raised")


def _capped():
    """:func:`spherelab.models.capped`: a contract's fits stop at their limits by design."""
    from ..models.report import capped

    return capped()


class ModelContract:
    """Subclass and define :meth:`make`; ``fit_kwargs`` / ``svi_kwargs`` go to the short fits,
    ``gaussian = False`` for a likelihood whose predictive adds no noise variance.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> class TestMyModel(sl.testing.ModelContract):
    ...     def make(self, rng, device="cpu"):
    ...         X = rng.standard_normal((30, 2))
    ...         y = np.sin(X[:, 0])
    ...         return sl.OrthogonalSVGP(sl.kernels.Matern(2.5), sl.InducingPoints(X[:5] + 0.1), 2,
    ...                                  device=device), X, y
    >>> TestMyModel().test_fit_raises_the_bound_and_returns_self()
    """

    fit_kwargs: dict = {"maxiter": 30}
    svi_kwargs: dict = {"iterations": 5, "batch_size": 16}
    gaussian = True
    seed = 7

    def make(self, rng: np.random.Generator, device: str = "cpu") -> tuple[Any, np.ndarray, np.ndarray]:
        """An unfitted model on ``device`` and its training data ``(model, X, y)``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def setup(self, device: str = "cpu"):
        rng = np.random.default_rng(self.seed)
        model, X, y = self.make(rng, device)
        return model, X, y, rng

    def initialised(self, model, X, y):
        return model.fit(X, y, optimize=False)

    # ---- errors before fit, bad input -----------------------------------------------------
    def test_runtime_error_before_fit(self):
        model, X, y, _ = self.setup()
        for call in (lambda: model.predict_f(X), model.elbo, model.get_params):
            with _raises(RuntimeError, "fit"):
                call()

    def test_bad_input_is_named(self):
        model, X, y, _ = self.setup()
        with _raises(ValueError, "rows|values"):
            model.fit(X, y[:-1])
        bad = X.copy()
        bad[0, 0] = np.nan
        with _raises(ValueError, "NaN"):
            model.fit(bad, y)
        self.initialised(model, X, y)
        with _raises(ValueError, "columns|shape"):
            model.predict_f(np.ones((3, X.shape[1] + 1)))
        with _raises(ValueError, "NaN"):
            model.predict_f(bad)

    def test_wrong_likelihood_is_a_type_error(self):
        model, *_ = self.setup()
        with _raises(TypeError, "likelihood"):
            type(model)._set_likelihood(model, "gaussian")

    # ---- registry -------------------------------------------------------------------------
    def test_parameter_round_trip(self):
        model, X, y, rng = self.setup()
        self.initialised(model, X, y)
        theta = model.parameter_vector()
        params = model.get_params()
        assert list(params) == model.param_names
        model.set_parameter_vector(theta + 0.01 * rng.standard_normal(theta.size))
        model.set_params(**params)
        assert np.allclose(model.parameter_vector(), theta, rtol=1e-12, atol=1e-12)
        model.set_parameter_vector(theta)
        assert np.allclose(model.parameter_vector(), theta, rtol=1e-13, atol=1e-13)
        with _raises(ValueError, "unknown parameter"):
            model.set_params(no_such_parameter=1.0)
        variance = model.kernel.spectral_parameter_names[0]  # an additive kernel's: c0_variance
        with _raises(ValueError, "variance must be > 0"):
            model.set_params(**{variance: -1.0})
        with _raises(ValueError, "shape"):
            model.set_params(**{variance: np.ones(3)})

    def test_gradient_in_sampled_directions(self):
        model, X, y, _ = self.setup()
        self.initialised(model, X, y)
        check = check_model_gradient(model, X, y, directions=6, rtol=1e-5, atol=1e-6)
        assert check.ok, str(check)

    # ---- fit and predict ------------------------------------------------------------------
    def test_fit_raises_the_bound_and_returns_self(self):
        model, X, y, _ = self.setup()
        before = self.initialised(model, X, y).elbo()
        with _capped():  # the contract's fits are short by design: their limit is meant
            assert model.fit(X, y, **self.fit_kwargs) is model
        assert model.elbo() > before

    def test_fit_svi_returns_self_and_predicts(self):
        model, X, y, _ = self.setup()
        with _capped():
            assert model.fit_svi(X, y, **self.svi_kwargs) is model
        mean, var = model.predict_f(X[:4])
        assert np.all(np.isfinite(mean)) and np.all(var >= 0)

    def test_predict_shapes(self):
        model, X, y, rng = self.setup()
        self.initialised(model, X, y)
        Xs = rng.standard_normal((7, X.shape[1]))
        mean, var = model.predict_f(Xs)
        assert mean.shape == var.shape == (7,) and np.all(var >= 0)
        my, vy = model.predict_y(Xs)
        assert my.shape == vy.shape == (7,)
        if self.gaussian:
            assert np.all(vy > var)

    def test_posterior_follows_a_changed_hyper_parameter(self):
        model, X, y, _ = self.setup()
        self.initialised(model, X, y)
        _, v0 = model.predict_f(X[:5])
        variance = model.kernel.spectral_parameter_names[0]
        model.kernel.set_hyper(variance, 2.0 * model.kernel.get_hyper(variance))
        _, v1 = model.predict_f(X[:5])
        assert not np.allclose(v0, v1)

    def test_save_and_load_predict_as_before(self):
        from .. import load

        model, X, y, _ = self.setup()
        with _capped():
            model.fit(X, y, **self.fit_kwargs)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.npz")
            model.save(path)
            loaded = load(path)
        assert type(loaded) is type(model)
        for a, b in zip(model.predict_f(X[:6]), loaded.predict_f(X[:6])):
            assert np.array_equal(a, b)

    def test_every_field_is_declared_once(self):
        """The :class:`~spherelab._state.Fields` tables of the model and of every part it reaches
        (features, likelihood, statistics) are the whole of their state: what they hold after a fit, an
        SVI fit, a prediction and a reload is declared there, and what the model saves is exactly its
        saved fields (so save/load, the cache key, the transaction and the workers' copies see one list)."""
        from .. import load
        from ..concurrency import reachable

        def undeclared(model):
            return {type(part).__name__: part.fields.undeclared(part) for part in reachable(model)
                    if getattr(part, "fields", None) is not None and part.fields.undeclared(part)}

        model, X, y, _ = self.setup()
        with _capped():
            model.fit(X, y, **self.fit_kwargs)
        model.predict_f(X[:3])
        assert not undeclared(model), undeclared(model)
        with _capped():
            model.fit_svi(X, y, **self.svi_kwargs)
        model.predict_y(X[:3])
        assert not undeclared(model), undeclared(model)
        assert tuple(model._save_state()) == model.fields.entries(*model.fields.SAVED)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.npz")
            model.save(path, include_data=True)
            loaded = load(path)
        assert not undeclared(loaded), undeclared(loaded)
        for entry in model.fields.entries("data"):
            assert np.array_equal(loaded.fields.read(loaded, entry), model.fields.read(model, entry))

    def test_simulated_device_gives_the_cpus_bound_and_gradient(self):
        from ..backend.ops import simulator_enabled

        if not simulator_enabled():
            raise unittest.SkipTest("numba-cuda's simulator is off (NUMBA_ENABLE_CUDASIM=1 before Python starts)")
        cpu, X, y, _ = self.setup("cpu")
        sim = self.make(np.random.default_rng(self.seed), "sim")[0]
        self.initialised(cpu, X, y)
        self.initialised(sim, X, y)
        theta = cpu.parameter_vector()
        value_cpu, grad_cpu = cpu.objective(theta, X, y)
        value_sim, grad_sim = sim.objective(theta, X, y)
        assert abs(value_sim - value_cpu) <= 1e-10 * max(1.0, abs(value_cpu))
        assert np.max(np.abs(grad_sim - grad_cpu), initial=0.0) <= 1e-10 * max(1.0, np.max(np.abs(grad_cpu)))
