"""The README is executable documentation: every Python block runs as a script in a fresh process
(so its imports, guards and files are real), and where the README shows what it prints, the
output must be exactly that. Shell blocks name only make targets and files that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"```(\w+)\n(.*?)```\n", re.S)
#: documentation pages whose plain ``python`` blocks (scripts, not executed cells) run here too
SCRIPT_PAGES = ("docs/tasks/dask.md",)


def _blocks(text=README):
    """(language, code, printed output or None, line number) for every fenced block but outputs."""
    found = list(FENCE.finditer(text))
    out, skip = [], set()
    for i, m in enumerate(found):
        if i in skip or m.group(1) == "text":
            continue
        printed = None
        if m.group(1) == "python" and i + 1 < len(found):
            between = text[m.end():found[i + 1].start()]
            if found[i + 1].group(1) == "text" and between.strip() == "prints":
                printed, _ = found[i + 1].group(2), skip.add(i + 1)
        out.append((m.group(1), m.group(2), printed, text.count("\n", 0, m.start()) + 1))
    return out


BLOCKS = _blocks()
PAGES = [(page, b) for page in SCRIPT_PAGES for b in _blocks((ROOT / page).read_text(encoding="utf-8"))
         if b[0] == "python"]
PYTHON = [b for b in BLOCKS if b[0] == "python"]
SHELL = [b for b in BLOCKS if b[0] == "bash"]


def test_the_readme_has_its_blocks():
    assert len(PYTHON) >= 3 and len(SHELL) >= 1 and PAGES
    assert all(b[0] in ("python", "bash") for b in BLOCKS), "a block in another language: teach this test"


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON + [b for _, b in PAGES],
                         ids=[f"line{b[3]}" for b in PYTHON] + [f"{p}:line{b[3]}" for p, b in PAGES])
def test_python_block_runs_as_a_script(block, tmp_path):
    _, code, printed, line = block
    script = tmp_path / "readme_block.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": "default"}
    env.pop("PYTHONPATH", None)  # the installed package, as a user has it
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, f"README block at line {line} failed:\n{run.stderr[-3000:]}"
    assert "Warning" not in run.stderr, f"README block at line {line} warned:\n{run.stderr[-3000:]}"
    if printed is not None:
        assert run.stdout == printed, f"README block at line {line} printed:\n{run.stdout}"


def _make_targets():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, re.M))


@pytest.mark.parametrize("block", SHELL, ids=[f"line{b[3]}" for b in SHELL])
def test_shell_block_names_what_exists(block):
    _, code, _, line = block
    targets = _make_targets()
    for cmd in re.findall(r"\bmake ([\w-]+)", code):
        assert cmd in targets, f"README line {line}: make {cmd} is not a target"
    for path in re.findall(r"\b((?:benchmarks|tests|docs|notebooks|lab)/[\w./-]+\.\w+)", code):
        assert (ROOT / path).exists(), f"README line {line}: {path} does not exist"
