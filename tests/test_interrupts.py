"""Ctrl-C and fork at the edges of the concurrency contract (spherelab.concurrency): a SIGINT
delivered, as Python delivers it, at every point where the lock code (the locks, the transaction,
threading's Condition underneath) checks for signals — through a model's calls and a transaction,
at every such place's first three passes and its last — leaves every lock free, loses no
interrupt and leaves the model usable — predictions from another thread return, parameters can be set, an
interrupted fit restores the model bit for bit; a child forked while another thread fits predicts
like the model before that fit."""

from __future__ import annotations

import dis
import multiprocessing as mp
import os
import signal
import sys
import threading

import numpy as np
import pytest
import spherelab as sl
from conftest import fit_in_a_thread, resolved_file, sine_data
from spherelab import concurrency, critical, transaction
from spherelab import kernels as K
from spherelab.concurrency import ParameterLock, lock_of, reachable

G = sl.likelihoods.Gaussian
OURS = {os.path.realpath(m.__file__) for m in (concurrency, critical, transaction)}

THREADING = os.path.realpath(threading.__file__)

pytestmark = [pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                 reason="SIGINT is handled on the main thread"),
              pytest.mark.skipif(sys.version_info < (3, 11), reason="the signal check points of CPython 3.11+")]


@pytest.fixture(autouse=True)
def _pythons_own_sigint_handler():
    """Each test starts from Python's default SIGINT handler (the case spherelab's handler takes
    over): a library used by an earlier test in this process may have installed another."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler and not callable(previous):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if signal.getsignal(signal.SIGINT) is not previous and previous is not None:
        signal.signal(signal.SIGINT, previous)


_CALLS = {"CALL", "CALL_FUNCTION_EX", "CALL_KW"}
_OPNAMES: dict = {}


def _opnames(code) -> dict:
    if code not in _OPNAMES:
        _OPNAMES[code] = {i.offset: i.opname for i in dis.get_instructions(code)}
    return _OPNAMES[code]


_HANDLERS: dict = {}


def _handler(code, offset: int):
    """The exception handler covering ``offset`` (3.11's table has one entry per offset at most).
    The table is read once per code object: reading it is a disassembly, and this runs at every
    traced call."""
    if code not in _HANDLERS:
        _HANDLERS[code] = [(e.start, e.end, e.target) for e in dis.Bytecode(code).exception_entries]
    return next((target for start, end, target in _HANDLERS[code] if start <= offset < end), None)


def _sigint_at(k: int, scenario, roots=None, through=None, where=None) -> tuple[bool, bool, int]:
    """Run ``scenario()``, calling the SIGINT handler — as CPython does when a Ctrl-C has arrived —
    at the k-th point where CPython checks for signals in the lock code: a function's entry, the
    return from a call, a backward jump (CPython 3.11+ checks nowhere else, e.g. not between a
    ``with`` block's last statement and its ``__exit__`` call). Returns (fired, interrupted,
    points seen). A check after a call is raised with the frame still at the call; a tracer
    raises at the next instruction, which is the same place except where the call ends a
    protected block — those few points are left out. ``where``: a list that receives each
    point's location (code object, offset)."""
    seen, fired, last = [0], [False], {}

    def point(frame):
        if where is not None:
            where.append((frame.f_code, frame.f_lasti))
        if not fired[0]:
            if seen[0] == k:
                fired[0] = True
                signal.getsignal(signal.SIGINT)(signal.SIGINT, frame)  # raises, or holds it back
            seen[0] += 1

    def local(frame, event, arg):
        if event == "call":
            frame.f_trace_opcodes = True
            point(frame)
        elif event == "opcode":
            before = last.get(frame)
            last[frame] = frame.f_lasti
            if before is not None:
                name = _opnames(frame.f_code).get(before, "")
                skipped = name == "PRECALL" and frame.f_lasti != before + 4  # it made the call itself
                if name in _CALLS or skipped:
                    # CPython raises at the call itself: where the next instruction has another
                    # handler (the call ended a with block), a tracer cannot raise there; skipped
                    if _handler(frame.f_code, before) == _handler(frame.f_code, frame.f_lasti):
                        point(frame)
                elif name.startswith("JUMP_BACKWARD") and "NO_INTERRUPT" not in name:
                    point(frame)
        elif event == "return":
            last.pop(frame, None)
        return local

    def lock_code(frame):  # ours, or threading's under ours (a Condition the lock waits on)
        f = frame
        while f is not None:
            where = resolved_file(f.f_code.co_filename)
            if where in (roots or OURS):
                return True
            if where not in (through or {THREADING}):
                return False
            f = f.f_back
        return False

    def calls(frame, event, arg):
        if lock_code(frame):
            return local(frame, event, arg)
        return None

    interrupted = False
    sys.settrace(calls)
    try:
        scenario()
        sys.settrace(None)
        for _ in range(3):  # a Ctrl-C held back is raised at the latest when its region ends
            len(())
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sys.settrace(None)
    return fired[0], interrupted, seen[0]


def _all_free(objects) -> bool:
    return all(lock_of(o).free() for o in objects)


def _usable(model, Xs) -> None:
    """Another thread predicts (no lock left held), this thread writes (no read hold left)."""
    out = []
    t = threading.Thread(target=lambda: out.append(model.predict_f(Xs)))
    t.start()
    t.join(30)
    assert not t.is_alive() and out, "a prediction from another thread did not return"
    model.set_params(noise=model.get_params()["noise"])


def _fitted():
    X, y = sine_data(60)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        return sl.OrthogonalSVGP(K.Matern(1.5, 1.0), sl.InducingPoints(X[:6]), 4, G(0.1)).fit(X, y, maxiter=5), X, y


def _every_point(scenario, check, limit=4000, ends=None, stride=1, visits=None, **where):
    """Interrupt ``scenario`` at every check point — or, with ``ends``, at the first and last
    ``ends`` of them and every ``stride``-th between; or, with ``visits``, at every place where
    the lock code checks for signals, at its first ``visits`` passes and its last (a loop over
    the locks: after none, one and several were taken, and at its end), so each place is
    interrupted in each state it meets without repeating the middle of every loop
    (``where``: :func:`_sigint_at`'s ``roots`` and ``through``)."""
    places: list = []
    total = _sigint_at(-1, scenario, where=places, **where)[2]
    assert 0 < total < limit, total
    if visits is not None:
        passes: dict = {}
        for i, place in enumerate(places):
            passes.setdefault(place, []).append(i)
        chosen = {i for seen in passes.values() for i in seen[:visits] + seen[-1:]}
        assert {places[i] for i in chosen} == set(places)  # every place, at least once
        if ends is not None:
            chosen |= set(range(min(ends, total))) | set(range(max(0, total - ends), total))
        points = sorted(chosen)
    else:
        points = range(total) if ends is None else sorted(
            set(range(min(ends, total))) | set(range(max(0, total - ends), total)) | set(range(0, total, stride)))
    fired_count = 0
    for k in points:
        fired, interrupted, _ = _sigint_at(k, scenario, **where)
        if fired:
            fired_count += 1
            assert interrupted, f"the Ctrl-C at event {k} of {total} was lost"
        assert not critical.region.pending and not critical.region.depth, k
        check(k)
    assert fired_count >= len(points) - 2  # the timing of waits may shorten a run by a point or two
    return total


def test_the_handler_is_in_place_and_behaves_as_pythons_outside_critical_code():
    with ParameterLock().read():
        pass
    handler = signal.getsignal(signal.SIGINT)
    assert handler is not signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGINT, sys._getframe())


@pytest.mark.parametrize("nesting", ["read", "write", "write, then read", "read, read"])
def test_a_ctrl_c_anywhere_in_a_bare_lock_leaves_it_free(nesting):
    lock = ParameterLock()
    sides = [s.strip() for s in nesting.split(",")]
    sides = sides if len(sides) > 1 else sides * 1

    def scenario():
        first = lock.read() if sides[0] == "read" else lock.write()
        with first:
            if len(sides) > 1:
                with lock.read():
                    pass

    def check(k):
        assert lock.free(), k

    _every_point(scenario, check)


def test_a_ctrl_c_anywhere_while_waiting_for_a_lock_ends_the_wait_with_nothing_taken():
    lock = ParameterLock()

    def scenario():
        held, release = threading.Event(), threading.Event()

        def reader():
            with lock.read():
                held.set()
                release.wait(5)

        t = threading.Thread(target=reader)
        t.start()
        held.wait(5)
        threading.Timer(0.07, release.set).start()  # two of the waits' 0.05 s slices
        try:
            with lock.write():  # waits for the reader
                pass
        finally:
            release.set()
            t.join(5)

    def check(k):
        assert lock.free(), k

    _every_point(scenario, check)


@pytest.mark.parametrize("call", ["predict_f", "set_params", "kernel assignment", "get_params"])
def test_a_ctrl_c_anywhere_in_the_lock_code_of_a_call_leaves_the_model_usable(call):
    model, X, _ = _fitted()
    Xs = X[:5]
    params = model.get_params()
    scenario = {"predict_f": lambda: model.predict_f(Xs), "set_params": lambda: model.set_params(**params),
                "kernel assignment": lambda: setattr(model.kernel, "lengthscale", 1.0),
                "get_params": model.get_params}[call]

    def check(k):
        assert _all_free(reachable(model)), k

    _every_point(scenario, check, visits=3)
    _usable(model, Xs)


def _fingerprint(model, Xs):
    mean, var = model.predict_f(Xs)
    return mean.tobytes() + var.tobytes()


def test_a_ctrl_c_anywhere_in_a_transactions_code_leaves_the_model_before_or_after_it():
    model, X, _ = _fitted()
    Xs = X[:5]
    variance = model.get_params()["variance"]

    @transaction.transactional
    def change(m):  # a fit's shape: its locks, its record, a write, its end (the optimiser aside)
        m.set_params(variance=2 * variance)

    with sl.thread_limit(1):
        before = _fingerprint(model, Xs)
        change(model)
        after = _fingerprint(model, Xs)
        model.set_params(variance=variance)
        assert after != before

        def check(k):
            assert _all_free(reachable(model)), k
            assert _fingerprint(model, Xs) in (before, after), k  # as before the change, or changed
            model.set_params(variance=variance)
            assert not transaction._IN_FLIGHT.get(threading.get_ident()), k  # no record left behind

        # every place of its start (locks, record), of the record's copying and of its end (commit
        # or restore, locks), at its first three passes and its last
        _every_point(lambda: change(model), check, limit=20_000, visits=3)
        _usable(model, Xs)


# ---- fork --------------------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_during_a_fit_predicts_as_before_the_fit(monkeypatch):
    model, X, y = _fitted()
    Xs = X[:5]
    with sl.thread_limit(1):
        before = model.predict_f(Xs)
    fitting, inside = fit_in_a_thread(model, X, y, monkeypatch)
    assert inside.wait(30)
    pid = os.fork()
    if pid == 0:  # the child: a hang ends by the alarm, a wrong answer by the exit code
        code = 3
        try:
            signal.alarm(30)
            with sl.thread_limit(1):
                mean, var = model.predict_f(Xs)
                model.set_params(noise=0.2)  # no write lock left to a thread that does not exist here
            code = 0 if np.array_equal(mean, before[0]) and np.array_equal(var, before[1]) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    fitting.join(120)
    assert not fitting.is_alive()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


_GLOBAL: dict = {}


def _predict_global(_):
    with sl.thread_limit(1):
        return _GLOBAL["model"].predict_f(_GLOBAL["Xs"])[0]


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork start method")
def test_a_fork_started_pool_during_a_fit_returns(monkeypatch):
    model, X, y = _fitted()
    Xs = X[:5]
    with sl.thread_limit(1):
        before = model.predict_f(Xs)[0]
    _GLOBAL.update(model=model, Xs=Xs)
    fitting, inside = fit_in_a_thread(model, X, y, monkeypatch)
    assert inside.wait(30)
    try:
        with mp.get_context("fork").Pool(2) as pool:
            got = pool.map_async(_predict_global, range(2)).get(timeout=120)
    finally:
        fitting.join(120)
        _GLOBAL.clear()
    for g in got:
        assert np.array_equal(g, before)


def _raise_at(k: int, scenario, error) -> tuple[bool, int]:
    """Run ``scenario`` raising ``error`` at the ``k``-th line of the lock's own code
    (spherelab/concurrency.py), as an exception from an allocation would: whether it was raised,
    and the lines seen. Not at a line marked "(cannot fail" (it runs no instruction that can
    raise), nor at a ``with`` line reached again (the statement's exit: Python calls ``__exit__``
    whatever the body raised; the trace alone could skip it)."""
    import linecache

    seen, fired, visited = [0], [False], set()

    def local(frame, event, arg):
        text = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        here = (id(frame), frame.f_lineno)
        again = text.strip().startswith("with ") and here in visited
        visited.add(here)
        if event == "line" and "(cannot fail" not in text and not again:
            seen[0] += 1
            if seen[0] - 1 == k:  # once
                fired[0] = True
                raise error
        return local

    def calls(frame, event, arg):
        if resolved_file(frame.f_code.co_filename) not in OURS:
            return None
        visited.difference_update({v for v in visited if v[0] == id(frame)})  # a new frame, maybe at an old address
        return local

    sys.settrace(calls)
    try:
        scenario()
    except type(error):
        pass
    finally:
        sys.settrace(None)
    return fired[0], seen[0]


@pytest.mark.parametrize("error", [MemoryError("injected"), KeyboardInterrupt()])
@pytest.mark.parametrize("how", ["read", "write", "read in read", "bare lock"])
def test_an_exception_of_any_kind_anywhere_in_the_lock_leaves_nothing_held(how, error):
    """Not only a Ctrl-C (held back by the critical regions): an exception raised at any line of
    taking or giving back the locks — a MemoryError between taking a lock and counting it — leaves
    every lock free and no region open."""
    model, X, _ = _fitted()
    parts = concurrency.reachable(model)
    bare = ParameterLock()

    def scenario():
        if how == "bare lock":
            with bare.write():
                with bare.read():
                    pass
        elif how == "read in read":
            with concurrency.holding(model):
                with concurrency.holding(model):
                    pass
        else:
            with concurrency.holding(model, write=how == "write"):
                pass

    total = _raise_at(-1, scenario, error)[1]
    assert 10 < total < 2000, total
    for k in range(total):
        fired, _ = _raise_at(k, scenario, error)
        assert fired, k
        assert _all_free(parts) and bare.free(), f"a lock left held by the {type(error).__name__} at line {k}"
        assert not critical.region.depth and not critical.region.pending, k
    _usable(model, X[:4])
