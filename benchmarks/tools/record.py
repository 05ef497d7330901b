"""Benchmark results, recorded from a run's output and never retyped.

Every run goes to the dated log, ``benchmarks/log/DATE-NAME.md``: a header (the claim it measures,
if any, its title, the command that reproduces it, the date, the machine) and the run's output
verbatim — Markdown table rows and headings as they are, everything else in a fenced block.
``benchmarks/RESULTS.md`` is generated from the log: for each claim of :data:`CLAIMS`, the newest
run of it, with its command, date and machine. Nothing else writes RESULTS.md.

    python benchmarks/tools/record.py add CLAIM run.log --title "..." --command "python ..." [--note TEXT]
    python benchmarks/tools/record.py add - run.log --title "..." --command "..."   # log only, no claim
    python benchmarks/tools/record.py render            # rewrite RESULTS.md from the log
    python benchmarks/tools/record.py render --check    # exit 1 if RESULTS.md is not what the log gives
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from figures import FIGURES, draw, drawn_from, source_tag  # noqa: E402
from readers import FOR_READERS  # noqa: E402
from summaries import SUMMARIES  # noqa: E402

BENCHMARKS = HERE.parent
LOG = BENCHMARKS / "log"
RESULTS = BENCHMARKS / "RESULTS.md"
#: the documentation site's results page: each claim's headline table, no notes (generated too)
DIGEST = BENCHMARKS.parent / "docs" / "results.md"

#: claim -> (group, what it measures); RESULTS.md shows the groups and claims in this order
CLAIMS = {
    "accuracy": ("Paper reproductions and identities", "Gegenbauer, addition theorem and orthonormality against references"),
    "vish-table1": ("Paper reproductions and identities", "VISH, Dutordoir et al. 2020 Table 1 (features prior)"),
    "vish-uci": ("Paper reproductions and identities", "VISH on five UCI sets with the kernel prior"),
    "vish-degrees": ("Paper reproductions and identities", "VISH against M and wall time on kin8nm, power, protein"),
    "decoupled-uci": ("Paper reproductions and identities", "Activated features and the orthogonal basis on UCI (Tiao, thesis)"),
    "decoupled-snelson": ("Paper reproductions and identities", "The orthogonal basis on Snelson (Tiao, thesis Fig. 3.9)"),
    "phases-uci": ("Paper reproductions and identities", "Phase-truncated against full harmonics (Eleftheriadis et al. Fig. 2)"),
    "phases-uci-kernel": ("Paper reproductions and identities", "Phase-truncated against full harmonics under the kernel prior"),
    "phases-synthetic": ("Paper reproductions and identities", "Phase-truncated harmonics where Eleftheriadis et al. say they help"),
    "phases-susy": ("Paper reproductions and identities", "SUSY-like classification (Eleftheriadis et al. Table 1 protocol)"),
    "hvgp": ("Paper reproductions and identities", "HVGP against SVGP (Sun et al. 2021)"),
    "harmonics": ("Speed against peers and limits", "660 spherical harmonics at 10^5 points against a reference implementation"),
    "spectra": ("Speed against peers and limits", "Every spectrum a model needs, against scipy.quad"),
    "vish-scale": ("Speed against peers and limits", "VISH fit + predict up to 6 x 10^6 rows"),
    "vish-peers": ("Speed against peers and limits", "VISH against GPflow and GPyTorch on UCI"),
    "vish-peers-protein": ("Speed against peers and limits", "VISH against GPflow and GPyTorch on protein"),
    "vish-peers-synthetic": ("Speed against peers and limits", "VISH against GPflow and GPyTorch on synthetic data"),
    "vish-memory": ("Speed against peers and limits", "VISH.fit peak memory against N"),
    "vish-dask": ("Speed against peers and limits", "VISH on a Zarr store through a Dask cluster"),
    "vish-float32": ("Speed against peers and limits", "The float32 Gram pass"),
    "vish-float32-condition": ("Speed against peers and limits", "The float32 bound against the condition number"),
    "vish-parts": ("Speed against peers and limits", "Parts of a VISH fit"),
    "pass-breakdown": ("Speed against peers and limits", "One core's time in the statistics pass"),
    "chunk-sweep": ("Speed against peers and limits", "The statistics pass against its chunk size"),
    "frontier": ("Speed against peers and limits", "Test NLPD against wall time on UCI, every contender in one run"),
    "targets": ("Speed against peers and limits", "The best test NLPD within a time budget: spherelab.fit against GPflow's SGPR"),
    "additive-uci": ("Paper reproductions and identities", "Additive structure on UCI: chosen pairs against all harmonics"),
    "capacity": ("Speed against peers and limits", "Capacity and locality on power and protein: fixed and trained inducing points, neighbours"),
    "decoupled-throughput": ("Speed against peers and limits", "Decoupled-model throughput against GPflow"),
    "decoupled-dask": ("Speed against peers and limits", "A decoupled model's ELBO + gradient on Dask against memory"),
    "decoupled-profile": ("Speed against peers and limits", "Where a decoupled model's ELBO + gradient spends its time"),
    "rows-floor": ("Speed against peers and limits", "The rows floor's one loop on the host against the passes it replaced"),
    "vish-pass": ("Speed against peers and limits", "VISH's pass over every row on the one loop against the pass it replaced"),
    "matern-loops": ("Speed against peers and limits", "The host's Matérn loops: a call-free exp against libm's"),
    "threads": ("Speed against peers and limits", "The thread policy, idle and under load"),
    "threading-layer": ("Speed against peers and limits", "Numba's threading layer: OpenMP against TBB"),
    "notebook-redraw": ("Speed against peers and limits", "Notebook explorers' redraw latency"),
    "browser": ("Speed against peers and limits", "Every notebook in Chromium"),
    "gpu-check": ("The GPU device check", "The device check on a lent GPU"),
    "device-profile": ("The GPU device check", "Where a device's time goes in the steps the check found slow"),
    "device-vish": ("The GPU device check", "VISH's fit on a card with its lift stage kept on the device"),
    "robustness-census": ("Robustness and analyses", "Robustness census: bad input against clear errors"),
    "matern-ridge": ("Robustness and analyses", "Why a default VISH fit can run away to a huge variance"),
    "hybrid-bound": ("Robustness and analyses", "What spherical harmonics add to inducing points (the hybrid's bound)"),
}
FIELDS = ("claim", "title", "command", "date", "machine")


def render_output(lines: list[str]) -> str:
    """A run's output as Markdown: table rows, blank lines and headings of two or more hashes stay
    Markdown (a run's own ``## `` headings become ``#### ``), everything else is fenced."""
    out, fenced = [], False
    for line in lines:
        markdown = line.startswith(("|", "##")) or not line.strip()  # "# ..." is a script's comment
        if markdown and fenced:
            out.append("```")
            fenced = False
        if not markdown and not fenced:
            out.append("```")
            fenced = True
        if line.startswith("## "):
            line = "#### " + line[3:]
        if markdown and line.startswith("####") and out and out[-1].strip():
            out.append("")
        out.append(line)
    if fenced:
        out.append("```")
    return "\n".join(out)


def parse_entry(path: Path) -> dict:
    """A log file's header fields and body."""
    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    if not match:
        raise ValueError(f"{path}: no header block (---, claim/title/command/date/machine, ---)")
    header = dict(line.split(": ", 1) for line in match.group(1).split("\n"))
    missing = [f for f in FIELDS if f not in header]
    if missing:
        raise ValueError(f"{path}: header lacks {missing}")
    if header["claim"] != "-" and header["claim"] not in CLAIMS:
        raise ValueError(f"{path}: unknown claim {header['claim']!r} (add it to CLAIMS)")
    return {**header, "body": text[match.end():].strip("\n"), "file": path.name}


def _order(entry: dict) -> tuple:
    """Oldest first: by date, then a day's repeated runs of one name by their number (``add`` names
    them ``DATE-NAME.md``, ``DATE-NAME-2.md``, ...; by the file name alone ``-2`` would sort first)."""
    stem = entry["file"][:-3]
    match = re.fullmatch(r"(.*)-(\d+)", stem)
    if match and (LOG / f"{match.group(1)}.md").exists():
        return entry["date"], match.group(1), int(match.group(2))
    return entry["date"], stem, 1


def entries() -> list[dict]:
    return sorted((parse_entry(p) for p in LOG.glob("*.md")), key=_order)


def current() -> dict[str, dict]:
    """The newest run of each claim."""
    out = {}
    for entry in entries():
        if entry["claim"] != "-":
            out[entry["claim"]] = entry
    return out


def _under_claim(body: str) -> str:
    """A log entry's own headings moved below its claim's (level 4 and deeper), fences untouched."""
    lines, fenced, levels = body.split("\n"), False, []
    for line in lines:
        fenced ^= line.startswith("```")
        match = re.match(r"(#{1,6}) ", line)
        if match and not fenced:
            levels.append(len(match.group(1)))
    shift = max(0, 4 - min(levels)) if levels else 0
    out, fenced = [], False
    for line in lines:
        fenced ^= line.startswith("```")
        match = re.match(r"(#{1,6}) ", line)
        out.append("#" * shift + line if match and not fenced else line)
    return "\n".join(out)


#: the source papers by their authors (``../shared/seeds``: the files are numbered 000-004)
PAPERS = {"000": "Dutordoir's PhD report", "001": "Dutordoir et al. (2020)", "002": "Sun et al. (2021)",
          "003": "Tiao's thesis", "004": "Eleftheriadis et al."}
OWNERS = {"000": "Dutordoir's", "001": "Dutordoir et al.'s", "002": "Sun et al.'s", "003": "Tiao's",
          "004": "Eleftheriadis et al.'s"}
#: a Python warning as a run prints it: "path.py:LINE: SomeWarning: text", then the source line indented
_WARNING = re.compile(r"^\S+\.py:\d+: \w*Warning: ")


def for_readers(text: str) -> str:
    """A log entry as RESULTS shows it: the papers cited by their authors, not by file number; paths
    of the machine that ran it cut to the repository's (``/work/main/lab/x`` -> ``main/lab/x``); the
    warnings a run printed left out (they stay in the log; a line says how many), and a fence they
    alone filled removed, so that a table they split is one table again."""
    text = re.sub(r"\b[Ss]eed (00\d)'s\b", lambda m: OWNERS[m.group(1)], text)
    text = re.sub(r"\b[Ss]eed (00\d)\b", lambda m: PAPERS[m.group(1)], text)
    text = re.sub(r"(?<![\w.])/(?:[\w.-]+/)*?([\w.-]+/)(?=(?:lab|benchmarks|\.venv)/)", r"\1", text)
    out, block, opener, dropped, source_next = [], [], None, 0, False
    for line in text.split("\n"):
        if line.startswith("```"):
            if opener is None:
                opener = line
            else:  # the block ends: kept unless only warnings filled it
                if any(x.strip() for x in block):
                    out += [opener, *block, line]
                block, opener = [], None
            continue
        if opener is None:
            out.append(line)
        elif _WARNING.match(line):
            dropped, source_next = dropped + 1, True
        elif source_next and line.startswith("  "):
            source_next = False  # the warning's source line
        else:
            source_next = False
            block.append(line)
    if dropped:
        out += ["", f"({dropped} warning{'s' if dropped > 1 else ''} the run printed: in the log.)"]
    return "\n".join(out)


def _measured(latest: dict[str, dict]):
    """``(heading lines, claim, what, newest entry)`` for each measured claim in CLAIMS' order; the
    heading lines open a group at its first claim and are empty after it."""
    group = None
    for claim, (claim_group, what) in CLAIMS.items():
        if claim in latest:
            heading = [f"## {claim_group}", ""] if claim_group != group else []
            group = claim_group
            yield heading, claim, what, latest[claim]


def render() -> str:
    every = entries()
    latest = current()
    lines = ["# Results", "",
             "The current figure for each claim the project makes: the newest recorded run, with the command",
             "that regenerates it, its date and the machine it ran on. Generated by",
             "`benchmarks/tools/record.py render` from the dated log in `benchmarks/log/` (every run, oldest",
             "first); never edited by hand. Paper reproductions are in `benchmarks/paper/`, timings against",
             "peers and limits in `benchmarks/speed/`, helpers in `benchmarks/tools/`.", ""]
    for heading, claim, what, e in _measured(latest):
        lines += heading
        lines += [f"### {what}", "", for_readers(f"*{e['title']}* — `{e['command']}` · {e['date']} · "
                                                 f"{e['machine']} · log: `benchmarks/log/{e['file']}`"),
                  "", _under_claim(for_readers(e["body"])), ""]
        if claim in SUMMARIES:
            lines += ["#### Every split, from all runs of this claim", "",
                      SUMMARIES[claim]([x for x in every if x["claim"] == claim]), ""]
        if claim in FIGURES:
            lines += [f"![{what}: drawn from the tables above](figures/{claim}.svg)", ""]
    missing = [c for c in CLAIMS if c not in latest]
    if missing:
        lines += ["## Not yet measured", "", ", ".join(f"`{c}`" for c in missing), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _headline(body: str, under: str | None = None) -> list[str]:
    """The first Markdown table of a run's body (with ``under``, the first below a heading that starts
    with it), under the heading it sits below unless chosen by it; without a table, the first output
    block (at most 24 lines)."""
    lines, fenced, heading, block = for_readers(body).split("\n"), False, None, None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            if fenced and block is None:
                block = i
            continue
        if fenced:
            continue
        if re.match(r"#{1,6} ", line):
            heading = line.lstrip("#").strip()
        elif line.startswith("|") and (under is None or (heading or "").startswith(under)):
            end = next((j for j in range(i, len(lines)) if not lines[j].startswith("|")), len(lines))
            return ([f"**{heading}**", ""] if heading and under is None else []) + lines[i:end]
    if block is None or under is not None:
        raise ValueError(f"no table under a heading starting with {under!r}" if under else "no output")
    end = next(j for j in range(block + 1, len(lines)) if lines[j].startswith("```"))
    return ["```text", *lines[block + 1:min(end, block + 25)], "```"]


def digest() -> str:
    """The documentation site's results page: the claims a user relies on (:data:`readers.FOR_READERS`),
    each with one sentence on what was measured, when and where, its headline table and figure, and
    the summary over runs where the claim has one. The development measurements, the notes, the full
    output and the earlier runs stay in RESULTS.md and the log."""
    every, latest = entries(), current()
    lines = ["# Results", "",
             "What the library reproduces, how fast it is beside its peers and how it handles bad input: for "
             "each claim, one sentence on what was measured and the newest run's headline table, with its date "
             "and machine. Generated from the repository's benchmark log, never edited by hand. "
             "`benchmarks/RESULTS.md` has every table of each run, the command that repeats it, and the "
             "development measurements (profiles, comparisons between versions) that are not listed here.", ""]
    for heading, claim, what, e in _measured({c: e for c, e in latest.items() if c in FOR_READERS}):
        sentence, under = FOR_READERS[claim]
        lines += heading
        lines += [f"### {what}", "", f"{sentence} *{e['date']} · {for_readers(e['machine'])}*", "",
                  *(_headline(e["body"], under) if under is not False else []), ""]
        if claim in SUMMARIES:
            lines += [_under_claim(SUMMARIES[claim]([x for x in every if x["claim"] == claim])), ""]
        if claim in FIGURES:
            lines += [f"![{what}](../benchmarks/figures/{claim}.svg)", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def stale_figures() -> list[str]:
    """The claims whose figure is missing or was drawn from an older log entry."""
    latest = current()
    return [c for c in FIGURES if c in latest and drawn_from(c) != source_tag(latest[c])]


def add(claim: str, log: Path, title: str, command: str, note: str, machine: str | None, date: str | None) -> Path:
    if claim != "-" and claim not in CLAIMS:
        raise SystemExit(f"record.py: unknown claim {claim!r}; one of {sorted(CLAIMS)} or '-'")
    if machine is None:
        from _machine import describe

        machine = describe()
    date = date or datetime.date.today().isoformat()
    lines = log.read_text(encoding="utf-8").rstrip("\n").split("\n")
    name = re.sub(r"[^a-z0-9]+", "-", (claim if claim != "-" else title).lower()).strip("-")[:60]
    target, n = LOG / f"{date}-{name}.md", 2
    while target.exists():
        target, n = LOG / f"{date}-{name}-{n}.md", n + 1
    header = "\n".join(f"{k}: {v}" for k, v in zip(FIELDS, (claim, title, command, date, machine)))
    body = (f"{note}\n\n" if note else "") + render_output(lines)
    LOG.mkdir(exist_ok=True)
    target.write_text(f"---\n{header}\n---\n{body}\n", encoding="utf-8")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description="record a benchmark run; generate RESULTS.md")
    sub = parser.add_subparsers(dest="action", required=True)
    a = sub.add_parser("add", help="log a run (and make it the current figure of its claim)")
    a.add_argument("claim", help=f"one of {', '.join(CLAIMS)}, or - for the log only")
    a.add_argument("log", type=Path, help="the run's output")
    a.add_argument("--title", required=True)
    a.add_argument("--command", required=True, help="the command that reproduces the run")
    a.add_argument("--note", default="", help="a sentence on how it was run")
    a.add_argument("--machine", default=None, help="default: this machine, described")
    a.add_argument("--date", default=None, help="default: today")
    r = sub.add_parser("render", help="rewrite RESULTS.md from the log")
    r.add_argument("--check", action="store_true", help="exit 1 if RESULTS.md differs from the log's")
    args = parser.parse_args()
    if args.action == "add":
        target = add(args.claim, args.log, args.title, args.command, args.note, args.machine, args.date)
        print(f"logged {target.relative_to(BENCHMARKS.parent)}")
        if args.claim in FIGURES:
            runs = [e for e in entries() if e["claim"] == args.claim]
            print(f"drew {draw(args.claim, runs).relative_to(BENCHMARKS.parent)}")
    text, page = render(), digest()
    if getattr(args, "check", False):
        if RESULTS.read_text(encoding="utf-8") != text or DIGEST.read_text(encoding="utf-8") != page:
            print("RESULTS.md or docs/results.md is not what benchmarks/log gives: run benchmarks/tools/record.py render")
            return 1
        stale = stale_figures()
        if stale:
            print(f"figures not drawn from their claim's newest log entry: {stale}; run benchmarks/tools/figures.py")
            return 1
        print("RESULTS.md matches the log")
        return 0
    RESULTS.write_text(text, encoding="utf-8")
    DIGEST.write_text(page, encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(BENCHMARKS.parent)} and {DIGEST.relative_to(BENCHMARKS.parent)}: "
          f"{len(current())} claims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
