"""The lab's Jupyter server settings (``make lab`` puts this folder on JUPYTER_CONFIG_PATH).

Notebooks are committed without outputs, so every save — JupyterLab's autosave included — writes
them without outputs, execution counts or per-run metadata: a Run All and a save leave
``git status`` clean. The outputs stay in the browser until the notebook is closed; the
documentation site (``make docs``) shows them executed."""

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def strip_outputs(model, path=None, **kwargs):
    """A ``pre_save_hook``: clear what a run adds to a notebook before it is written — a notebook
    saved as a notebook, or as text (a ``.ipynb`` file written through the contents API as a file)."""
    if model.get("type") == "file" and str(path or model.get("path", "")).endswith(".ipynb") \
            and isinstance(model.get("content"), str) and model.get("format", "text") == "text":
        import nbformat

        try:
            notebook = nbformat.reads(model["content"], as_version=4)
        except Exception:  # noqa: BLE001 - not a notebook after all: saved as given
            return
        _strip(notebook)
        model["content"] = nbformat.writes(notebook) + "\n"  # as the server writes a notebook
        return
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    _strip(model["content"])


def _strip(notebook):
    notebook["metadata"] = {"kernelspec": dict(KERNELSPEC)}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k == "tags"}


def _stripping_manager():
    """The server's default contents manager with :func:`strip_outputs` registered once at
    construction (the ``pre_save_hook`` trait is validated each time the config is applied, and its
    second application printed "Overriding existing pre_save_hook")."""
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

    class StrippingContentsManager(AsyncLargeFileManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.register_pre_save_hook(strip_outputs)

    return StrippingContentsManager


c = get_config()  # noqa: F821 -- defined by the config loader
c.ServerApp.contents_manager_class = _stripping_manager()
