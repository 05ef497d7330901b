"""spherelab.fit: the budget held, the choice made on held-out training rows only (a spy on every
prediction made while choosing), the report, and the estimator."""

from __future__ import annotations

import time

import numpy as np
import pytest
import spherelab as sl


def _data(rng, n=1500, D=3):
    X = rng.normal(size=(n, D))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.3 * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def test_the_budget_is_held_and_reported(rng):
    X, y = _data(rng)
    sl.selection.warm()  # the kernels loaded (a test worker's first fit), as sl.warmup() does
    t = time.perf_counter()
    model = sl.fit(X, y, seconds=6.0)
    elapsed = time.perf_counter() - t
    assert elapsed <= 1.1 * 6.0 + 0.5  # (the half second: importing and checking, outside the clock)
    report = model.fit_report_["budget"]
    assert report["elapsed"] <= 1.1 * 6.0
    assert report["warm-up"] == 0.0  # once per process
    names = [t["model"] for t in report["tried"]]
    assert report["chosen"] in names
    assert "validation NLPD" in report["why"] or "fastest" in report["why"]
    best = min(report["tried"], key=lambda t: t["validation nlpd"])
    assert report["chosen"] == best["model"] or "fits in" in report["why"]
    assert any("neighbours" in n for n in names) and any("VISH" in n for n in names)


@pytest.mark.slow
def test_after_the_warm_up_a_budget_fit_compiles_and_loads_no_kernel(tmp_path):
    """warm() runs a few iterations of each candidate's fit: in a fresh process, a budget fit
    after it loads no Numba kernel (its seconds are spent fitting)."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "warm.py"
    script.write_text(
        "import numpy as np, spherelab as sl\n"
        "from numba.core import dispatcher\n"
        "sl.selection.warm()\n"
        "loaded, original = [], dispatcher.Dispatcher._compile_for_args\n"
        "def spy(self, *a, **k):\n"
        "    loaded.append(self.py_func.__qualname__)\n"
        "    return original(self, *a, **k)\n"
        "dispatcher.Dispatcher._compile_for_args = spy\n"
        "rng = np.random.default_rng(1)\n"
        "X = rng.standard_normal((400, 3)); y = np.sin(X @ np.ones(3)) + 0.1 * rng.standard_normal(400)\n"
        "sl.fit(X, y, seconds=2.0)\n"
        "print('loaded:', sorted(set(loaded)))\n")
    lab = Path(__file__).resolve().parents[2] / "lab"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(lab)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "loaded: []" in out.stdout, out.stdout


def test_the_choice_never_sees_rows_it_was_not_given(monkeypatch, rng):
    X, y = _data(rng, 800)
    Xtest = rng.normal(size=(200, 3)) + 10.0  # rows the fit is never given
    seen = []
    for cls in (sl.VISH, sl.OrthogonalSVGP, sl.models.NeighbourResidual):
        original = cls.predict_y

        def spy(self, Xq, original=original):
            seen.append(np.asarray(Xq))
            return original(self, Xq)

        monkeypatch.setattr(cls, "predict_y", spy)
    sl.fit(X, y, seconds=3.0)
    assert seen, "the chooser predicted nothing"
    rows = {r.tobytes() for r in X}
    for block in seen:
        assert all(r.tobytes() in rows for r in block), "a row outside the training rows reached the chooser"
        assert not np.any(np.isin(block, Xtest))


def test_few_rows_take_the_smallest_model(rng):
    X = rng.normal(size=(25, 2))
    y = X[:, 0] + 0.5 * X[:, 1] + 0.01 * rng.normal(size=25)
    model = sl.fit(X, y, seconds=2.0)
    assert isinstance(model, sl.VISH) and "too few" in model.fit_report_["budget"]["why"]


def test_the_estimator_recommends_and_predicts(rng):
    pytest.importorskip("sklearn")
    from spherelab.estimators import BudgetRegressor

    X, y = _data(rng, 1200)
    est = BudgetRegressor(seconds=4.0).fit(X[:1000], 3.0 + 2.0 * y[:1000])
    assert est.choice_ == est.model_.fit_report_["budget"]["chosen"]
    assert est.score(X[1000:], 3.0 + 2.0 * y[1000:]) > 0.8


def test_arguments_are_checked(rng):
    X, y = _data(rng, 100)
    with pytest.raises(ValueError, match="seconds"):
        sl.fit(X, y, seconds=-1.0)
    with pytest.raises(ValueError, match="validation"):
        sl.fit(X, y, validation=0.7)
