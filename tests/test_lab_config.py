"""`make lab`'s Jupyter server writes notebooks without outputs: a notebook saved after a run, through
the server's contents API (what JupyterLab's save and autosave call), is byte-identical to the
committed one, so `git status` stays clean."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("jupyter_server")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    for p in NOTEBOOKS:
        shutil.copy(p, root / p.name)
    port, token = _free_port(), "spherelab-test"
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(ROOT / ".jupyter"),
           "JUPYTER_RUNTIME_DIR": str(root / ".runtime")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", f"--ServerApp.root_dir={root}", f"--ServerApp.port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
         "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("jupyter_server did not start:\n" + proc.stderr.read().decode()[-2000:])
            time.sleep(0.1)
    yield base, token, root
    proc.terminate()
    proc.wait(timeout=20)


def _save(base, token, name, content):
    body = json.dumps({"type": "notebook", "format": "json", "content": content}).encode()
    request = urllib.request.Request(f"{base}/api/contents/{name}?token={token}", data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status in (200, 201)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_a_run_notebook_saves_as_committed(server, path):
    base, token, root = server
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):  # what a Run All leaves in the document
        cell["source"] = "".join(cell["source"])  # JupyterLab sends each source as one string
        cell["metadata"]["execution"] = {"iopub.status.busy": "2026-11-26T00:00:00Z"}
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran\n"},
                               {"output_type": "display_data", "metadata": {},
                                "data": {"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="}}]
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.7"}
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    _save(base, token, path.name, nb)
    assert (root / path.name).read_bytes() == path.read_bytes()


@pytest.mark.parametrize("path", NOTEBOOKS[:2], ids=[p.name for p in NOTEBOOKS[:2]])
def test_a_run_notebook_saved_as_text_saves_as_committed(server, path):
    """The contents API also writes a ``.ipynb`` as a plain text file: the hook strips it too."""
    base, token, root = server
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran\n"}]
    nb["metadata"]["language_info"] = {"name": "python"}
    body = json.dumps({"type": "file", "format": "text", "content": json.dumps(nb)}).encode()
    request = urllib.request.Request(f"{base}/api/contents/{path.name}?token={token}", data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status in (200, 201)
    assert (root / path.name).read_bytes() == path.read_bytes()


def test_the_server_starts_without_a_word_about_the_hook(server, tmp_path):
    """The hook is registered once, by the lab's contents manager: setting the ``pre_save_hook``
    trait printed "Overriding existing pre_save_hook" at every ``make lab``."""
    port, env = _free_port(), {**os.environ, "JUPYTER_CONFIG_PATH": str(ROOT / ".jupyter"),
                               "JUPYTER_RUNTIME_DIR": str(tmp_path / ".runtime")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", f"--ServerApp.root_dir={tmp_path}", f"--ServerApp.port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=t", "--ServerApp.open_browser=False", "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started = False
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token=t", timeout=1)
            started = True
            break
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    err = proc.communicate(timeout=20)[1].decode()
    assert started, err[-2000:]
    assert "Overriding" not in err and "Warning" not in err, err[-2000:]


def test_the_lab_asks_no_news_question_on_its_first_start():
    """``make lab`` installs JupyterLab's admin overrides: no news feed toast, no update check; the
    settings are valid against JupyterLab's own schema."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    overrides = json.loads((root / ".jupyter" / "overrides.json").read_text())
    notification = overrides["@jupyterlab/apputils-extension:notification"]
    assert notification == {"checkForUpdates": False, "fetchNews": "false"}
    schema = Path(sys.prefix) / "share/jupyter/lab/schemas/@jupyterlab/apputils-extension/notification.json"
    if schema.exists():
        properties = json.loads(schema.read_text())["properties"]
        assert set(notification) <= set(properties)
        assert "false" in [c["const"] for c in properties["fetchNews"]["oneOf"]]
    assert "cp .jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/" in (root / "Makefile").read_text()
