"""The lab's Jupyter server settings (``make lab`` puts this folder on JUPYTER_CONFIG_PATH).

Notebooks are committed without outputs, so every save — JupyterLab's autosave included — writes
them without outputs, execution counts or per-run metadata: a Run All and a save leave
``git status`` clean. The outputs stay in the browser until the notebook is closed; the
documentation site (``make docs``) shows them executed."""

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def strip_outputs(model, **kwargs):
    """A ``pre_save_hook``: clear what a run adds to a notebook before it is written."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    notebook = model["content"]
    notebook["metadata"] = {"kernelspec": dict(KERNELSPEC)}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k == "tags"}


c = get_config()  # noqa: F821 -- defined by the config loader
c.ContentsManager.pre_save_hook = strip_outputs
