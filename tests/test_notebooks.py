"""Execute every notebook in its small "smoke" size (SPHERELAB_SMOKE=1, non-GUI backend), or at full
size with SPHERELAB_NOTEBOOKS=full (``make test-notebooks-full``), then its checks
(tests/notebook_checks: every stated result, and the sliders' callbacks) in its kernel, at both sizes;
no error, no warning on stderr, no overlapping text in any figure. The sizes are chosen in one place
per notebook (``spherelab.widgets.notebook_sizes``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
CHECKS = Path(__file__).resolve().parent / "notebook_checks"


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    if os.environ.get("SPHERELAB_NOTEBOOKS") == "full":
        monkeypatch.delenv("SPHERELAB_SMOKE", raising=False)
    else:
        monkeypatch.setenv("SPHERELAB_SMOKE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    # the checks of what the notebook states, in its kernel after its last cell (the notebooks hold
    # narrative and calls; their checks live here, tests/notebook_checks/<notebook>.py)
    checks = CHECKS / f"{path.stem}.py"
    run = f"import runpy as _runpy\n_runpy.run_path({str(checks)!r})['check'](globals())"
    nb.cells.append(nbformat.v4.new_code_cell(run))
    # every figure the notebook drew: no text over another text or over a panel it does not label
    nb.cells.append(nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as _plt, spherelab as _sl\n"
        "_defects = {n: _sl.widgets.overlapping_text(_plt.figure(n)) for n in _plt.get_fignums()}\n"
        "assert not any(_defects.values()), {n: d for n, d in _defects.items() if d}\n"
        # and none wider than a 1 280-px window's output area leaves (the browser check measures it there)
        "_wide = {n: _plt.figure(n).get_figwidth() * _plt.figure(n).dpi for n in _plt.get_fignums()}\n"
        "assert all(w <= _sl.widgets.MAX_WIDTH_PX + 0.5 for w in _wide.values()), _wide"))
    client = nbclient.NotebookClient(
        nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors, [e.get("evalue", "") for e in errors]
    # nothing a student should not see: no warning, no traceback on stderr
    stderr = [out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out.get("name") == "stderr"]
    assert not [t for t in stderr if "Warning" in t or "Traceback" in t], stderr


def test_every_notebook_has_its_checks_and_no_test_scaffolding():
    assert {p.stem for p in CHECKS.glob("*.py")} == {p.stem for p in NOTEBOOKS}
    for p in NOTEBOOKS:
        code = "\n".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")
        assert "SMOKE" not in code and "assert " not in code, p.name


def test_notebooks_exist():
    names = {p.name for p in NOTEBOOKS}
    assert {"01_spherical_harmonics.ipynb", "02_spectra_mismatch.ipynb", "03_truncation.ipynb",
            "04_vish.ipynb", "05_orthogonal_basis.ipynb", "06_depth_and_phases.ipynb",
            "07_harmonic_decomposition.ipynb"} <= names
    for p in NOTEBOOKS:  # committed without outputs: narrative, not stale results
        nb = nbformat.read(p, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), p.name
