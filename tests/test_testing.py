"""The public gradient checker: steps relative to each parameter's scale, reported, and still able
to fail."""

import numpy as np
import pytest
import spherelab as sl


def _noisy_quadratic(scale, noise, rng=0):
    """A function whose values carry relative noise (like a fitted bound's Cholesky round-off) at
    a point of large coordinates."""
    gen = np.random.default_rng(rng)

    def f(x):
        value = float(np.sum((x / scale) ** 3)) * (1.0 + noise * gen.standard_normal())
        return value, 3.0 * x ** 2 / scale ** 3

    return f


def test_auto_step_follows_the_scale_where_a_fixed_step_fails():
    x = np.array([650.0, 30.0, 1.0])
    f = _noisy_quadratic(np.array([650.0, 30.0, 1.0]), 1e-10)
    fixed = sl.testing.checkgrad(f, x, step=1e-6, atol=1e-8)
    auto = sl.testing.checkgrad(f, x, atol=1e-8)
    assert not fixed.ok
    assert auto.ok, str(auto)
    assert auto.steps[0] > 10 * auto.steps[2]  # the step grew with the coordinate
    assert "step" in str(auto)


def test_auto_step_still_catches_a_wrong_gradient():
    f = lambda x: (float(np.sum(np.sin(x))), np.cos(x) * (1 + 1e-3))
    check = sl.testing.checkgrad(f, np.array([0.3, 200.0, -4.0]))
    assert not check.ok
    g = lambda x: (float(np.sum(np.sin(x))), np.cos(x))
    assert sl.testing.checkgrad(g, np.array([0.3, 200.0, -4.0])).ok


def test_a_fitted_model_at_large_hyper_parameters_checks_ok():
    X, y = sl.datasets.synthetic_regression(600, 3, seed=0)
    X, y = (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()
    model = sl.VISH(sl.kernels.Matern(1.5, 1.0), max_degree=5, prior="kernel").fit(X, y)
    model.set_params(variance=650.0, lengthscale=30.0)
    check = sl.testing.check_model_gradient(model, X[:200], y[:200], directions=5)
    assert check.ok, str(check)
    # the old fixed absolute step drowns in the bound's round-off at this point
    assert not sl.testing.check_model_gradient(model, X[:200], y[:200], directions=5, step=1e-6).ok
    assert check.steps.shape == (5,) and np.all(check.steps > 0)
    # the model is left at the point checked
    assert model.get_params()["variance"] == pytest.approx(650.0)


@pytest.mark.parametrize("step", ["big", -1.0, 0.0, float("nan")])
def test_a_bad_step_is_refused_by_name(step):
    f = lambda x: (float(np.sum(x ** 2)), 2 * x)
    with pytest.raises(ValueError, match="step"):
        sl.testing.checkgrad(f, np.ones(2), step=step)


def test_a_bad_point_is_refused_by_name():
    f = lambda x: (float(np.sum(x ** 2)), 2 * x)
    with pytest.raises(ValueError, match="x"):
        sl.testing.checkgrad(f, np.array([1.0, np.nan]))


def test_named_gradients_catch_one_wrong_entry_of_a_symmetric_matrix_and_a_tiny_positive_scale():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((4, 4))
    A = B @ B.T
    lam = np.array([1.0, 1e-6, 3.0])

    def value(A, lam):
        return float(np.sum(np.sin(A)) + np.sum(np.log(lam) * lam))

    grad = {"A": np.cos(A), "lam": np.log(lam) + 1.0}
    assert sl.testing.check_named_gradients(value, {"A": A, "lam": lam}, grad, symmetric=["A"], positive=["lam"]).ok
    wrong = {"A": np.cos(A).copy(), "lam": grad["lam"]}
    wrong["A"][1, 2] += 1e-3  # one entry, one side of the diagonal
    assert not sl.testing.check_named_gradients(value, {"A": A, "lam": lam}, wrong, symmetric=["A"],
                                                positive=["lam"]).ok
    off = {"A": grad["A"], "lam": grad["lam"] * np.array([1.0, 1.01, 1.0])}  # the 1e-6 scale's entry 1 % off
    assert not sl.testing.check_named_gradients(value, {"A": A, "lam": lam}, off, symmetric=["A"],
                                                positive=["lam"], rtol=1e-6, atol=1e-12).ok
