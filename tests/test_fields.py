"""State declared once (``spherelab._state.Fields``): the tables' semantics, the exact GP's table (it has no
SVI fit, so it is outside the model contract), the posterior cache following every field it depends on,
and the registry of saveable classes against the classes that exist."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import sine_data
from spherelab import kernels as K
from spherelab._state import Fields, Saveable


def test_a_subclass_table_extends_its_base_and_a_redeclared_entry_changes_role():
    base = Fields(config=("kernel",), data=("X=_X",), transient=("ops",))
    sub = base + Fields(fitted=("X=_X", "q"), cache={"post=_post": ("kernel", "q")})
    assert sub.entries("config") == ("kernel",)
    assert sub.entries("data") == ()
    assert sub.entries("fitted") == ("X", "q")
    assert sub.attributes() == {"kernel", "_X", "ops", "q", "_post", "_parameter_lock"}
    assert base.entries("data") == ("X",)  # the base's table is not changed
    assert (sub + Fields(fitted=("post=_post",))).entries("cache") == ()
    with pytest.raises(KeyError):  # a cache given another role keeps no dependencies
        (sub + Fields(fitted=("post=_post",))).depends("post")
    with pytest.raises(TypeError, match="roles"):
        Fields(derived=("x",))


class _Part(Saveable):
    fields = Fields(config=("a",), fitted=("w=_w",), cache={"c=_c": ("a", "w")})

    def __init__(self, a, w):
        self.a, self._w, self._c = a, np.asarray(w, dtype=float), None


def test_undeclared_attributes_are_found_and_the_fingerprint_follows_every_dependency():
    part = _Part(1.0, [1.0, 2.0])
    assert part._save_state() == {"a": 1.0, "w": part._w}
    assert part.fields.undeclared(part) == []
    part.extra = 3
    assert part.fields.undeclared(part) == ["extra"]
    key = part.fields.fingerprint(part, "c")
    assert part.fields.fingerprint(part, "c") == key
    part._w[1] = 2.5  # an in-place change of an array it depends on
    assert part.fields.fingerprint(part, "c") != key
    key = part.fields.fingerprint(part, "c")
    part.a = 1.5
    assert part.fields.fingerprint(part, "c") != key


def test_a_cached_value_is_computed_once_and_again_after_any_change_it_depends_on():
    part, calls = _Part(1.0, [1.0, 2.0]), []

    def compute():
        calls.append(1)
        return part.a * part._w.sum()

    assert part.fields.cached(part, "c", compute) == 3.0
    assert part.fields.cached(part, "c", compute) == 3.0 and len(calls) == 1
    part._w[0] = 2.0  # in place
    assert part.fields.cached(part, "c", compute) == 4.0 and len(calls) == 2
    part.a = 0.5
    assert part.fields.cached(part, "c", compute) == 2.0 and len(calls) == 3


def test_the_exact_gp_follows_a_kernel_changed_after_its_fit():
    """Its factor is a cache of the kernel, noise and data: a lengthscale set after the fit is
    what the next prediction and the log marginal likelihood use (they used the old factor
    beside the new kernel's cross-covariances)."""
    X, y = sine_data(30)
    gp = sl.models.ExactGP(K.Matern(1.5, 1.0), 0.1).fit(X, y)
    gp.kernel.lengthscale = 0.4
    fresh = sl.models.ExactGP(K.Matern(1.5, 0.4), 0.1).fit(X, y)
    for a, b in zip(gp.predict_f(X[:5]), fresh.predict_f(X[:5])):
        assert np.array_equal(a, b)
    assert gp.log_marginal_likelihood() == fresh.log_marginal_likelihood()


def test_phase_factors_follow_directions_changed_in_place():
    features = sl.PhaseTruncatedHarmonics(4, 3, 2, seed=0)
    before = [R.copy() for _, R, _, _ in features.factors()]
    V = features.directions[2]
    V[0] = V[1] + 0.5 * V[0]
    V[0] /= np.linalg.norm(V[0])
    fresh = sl.PhaseTruncatedHarmonics(4, 3, 2, seed=0)
    fresh.set_directions([D.copy() for D in features.directions])
    after = [R for _, R, _, _ in features.factors()]
    assert not np.allclose(before[2], after[2])
    for a, (_, b, _, _) in zip(after, fresh.factors()):
        assert np.array_equal(a, b)


def test_the_exact_gps_table_is_its_whole_state_and_its_data_are_always_saved(tmp_path):
    X, y = sine_data(30)
    gp = sl.models.ExactGP(K.Matern(1.5, 1.0), 0.1).fit(X, y)
    gp.noise = 0.2  # factorises again
    gp.predict_f(X[:3])
    assert gp.fields.undeclared(gp) == []
    assert gp.data_entries() == ()  # X and y are its posterior: fitted, not optional data
    sl.save(gp, tmp_path / "gp.npz")
    loaded = sl.load(tmp_path / "gp.npz")
    assert loaded.fields.undeclared(loaded) == []
    assert np.array_equal(loaded.predict_f(X[:4])[0], gp.predict_f(X[:4])[0])


def test_the_posterior_cache_follows_a_part_changed_in_place():
    """VISH's cache key is its table's list of dependencies: a likelihood, kernel or statistics changed
    after a fit, by assignment or in place, is seen by the next prediction."""
    X, y = sine_data(60)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = sl.VISH(K.Matern(1.5, 1.0), 4).fit(X, y, maxiter=5, train_lift=False)
    _, v0 = model.predict_f(X[:5])
    model.likelihood.variance = 2.0 * model.likelihood.variance
    _, v1 = model.predict_f(X[:5])
    assert not np.allclose(v0, v1)
    model.stats.G[0, 0] += 1.0  # in place: the key holds the arrays' bytes, not their identity
    _, v2 = model.predict_f(X[:5])
    assert not np.allclose(v1, v2)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


#: saveable bases a file never names (each has subclasses that it does)
_BASES = {"Model", "SparseModel", "Features", "SphericalFeatures", "Group", "Likelihood", "ZonalKernel",
          "QuadratureSpectrum", "SpectralKernel", "WrappedKernel", "Activation"}


def test_the_registry_holds_every_saveable_class_of_spherelab_and_nothing_else():
    from spherelab.persistence import REGISTRY

    found = {c.__name__: c.__module__ for c in _subclasses(Saveable)
             if c.__module__.startswith("spherelab.") and c.__name__ not in _BASES}
    assert found == REGISTRY
