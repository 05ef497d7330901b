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
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert page == record.digest()  # the docs' results page: the headline tables, no notes
    assert len(page) < 0.4 * len(record.render()) and "log: `benchmarks/log/" not in page


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
    assert len(bullets) >= 4
    import readers  # on the path through record.py

    current, every = record.current(), record.entries()
    for bullet in bullets:
        claims = re.findall(r"claims?\s+`([\w-]+)`", bullet)
        assert claims and all(c in current for c in claims), bullet
        assert all(c in readers.FOR_READERS for c in claims), bullet  # on the docs' results page
        # a claim's newest run, and its summary over every run where it has one (the frontier's targets)
        body = " ".join(current[c]["body"] + (record.SUMMARIES[c]([e for e in every if e["claim"] == c])
                                               if c in record.SUMMARIES else "") for c in claims)
        figures = re.findall(FIGURE, bullet.replace("$", ""))
        for figure in figures:
            plain = figure.replace("×", "").strip()
            variants = {plain, plain.replace(" ", ","), plain.replace(" ", "")}
            found = any(re.search(rf"(?<![\d.]){re.escape(v)}(?![\d])", body) for v in variants)
            assert found, f"{figure!r} of {bullet[:60]!r} is not in {claims}"


def test_the_gpu_page_paragraph_quotes_measured_figures():
    """The paragraph under the rendered device check (the GPU task page) quotes only figures of
    those tables or of the logs it cites (no number typed by hand)."""
    readme = (ROOT / "docs" / "tasks" / "gpu.md").read_text(encoding="utf-8")
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


def _frontier_runs():
    return [e for e in record.entries() if e["claim"] == "frontier"]


def test_the_frontier_figure_reads_every_contender_of_the_log_and_fits_the_screen(tmp_path, monkeypatch):
    import figures  # on the path through record.py

    runs = _frontier_runs()
    panels = figures.frontier_curves(runs)
    row = re.compile(r"\| [A-Za-z][\w ()./-]* \| .* \| [-0-9.]+ \|")  # a contender's name, not the rule line
    for name, (title, curves) in panels.items():
        # the panel's split as its runs logged it: every contender drawn, none made up
        sampled = set()
        for e in runs:
            if f"### {title}:" in e["body"]:
                block = e["body"].split(f"### {title}:")[1].split("\n### ")[0]
                rows = [line for line in block.split("\n") if line.startswith("| ") and row.match(line)]
                sampled |= {line.split("|")[1].strip() for line in rows
                            if re.fullmatch(r" [-0-9.]+ ", line.split("|")[3])}
        assert set(curves) == sampled, name
        split_counts = [len(c[1]) for c in figures.frontier_runs(runs)[name].values()]
        assert len(curves) == max(split_counts)  # the split with the most contenders
        for points in curves.values():
            assert np.array(points).shape[1:] == (2,) and np.isfinite(np.array(points)).all()
    monkeypatch.setattr(figures, "FIGURE_DIR", tmp_path)
    path = figures.draw("frontier", [*runs[:-1], {**runs[-1], "file": "test.md"}])
    width = float(re.search(r'width="([\d.]+)pt"', path.read_text()).group(1))
    assert width <= 8.5 * 72  # 8.5 inches: 816 px, inside a notebook's output area at 1 280 px
    assert figures.drawn_from("frontier") == "drawn from benchmarks/log/test.md"


def test_the_frontier_spread_is_computed_from_each_splits_newest_run():
    import summaries

    def run(file, split, rows):
        table = "\n".join(f"| {label} | s | {t} | {nlpd} | 1.0 |" for label, t, nlpd in rows)
        return {"file": file, "claim": "frontier", "body": f"### power, split {split}: N = 1\n\n"
                "| contender | setting | fit s | test NLPD | test RMSE |\n| --- | --- | --- | --- | --- |\n" + table}

    old = run("a.md", 0, [("GPflow SGPR", 10.0, 0.0), ("spherelab x", 1.0, 9.0), ("spherelab y", 2.0, 0.3)])
    runs = [old,
            run("b.md", 0, [("GPflow SGPR", 10.0, 0.5), ("GPflow SGPR", 100.0, 0.2), ("spherelab x", 5.0, 0.1)]),
            run("c.md", 1, [("GPflow SGPR", 50.0, 0.4), ("spherelab x", 40.0, 0.6)])]
    text = summaries.frontier_spread(runs)
    assert "`a.md`, `b.md`, `c.md`" in text  # y's curve on split 0 is still a.md's
    line = next(x for x in text.split("\n") if x.startswith("| spherelab x"))
    # split 0: b.md's curve replaced a.md's, 0.1 reached at 5 s of SGPR's 100 s; split 1: never
    assert line == "| spherelab x | 0.1000 (0.05) | 0.6000 (-) | 0.3500 (0.3536) | 1 of 2 | 0.05 |"
    line = next(x for x in text.split("\n") if x.startswith("| spherelab y"))
    assert line == "| spherelab y | 0.3000 (-) |  | 0.3000 (-) | 0 of 1 | - |"  # against b.md's SGPR (0.2)
    assert "#### Every split" in record.render() and "splits reached" in record.render()


def test_the_targets_on_the_mean_over_splits_take_each_splits_best_sample_within_t():
    import summaries

    def run(file, split, rows):
        table = "\n".join(f"| {label} | s | {t} | {nlpd} | 1.0 |" for label, t, nlpd in rows)
        return {"file": file, "claim": "frontier", "body": f"### power, split {split}: N = 1\n\n"
                "| contender | setting | fit s | test NLPD | test RMSE |\n| --- | --- | --- | --- | --- |\n" + table}

    runs = [run("a.md", 0, [("GPflow SGPR", 100.0, 0.3), ("spherelab x", 1.0, 0.5), ("spherelab x", 4.0, 0.2),
                            ("spherelab x", 50.0, 0.1), ("spherelab z", 3.0, 0.9)]),
            run("b.md", 1, [("GPflow SGPR", 120.0, 0.5), ("spherelab x", 2.0, 0.6), ("spherelab x", 30.0, 0.4)]),
            run("c.md", 2, [("spherelab x", 1.0, 9.0)])]  # no SGPR on split 2: left out
    lines = summaries.frontier_means(runs).split("\n")
    # SGPR: mean 0.4 in 110 s; x: at 4 s (0.2 + 0.6) / 2 = 0.4 reaches it; z ran on split 0 only
    assert "| power | 0, 1 | 0.4000 | 110.0 | spherelab x | 0.4000 | 4.00 | 0.04 |" in lines
    assert not any("spherelab z" in x for x in lines)
    runs[1] = run("b.md", 1, [("GPflow SGPR", 120.0, 0.1), ("spherelab x", 2.0, 0.6)])
    assert "| power | 0, 1 | 0.2000 | 110.0 | spherelab x | - | - | - |" in summaries.frontier_means(runs).split("\n")
    assert "The targets on the mean over splits" in record.render()


def test_the_prior_change_is_computed_from_the_splits_where_both_priors_ran():
    import summaries

    def run(file, split, rows):
        table = "\n".join(f"| {label} | s | 1.0 | {nlpd} | 1.0 |" for label, nlpd in rows)
        return {"file": file, "claim": "frontier", "body": f"### power, split {split}: N = 1\n\n"
                "| contender | setting | fit s | test NLPD | test RMSE |\n| --- | --- | --- | --- | --- |\n" + table}

    kernel, features = summaries.PRIORS
    runs = [run("a.md", 0, [(kernel, 0.5), (features, 0.2)]), run("b.md", 1, [(kernel, 0.1), (features, 0.4)]),
            run("c.md", 2, [(features, -9.0)])]  # split 2: one prior only, left out
    line = next(x for x in summaries.prior_change(runs).split("\n") if x.startswith("| power"))
    assert line == "| power | 0, 1 | 0.3000 | 0.3000 | 1 of 2 |"
    assert "VISH's default prior" in record.render()


def test_results_speak_to_readers():
    """No development words, machine paths or captured warnings: papers by their authors, the
    warnings a run printed counted and left in the log."""
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    for pattern in (r"(?i)\bseed 00\d", r"(?i)\bissue \d", r"(?i)\bsession\b", r"(?<![\w.])/(work|tmp|home)/",
                    r"\.py:\d+: \w*Warning:"):
        assert not re.search(pattern, text), pattern


def test_for_readers_rejoins_a_table_a_warning_split():
    body = ("| a | b |\n| --- | --- |\n| 1 | 2 |\n```\n/work/main/lab/x.py:3: RuntimeWarning: careful\n"
            "  source line\n```\n| 3 | 4 |\n```\nspherelab from /tmp/bench/old/lab/spherelab\n```\nseed 001's table")
    out = record.for_readers(body)
    assert "| 1 | 2 |\n| 3 | 4 |" in out and "Warning" not in out and "(1 warning the run printed: in the log.)" in out
    assert "spherelab from old/lab/spherelab" in out and "Dutordoir et al.'s table" in out


def test_the_docs_results_page_holds_the_users_claims_and_no_logbook():
    """The documentation's results page: every claim a user relies on, each with its sentence, and
    none of the development log's (profiles, comparisons between versions), no commit hash, no
    before/after heading, no development word."""
    import readers  # on the path through record.py

    page = record.digest()
    headings = re.findall(r"^#{2,6} (.*)$", page, re.M)
    for claim, (sentence, _) in readers.FOR_READERS.items():
        assert f"### {record.CLAIMS[claim][1]}" in page and sentence in page, claim
    for claim, (_, what) in record.CLAIMS.items():
        if claim not in readers.FOR_READERS:
            assert f"### {what}\n" not in page, claim
    assert not re.search(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])", page)
    for line in headings:
        assert not re.search(r"(?i)\b(before|after|old|new)\b", line), line
    for pattern in (r"(?i)\bissue \d", r"(?i)\bsession\b", r"(?<![\w.])/(work|tmp|home)/", r"PYTHONPATH"):
        assert not re.search(pattern, page), pattern
