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
    with sl.models.capped():  # a deliberately short fit: its limit is meant
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
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3).fit(X, y, maxiter=5)
    assert "OrthogonalSVGP.fit" in capsys.readouterr().err
    monkeypatch.setattr(P, "AFTER_SECONDS", 1e9)  # a short fit stays quiet
    with sl.models.capped():  # a deliberately short fit: its limit is meant
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


class Spy(P.Reporter):
    """A reporter that keeps what it is told."""

    def __init__(self):
        self.calls = []

    def start(self, desc, total, max_time):
        self.calls.append(("start", desc, total, max_time))

    def step(self, iteration, bound, elapsed, stage):
        self.calls.append(("step", iteration, bound, stage))

    def close(self):
        self.calls.append(("close",))


def test_a_reporter_is_told_each_fit_from_start_to_close_on_its_thread(data, capsys):
    X, y = data
    spy = Spy()
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, maxiter=7, max_time=60, progress=spy)
    assert spy.calls[0] == ("start", "OrthogonalSVGP.fit", 7, 60)
    steps = [c for c in spy.calls if c[0] == "step"]
    assert [c[1] for c in steps] == list(range(1, len(steps) + 1)) and 1 <= len(steps) <= 7
    assert steps[-1][2] == pytest.approx(model.elbo(), rel=1e-6)  # the bound, not the negated objective
    assert spy.calls[-1] == ("close",) and capsys.readouterr().err == ""  # no tqdm bar besides
    spy = Spy()
    sl.VISH(sl.kernels.Matern(1.5), 2).fit(X, y, progress=spy)
    assert spy.calls[0][:3] == ("start", "VISH.fit", None)
    assert {c[3] for c in spy.calls if c[0] == "step"} >= {"lift", "spectrum"}
    assert spy.calls[-1] == ("close",)


def test_a_reporter_is_closed_when_its_fit_fails(data):
    X, y = data

    class Failing(Spy):
        def step(self, *args):
            raise RuntimeError("the reporter's own failure")

    spy = Failing()
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3)
    with pytest.raises(RuntimeError, match="the reporter's own failure"):
        model.fit(X, y, maxiter=5, progress=spy)
    assert spy.calls[-1] == ("close",)


def test_a_reporter_must_implement_step():
    with pytest.raises(NotImplementedError, match="Bare must implement step"):
        type("Bare", (P.Reporter,), {})().step(1, 0.0, 0.0, None)


def test_one_time_left_under_max_time_and_an_automatic_bar_leaves_no_trace(data, capsys, monkeypatch):
    """Under ``max_time`` the bar shows the postfix's time left, not tqdm's estimate from the
    iteration limit besides it; a bar that appeared by itself is cleared when the fit ends, one
    asked for stays."""
    from tqdm import tqdm

    made = []
    real = tqdm.__init__

    def spy(self, *args, **kwargs):
        made.append(kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(tqdm, "__init__", spy)
    X, y = data
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, maxiter=7, max_time=60, progress=True)
    assert "{remaining}" not in made[-1]["bar_format"] and made[-1]["leave"] is True
    assert "<" not in capsys.readouterr().err.split("time left")[0].split("[")[-1]  # no "elapsed<remaining"
    monkeypatch.setattr(P, "_interactive", lambda: threading.current_thread() is threading.main_thread())
    monkeypatch.setattr(P, "AFTER_SECONDS", 0.0)
    with sl.models.capped():
        sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:6]), 3).fit(X, y, maxiter=5)
    assert made[-1]["leave"] is False and made[-1]["bar_format"] is None
