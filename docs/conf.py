"""Sphinx configuration of spherelab's documentation site (``make docs``).

The API reference is generated from the docstrings (autodoc + napoleon, NumPy style); the seven
notebooks are copied from ``../notebooks`` at each build and executed by MyST-NB (``make docs``
sets SPHERELAB_SMOKE=1: smoke size, a few minutes on two cores), as are the getting-started page
and the task pages (``tasks/``, text notebooks); the results page is generated with RESULTS.md by
``benchmarks/tools/record.py render`` (each claim's headline table, no notes)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "lab"))

import spherelab  # noqa: E402

project = "spherelab"
author = "the spherelab developers"
copyright = "2026, the spherelab developers"
release = version = spherelab.__version__

# MathJax from the site itself (sphinx-mathjax-offline copies it into _static): the pages render
# without reaching any server but the one that serves them
extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx-mathjax-offline", "sphinx.ext.viewcode", "myst_nb"]
# the API pages open with a table of their classes and functions (one line each), linking to the
# entries below it; no stub pages are generated
autosummary_generate = False
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "README.md"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

autodoc_default_options = {
    "members": True, "imported-members": True, "show-inheritance": True,
    # scikit-learn's generated metadata-routing methods: their docstrings point into its own docs
    "exclude-members": "set_fit_request,set_predict_request,set_score_request,set_partial_fit_request",
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autoclass_content = "both"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_ivar = True  # "Attributes" as fields: no second description beside the properties

# notebooks: executed at every build (no stored outputs in the repository), errors fail the build
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_merge_streams = True
# anything a page prints on stderr (a warning, a log line, a worker's complaint) is a build warning,
# so an error under -W: readers see no output they did not cause
nb_output_stderr = "warn"
nb_render_image_options = {"width": "100%"}

# the widgets' views are static in a documentation page: no widget manager from a CDN
nb_ipywidgets_js = {}

html_theme = "furo"
html_static_path = ["_static"]
html_favicon = "_static/favicon.svg"
html_title = f"spherelab {release}"
# ipywidgets' views render as static text; the generated results tables keep their own heading depths
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]


def _copy_notebooks(app):
    """The notebooks live in ../notebooks (the lab opens them there): copy them in for the build."""
    target = HERE / "notebooks"
    target.mkdir(exist_ok=True)
    for old in target.glob("*.ipynb"):
        old.unlink()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy(nb, target / nb.name)
    os.environ.setdefault("SPHERELAB_SMOKE", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")


def setup(app):
    app.connect("builder-inited", _copy_notebooks)
