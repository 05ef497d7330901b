"""Tables derived from every run of a claim, never from retyped numbers.

A claim measured one piece at a time (a set and a split per run, say) has, besides its newest run,
a summary over all its runs: :data:`SUMMARIES` maps the claim to a function of its log entries
(oldest first) that returns Markdown. ``record.py render`` puts it under the newest run, so
``render --check`` fails when a new run is logged and RESULTS is not regenerated.
"""

from __future__ import annotations

import statistics

from figures import frontier_runs

#: claim -> function(list of log entries, oldest first) -> Markdown
SUMMARIES: dict = {}


def _reach(curve: list, target: float) -> float | None:
    return next((t for t, nlpd, _ in curve if nlpd <= target), None)


def frontier_spread(entries: list[dict]) -> str:
    """Per set, over its splits: each contender's test NLPD at the end of its budget (mean and
    standard deviation), and the seconds it took to reach GPflow SGPR's final NLPD on that split as
    a fraction of SGPR's own time (the target is 0.1 or less)."""
    lines = []
    for name, splits in frontier_runs(entries).items():
        order = sorted(splits)
        labels = list(dict.fromkeys(label for s in order for label in splits[s][1]))
        sources = sorted({f for s in order for f in splits[s][0]})
        lines += [f"##### {name}: splits {', '.join(map(str, order))} (each contender's newest run: "
                  + ", ".join(f"`{f}`" for f in sources) + ")", "",
                  "Each cell: the contender's test NLPD at the end of its budget; in brackets, the seconds "
                  "it took to reach GPflow SGPR's final NLPD on that split over SGPR's own seconds "
                  "('-': never reached; blank: not run on that split).", "",
                  "| contender | " + " | ".join(f"split {s}" for s in order)
                  + " | mean NLPD (sd) | splits reached | median time fraction |",
                  "| --- |" + " --- |" * (len(order) + 3)]
        for label in labels:
            cells, finals, fractions = [], [], []
            for s in order:
                curves = splits[s][1]
                if label not in curves:
                    cells.append("")
                    continue
                final = curves[label][-1][1]
                finals.append(final)
                ref = curves.get("GPflow SGPR")
                if ref is None:
                    cells.append(f"{final:.4f}")
                    continue
                t = _reach(curves[label], ref[-1][1])
                fraction = None if t is None else t / ref[-1][0]
                if fraction is not None:
                    fractions.append(fraction)
                cells.append(f"{final:.4f} ({'-' if fraction is None else f'{fraction:.2f}'})")
            sd = f"{statistics.stdev(finals):.4f}" if len(finals) > 1 else "-"
            median = f"{statistics.median(fractions):.2f}" if fractions else "-"
            runs_with_ref = sum(label in splits[s][1] and "GPflow SGPR" in splits[s][1] for s in order)
            lines.append(f"| {label} | " + " | ".join(cells)
                         + f" | {statistics.fmean(finals):.4f} ({sd}) | {len(fractions)} of {runs_with_ref} | {median} |")
        lines.append("")
    return "\n".join(lines)


PRIORS = ("spherelab VISH (kernel prior)", "spherelab VISH (features prior)")


def prior_change(entries: list[dict]) -> str:
    """VISH's two priors, the kernel and the features (the default): per set, each prior's test
    NLPD at the end of its budget, averaged over the splits where both ran, and on how many of
    them the features prior is the lower."""
    lines = ["##### VISH's default prior (the features) against the kernel prior", "",
             "Over the splits where both priors ran: each prior's mean test NLPD at the end of its budget, and "
             "the splits on which the features prior's is lower. VISH's default is `prior=\"features\"`; "
             "`prior=\"kernel\"` stays an option.", "",
             "| set | splits | kernel prior | features prior (default) | features lower on |",
             "| --- | --- | --- | --- | --- |"]
    for name, splits in frontier_runs(entries).items():
        both = [s for s in sorted(splits) if all(p in splits[s][1] for p in PRIORS)]
        if not both:
            continue
        final = {p: [splits[s][1][p][-1][1] for s in both] for p in PRIORS}
        wins = sum(f < k for k, f in zip(*final.values()))
        lines.append(f"| {name} | {', '.join(map(str, both))} | {statistics.fmean(final[PRIORS[0]]):.4f} | "
                     f"{statistics.fmean(final[PRIORS[1]]):.4f} | {wins} of {len(both)} |")
    return "\n".join(lines + [""])


def frontier_means(entries: list[dict]) -> str:
    """The targets as stated on the mean over splits: per set, GPflow SGPR's final test NLPD and its
    seconds, each averaged over the splits it ran on; for each contender run on all of those splits,
    the first sample time t (of any split) at which the mean over splits of the test NLPD of the
    model it holds at t (its last sample by t: anytime, never the best of its samples) reaches
    SGPR's mean, and t over SGPR's mean seconds."""
    ref_label = "GPflow SGPR"
    lines = ["##### The targets on the mean over splits", "",
             "Per set, over the splits where GPflow SGPR ran: its test NLPD at the end of its budget and its "
             "seconds, each averaged; for each contender run on all of them, the shortest fit t (a sample of its "
             "curve on any split: a VISH degree fitted on its own, or an iterate of an L-BFGS-B fit) such that "
             "the mean over the splits of the test NLPD of the model it holds at t (its last sample by t) is SGPR's "
             "mean or lower ('-': at no t), and t as a fraction of SGPR's mean seconds (the target: 0.1 or less).", "",
             "| set | splits | SGPR's mean NLPD | SGPR's mean s | contender | its mean NLPD at t | t (s) | "
             "fraction of SGPR's s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, splits in frontier_runs(entries).items():
        with_ref = [s for s in sorted(splits) if ref_label in splits[s][1]]
        if not with_ref:
            continue
        target = statistics.fmean(splits[s][1][ref_label][-1][1] for s in with_ref)
        seconds = statistics.fmean(splits[s][1][ref_label][-1][0] for s in with_ref)
        labels = [label for label in dict.fromkeys(lab for s in with_ref for lab in splits[s][1])
                  if label != ref_label and all(label in splits[s][1] for s in with_ref)]
        for label in labels:
            curves = [splits[s][1][label] for s in with_ref]
            found = None
            for t in sorted({t for curve in curves for t, _, _ in curve}):
                best = [next((nlpd for u, nlpd, _ in reversed(curve) if u <= t), float("inf")) for curve in curves]
                if statistics.fmean(best) <= target:
                    found = (t, statistics.fmean(best))
                    break
            cells = ("- | - | -" if found is None
                     else f"{found[1]:.4f} | {found[0]:.2f} | {found[0] / seconds:.2f}")
            lines.append(f"| {name} | {', '.join(map(str, with_ref))} | {target:.4f} | {seconds:.1f} | {label} | "
                         f"{cells} |")
    return "\n".join(lines + [""])


#: the budgets at which every contender is read: spherelab.fit's, with its stated tolerance (10 %)
BUDGETS = (10.0, 30.0, 60.0)
TOLERANCE = 1.1


def frontier_at(entries: list[dict]) -> str:
    """Per set, over the splits where ``spherelab.fit`` ran: each contender's mean test NLPD of the
    model it holds at 1.1 t for t in :data:`BUDGETS` (its last sample by then, the same rule for
    every contender), for the contenders run on all of those splits; then the best contender at
    60 s against spherelab.fit's."""
    lines = ["##### Every contender at 10, 30 and 60 s", "",
             "Per set, over the splits where `spherelab.fit` ran: the mean test NLPD of the model each contender "
             "holds at 1.1 t (its last sample by then; 1.1: the budget's stated tolerance, for every contender "
             "alike; '-': no sample by then on some split), for the contenders run on all of those splits. "
             "The last column: the contender's mean at 60 s minus the best contender's there.", "",
             "| set | splits | contender | " + " | ".join(f"{t:g} s" for t in BUDGETS) + " | behind the best at 60 s |",
             "| --- | --- | --- |" + " --- |" * (len(BUDGETS) + 1)]
    for name, splits in frontier_runs(entries).items():
        with_fit = [s for s in sorted(splits) if "spherelab.fit" in splits[s][1]]
        if not with_fit:
            continue
        labels = [label for label in dict.fromkeys(lab for s in with_fit for lab in splits[s][1])
                  if all(label in splits[s][1] for s in with_fit)]
        means: dict[str, list] = {}
        for label in labels:
            row = []
            for t in BUDGETS:
                held = [next((nlpd for u, nlpd, _ in reversed(splits[s][1][label]) if u <= TOLERANCE * t), None)
                        for s in with_fit]
                row.append(None if None in held else statistics.fmean(held))
            means[label] = row
        best = min((row[-1] for row in means.values() if row[-1] is not None), default=None)
        for label, row in sorted(means.items(), key=lambda kv: (kv[1][-1] is None, kv[1][-1] or 0.0)):
            cells = " | ".join("-" if v is None else f"{v:.4f}" for v in row)
            gap = "-" if row[-1] is None or best is None else f"{row[-1] - best:.4f}"
            lines.append(f"| {name} | {', '.join(map(str, with_fit))} | {label} | {cells} | {gap} |")
    return "\n".join(lines + [""])


SUMMARIES["frontier"] = lambda entries: (frontier_spread(entries) + "\n" + frontier_means(entries) + "\n"
                                         + frontier_at(entries) + "\n" + prior_change(entries))
