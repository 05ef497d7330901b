"""benchmarks/RESULTS.md is generated from the dated log (never retyped): it is exactly what
``benchmarks/tools/record.py render`` gives, every log entry parses, and every current claim names
a command that exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("record", ROOT / "benchmarks" / "tools" / "record.py")
record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(record)


def test_results_md_is_the_render_of_the_log():
    assert (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8") == record.render()


def test_every_claim_is_measured_and_names_a_command_that_exists():
    current = record.current()
    assert set(current) == set(record.CLAIMS)
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    for claim, entry in current.items():
        scripts = re.findall(r"benchmarks/[\w/]+\.(?:py|sh)", entry["command"])
        makes = re.findall(r"\bmake ([\w-]+)", entry["command"])
        assert scripts or makes, (claim, entry["command"])
        assert all((ROOT / s).exists() for s in scripts), (claim, entry["command"])
        assert all(m in targets for m in makes), (claim, entry["command"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", entry["date"]) and entry["machine"], claim


def test_add_logs_a_run_and_makes_it_current(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "LOG", tmp_path)
    run = tmp_path / "run.txt"
    run.write_text("setting: 3\n| a | b |\n| --- | --- |\n| 1 | 2 |\n")
    first = record.add("harmonics", run, "first", "python benchmarks/speed/harmonics.py", "", "test machine",
                       "2026-01-01")
    second = record.add("harmonics", run, "second", "python benchmarks/speed/harmonics.py", "a note",
                        "test machine", "2026-01-02")
    assert first.name == "2026-01-01-harmonics.md" and second.exists()
    assert record.current()["harmonics"]["title"] == "second"
    text = record.render()
    assert "*second*" in text and "| 1 | 2 |" in text and "```\nsetting: 3\n```" in text
    record.add("-", run, "a comparison", "benchmarks/tools/compare_commits.sh HEAD 1 harmonics.py", "", "m",
               "2026-01-03")
    assert record.current()["harmonics"]["title"] == "second"  # log-only entries claim nothing
    # runs of one claim on one day: the tenth is the newest (by file name, '-10' and '-2' sort first)
    for n in range(2, 11):
        record.add("harmonics", run, f"run {n}", "python benchmarks/speed/harmonics.py", "", "m", "2026-01-04")
    assert record.current()["harmonics"]["title"] == "run 10"


# a decimal (with an exponent), a power of ten, a ratio with ×, or a number with thousands spaces
FIGURE = r"(?<![\w.])-?\d[\d ]*\.\d+(?:e-?\d+)?|(?<![\w.])\d+e-?\d+|\d[\d ]*\d×|\d+ \d{3}(?: \d{3})*"


def test_the_readme_quotes_each_claims_current_figures():
    """Every bullet of the README's results section names a claim, and every figure it quotes
    (a number with a decimal point, an exponent, a ×, or a thousands separator) is in that claim's
    current entry."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Accuracy and speed", 1)[1].split("\n## ", 1)[0]
    bullets = ["* " + b for b in section.split("\n* ")[1:]]
    assert len(bullets) >= 5
    current = record.current()
    for bullet in bullets:
        claims = re.findall(r"claims?\s+`([\w-]+)`", bullet)
        assert claims and all(c in current for c in claims), bullet
        body = " ".join(current[c]["body"] for c in claims)
        figures = re.findall(FIGURE, bullet.replace("$", ""))
        for figure in figures:
            plain = figure.replace("×", "").strip()
            variants = {plain, plain.replace(" ", ","), plain.replace(" ", "")}
            found = any(re.search(rf"(?<![\d.]){re.escape(v)}(?![\d])", body) for v in variants)
            assert found, f"{figure!r} of {bullet[:60]!r} is not in {claims}"


def test_the_readme_gpu_paragraph_quotes_measured_figures():
    """The paragraph under the rendered device check quotes only figures of those tables or of the
    logs it cites (no number typed by hand)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("The pass runs ")
    end = readme.find("\n\n", start)
    paragraph = readme[start:end if end >= 0 else None]
    tables = readme[readme.index("Device check, "):start]
    cited = re.findall(r"`(benchmarks/log/[^`]+\.md)`", paragraph)
    assert cited, "the paragraph cites the logs of its later runs"
    sources = tables + "".join((ROOT / c).read_text(encoding="utf-8") for c in cited)
    text = re.sub(r"`[^`]*`", "", paragraph)  # paths and code are not figures
    numbers = re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:e-\d+)?", text)
    assert len(numbers) >= 10
    for number in numbers:
        variants = {number, number.replace(",", ""), number.replace(",", " ")}
        assert any(re.search(rf"(?<![\d.]){re.escape(v)}(?![\d])", sources) for v in variants), number


def test_each_figure_is_drawn_from_its_claims_newest_log_entry():
    assert record.stale_figures() == []
    figures = record.FIGURES
    assert "frontier" in figures and "figures/frontier.svg" in record.render()


def test_the_frontier_figure_reads_every_contender_of_the_log_and_fits_the_screen(tmp_path, monkeypatch):
    import figures  # on the path through record.py

    body = record.current()["frontier"]["body"]
    panels = figures.frontier_curves(body)
    row = re.compile(r"\| [\w ()]+ \| .* \| [-0-9.]+ \|")
    rows = [line for line in body.split("\n") if line.startswith("| ") and row.match(line)]
    sampled = {line.split("|")[1].strip() for line in rows if re.fullmatch(r" [-0-9.]+ ", line.split("|")[3])}
    assert set().union(*(set(c) for c in panels.values())) == sampled  # every contender drawn, none made up
    for curves in panels.values():
        for points in curves.values():
            assert np.array(points).shape[1:] == (2,) and np.isfinite(np.array(points)).all()
    monkeypatch.setattr(figures, "FIGURE_DIR", tmp_path)
    entry = {**record.current()["frontier"], "file": "test.md"}
    path = figures.draw("frontier", entry)
    width = float(re.search(r'width="([\d.]+)pt"', path.read_text()).group(1))
    assert width <= 10 * 72  # 10 inches: 960 px, inside a notebook's output area at 1 280 px
    assert figures.drawn_from("frontier") == "drawn from benchmarks/log/test.md"
