"""Append a benchmark run's output to RESULTS.md under a heading, verbatim (figures are never
retyped): Markdown table rows and headings are kept as they are, everything else goes into a
fenced block.

    python benchmarks/record.py "## Threads — benchmarks/threads.py (2026-11-24)" run.log [--note TEXT]
"""

from __future__ import annotations

import argparse
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def render(lines: list[str]) -> str:
    out, fenced = [], False
    for line in lines:
        # table rows, blank lines and headings of two or more hashes stay Markdown; a "# ..." line
        # is a script's comment, not a title
        markdown = line.startswith(("|", "##")) or not line.strip()
        if markdown and fenced:
            out.append("```")
            fenced = False
        if not markdown and not fenced:
            out.append("```")
            fenced = True
        if line.startswith("## "):  # a run's own section: below the heading given here
            line = "#### " + line[3:]
        if markdown and line.startswith("####") and out and out[-1].strip():
            out.append("")
        out.append(line)
    if fenced:
        out.append("```")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("heading")
    parser.add_argument("log")
    parser.add_argument("--note", default="", help="a sentence on how it was run")
    args = parser.parse_args()
    lines = Path(args.log).read_text().rstrip("\n").split("\n")
    text = f"\n{args.heading}\n\n" + (f"{args.note}\n\n" if args.note else "") + render(lines) + "\n"
    with RESULTS.open("a") as fh:
        fh.write(text)
    print(f"appended {len(lines)} lines to {RESULTS}")


if __name__ == "__main__":
    main()
