"""Fits that talk: progress=True draws a bar (iteration, bound, stage), None waits a few seconds and
only in an interactive session's main thread, False never."""

from __future__ import annotations

import threading

import pytest
import spherelab as sl
from spherelab import progress as P


@pytest.fixture(scope="module")
def data():
    return sl.datasets.synthetic_regression(200, 2, seed=0)


def test_true_draws_the_iterations_and_the_bound_of_every_fit(data, capsys):
    X, y = data
    sl.VISH(sl.kernels.Matern(1.5), 2).fit(X, y, progress=True)
    err = capsys.readouterr().err
    assert "VISH.fit" in err and "stage=spectrum" in err and "bound=" in err  # (tqdm shows a stage at most every 0.1 s)
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3)
    model.fit(X, y, maxiter=7, max_time=60, progress=True)
    err = capsys.readouterr().err
    assert "OrthogonalSVGP.fit" in err and "/7" in err and "time left" in err
    model.fit_svi(X, y, iterations=5, progress=True)
    assert "5/5" in capsys.readouterr().err
    sl.VISH(sl.kernels.Matern(1.5), 2).fit_svi(X, y, iterations=4, progress=True)
    assert "VISH.fit_svi" in capsys.readouterr().err


def test_none_is_quiet_outside_an_interactive_session_and_false_always(data, capsys):
    X, y = data
    sl.VISH(sl.kernels.Matern(1.5), 2).fit(X, y)
    sl.VISH(sl.kernels.Matern(1.5), 2).fit(X, y, progress=False)
    assert capsys.readouterr().err == ""


def test_none_shows_the_bar_once_a_fit_has_run_its_seconds(data, capsys, monkeypatch):
    X, y = data
    monkeypatch.setattr(P, "_interactive", lambda: threading.current_thread() is threading.main_thread())
    monkeypatch.setattr(P, "AFTER_SECONDS", 0.0)
    sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3).fit(X, y, maxiter=5)
    assert "OrthogonalSVGP.fit" in capsys.readouterr().err
    monkeypatch.setattr(P, "AFTER_SECONDS", 1e9)  # a short fit stays quiet
    sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3).fit(X, y, maxiter=5)
    assert capsys.readouterr().err == ""


def test_a_background_thread_never_opens_a_bar_by_itself(monkeypatch):
    monkeypatch.setattr(P, "AFTER_SECONDS", 0.0)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(P.FitProgress(None, "x").auto))
    worker.start()
    worker.join()
    assert seen == [False]


@pytest.mark.parametrize("bad", ["yes", 1, 0.5])
def test_progress_is_true_false_or_none(data, bad):
    X, y = data
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        sl.VISH(sl.kernels.Matern(1.5), 2).fit(X, y, progress=bad)
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3).fit(X, y, progress=bad)
