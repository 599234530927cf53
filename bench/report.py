"""Renders ``summary.md`` and the PNG plots from the JSON results of a run."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from bench.engines import CASE_TITLES, CASES

ERSTWHILE = "erstwhile (SQLite)"
CASE_SHORT = {
    "semantic": "(a) semantic",
    "semantic_filtered": "(b) semantic, room + current",
    "lexical": "(c) lexical",
    "hybrid_filtered": "(d) hybrid, room + current",
    "semantic_as_of": "(e) semantic, as_of",
}


def load(results: Path) -> dict[str, Any]:
    found: dict[str, Any] = {"speed": []}
    # the run's own files (speed_10k.json, speed_100k.json, speed_1m.json); the others
    # (speed_100k_lanes.json, ...) are earlier or variant runs kept for their notes
    for path in sorted(results.glob("speed_*.json")):
        if re.fullmatch(r"speed_\d+[km]?\.json", path.name):
            found["speed"].append(json.loads(path.read_text()))
    found["speed"].sort(key=lambda r: r["size"])
    for name in ("locomo", "time_awareness", "cold_cli", "run"):
        path = results / f"{name}.json"
        if path.exists():
            found[name] = json.loads(path.read_text())
    known = [json.loads(p.read_text()) for p in sorted(results.glob("known_at_*.json"))]
    if known:
        found["known_at"] = sorted(known, key=lambda r: (r["size"], r["backend"] != "sqlite"))
    return found


def known_at_tables(runs: list[dict[str, Any]]) -> list[str]:
    """Record-time travel (``bench.known_at``): each lane's p50 now and ``known_at`` a
    past instant, with their ratio, per size and backend."""
    lines = [
        "`python -m bench.known_at SIZE --queries 20 [--postgres URL] --out "
        "bench/results/known_at_<size>_<backend>.json`: a tenth of the records revised "
        "after the past instant, a twentieth soft-deleted; each query current and "
        "`known_at` in turn. p50 ms (ratio known_at / current, same run).",
        "",
        "| size | backend | load | " + " | ".join(LANES_KNOWN) + " |",
        "|---|---|---|" + "---:|" * len(LANES_KNOWN),
    ]
    for run in runs:
        cells = []
        for lane in LANES_KNOWN:
            case = run["cases"].get(lane)
            if case is None:
                cells.append("—")
                continue
            now, then = case["current"]["p50_ms"], case["known_at"]["p50_ms"]
            cells.append(f"{now:.1f} → {then:.1f} ({fmt_ratio(case['p50_ratio'])})")
        load_avg = run.get("machine", {}).get("loadavg", ["?"])[0]
        lines.append(
            f"| {run['size']:,} | {run['backend']} | {load_avg} | " + " | ".join(cells) + " |"
        )
    lines.append("")
    return lines


LANES_KNOWN = (
    "lexical", "lexical_filtered", "semantic", "semantic_filtered", "hybrid", "hybrid_filtered",
)  # fmt: skip


def fmt_ratio(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


def speed_tables(run: dict[str, Any]) -> list[str]:
    size = run["size"]
    data = run["data"]
    lines = [
        f"### {size:,} records x 384 d — {run['queries']} queries per case, top-10",
        "",
        f"Data: {data['current_fraction']:.0%} currently valid "
        f"({data['superseded_fraction']:.0%} superseded, {data['invalidated_fraction']:.0%} "
        f"invalidated); one room AND current ≈ {data['room_and_current_fraction']:.1%}; "
        f"valid at the as_of instant ≈ {data['valid_at_as_of_fraction']:.0%}.",
        "",
        "Cells: p50 latency, its ratio to erstwhile (SQLite) in the same run (lower is "
        "faster), recall@10 against the exact answer.",
        "",
        "| engine | ingest records/s (index builds counted); writes alone | "
        + " | ".join(CASE_SHORT[c] for c in CASES)
        + " |",
        "|---|---:|" + "---:|" * len(CASES),
    ]
    for engine in run["engines"]:
        ingest = run["ingest"].get(engine, {})
        rate, writes = ingest.get("records_per_s"), ingest.get("write_records_per_s")
        apart = f"; writes alone {writes:,.0f}" if writes and ingest.get("index_s") else ""
        cells = [
            f"{rate:,.0f} ({fmt_ratio(ingest.get('rate_ratio'))}){apart}" if rate else "—",
        ]
        for case in CASES:
            entry = run["cases"].get(case, {}).get(engine)
            if entry is None:
                cells.append("—")
            elif "error" in entry:
                cells.append("failed")
            else:
                cells.append(
                    f"{entry['p50_ms']:.2f} ms ({fmt_ratio(entry.get('p50_ratio'))}) "
                    f"r={entry['recall_at_10']:.2f}"
                )
        lines.append(f"| {engine} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "p95 latency (ms, ratio to erstwhile):",
        "",
        "| engine | " + " | ".join(CASE_SHORT[c] for c in CASES) + " |",
        "|---|" + "---:|" * len(CASES),
    ]
    for engine in run["engines"]:
        cells = []
        for case in CASES:
            entry = run["cases"].get(case, {}).get(engine)
            if entry is None or "p95_ms" not in entry:
                cells.append("—")
            else:
                cells.append(f"{entry['p95_ms']:.2f} ({fmt_ratio(entry.get('p95_ratio'))})")
        lines.append(f"| {engine} | " + " | ".join(cells) + " |")
    scope = {
        c: next(iter(run["cases"][c].values())).get("in_scope_rows_mean")
        for c in CASES
        if run["cases"].get(c)
    }
    lines += ["", "In-scope rows (mean): " + ", ".join(
        f"{CASE_SHORT[c]} {v:,.0f}" for c, v in scope.items() if v is not None) + "."]  # fmt: skip
    for name, why in run.get("skipped", {}).items():
        lines.append(f"- not measured: **{name}** — {why}")
    for name, notes in run.get("engine_notes", {}).items():
        lines.append(f"- {name}: {'; '.join(notes)}")
    lines.append("")
    return lines


def locomo_tables(result: dict[str, Any]) -> list[str]:
    columns = ["1", "2", "3", "4", "5", "1-4", "1-5"]
    names = result["categories"]
    header = [f"{c} {names[c]}" if c in names else c for c in columns]
    lines = [
        f"Conversations {', '.join(result['conversations'])}: {result['turns']:,} turns, "
        f"{result['questions_scored']} questions scored "
        f"({len(result['questions_skipped'])} skipped: no evidence turn in the file; "
        f"{result['evidence_ids_dropped']} evidence ids dropped). Embedder "
        f"`{result['embedder']}`. Each content format is stored in a store of its own.",
        "",
    ]
    for name, run in result["formats"].items():
        counts = run["results"]["hybrid"]
        lines += [
            f"**Content format `{name}`**: `{run['template']}`",
            "",
            "| ranking | metric | " + " | ".join(header) + " |",
            "|---|---|" + "---:|" * len(columns),
        ]
        for ranking, entry in run["results"].items():
            for metric in ("R@5", "R@10", "NDCG@10", "Hit@10"):
                cells = [f"{entry[c][metric]:.3f}" if entry.get(c) else "—" for c in columns]
                lines.append(f"| {ranking} | {metric} | " + " | ".join(cells) + " |")
        lines.append(
            "| questions | | " + " | ".join(str(counts.get(c, {}).get("questions", 0))
                                             for c in columns) + " |"
        )  # fmt: skip
        best = []
        for c in columns[:5]:
            if counts.get(c, {}).get("questions", 0) >= 40:
                lanes = max(run["results"][r][c]["R@10"] for r in ("lexical", "semantic"))
                mark = "yes" if counts[c]["R@10"] >= lanes else "**no**"
                best.append(f"{c} {mark}")
        lines.append(
            "\nHybrid R@10 ≥ its better lane, per category with ≥ 40 questions: "
            + ", ".join(best)
            + "."
        )
        lat = run.get("search_latency", {})
        if lat:
            lines.append(
                "\nSearch latency p50 (ms, query embedding included): "
                + ", ".join(f"{r} {v['p50_ms']:.1f}" for r, v in lat.items())
                + f". Import of all turns (embedding included): {run['import_seconds']} s."
            )
        lines.append("")
    for name, why in result.get("not_measured", {}).items():
        lines += [f"- not measured: content format **{name}** — {why}", ""]
    for label, value in result.get("reference", {}).items():
        ours = ", ".join(
            f"`{name}` {run['results']['hybrid']['1-5']['R@10']:.3f}"
            for name, run in result["formats"].items()
        )
        lines.append(
            f"Reference on the same file — {label}: **{value}**; erstwhile hybrid: {ours}."
        )
    lines.append("")
    return lines


def time_tables(result: dict[str, Any]) -> list[str]:
    q = result["questions"]
    lines = [
        f"{result['subjects']} subjects, {result['facts']:,} facts, {result['records']:,} records "
        f"with distractors; {q['now']} 'now' and {q['as of']} 'as of' questions; "
        f"embedder `{result['embedder']}`.",
        "",
        "| search | ranking | now: accuracy@1 | as of: accuracy@1 | now: right subject, "
        "wrong time | as of: right subject, wrong time |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for condition, by_ranking in result["results"].items():
        for ranking, cell in by_ranking.items():
            now, then = cell["now"], cell["as of"]
            lines.append(
                f"| {condition} | {ranking} | {now['accuracy_at_1']:.3f} | "
                f"{then['accuracy_at_1']:.3f} | {now['right_subject_wrong_time']:.3f} | "
                f"{then['right_subject_wrong_time']:.3f} |"
            )
    lines.append("")
    return lines


def cold_tables(result: dict[str, Any]) -> list[str]:
    median = result["median"]
    lines = [
        f"Each command a fresh process, median of {result['rounds']} (default and hash "
        f"alternating); default embedder `{result['default_embedder']}`; load average "
        f"{result['loadavg']} at the end. CPU = user + system time of the process.",
        "",
        "| command | default: wall s | default: CPU s | hash: wall s | hash: CPU s | "
        "ratio wall | ratio CPU |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for command, ratio in result["ratio_default_to_hash"].items():
        auto, hashed = median["auto"][command], median["hash"][command]
        lines.append(
            f"| `erstwhile {command}` | {auto['wall_s']:.2f} | {auto['cpu_s']:.2f} | "
            f"{hashed['wall_s']:.2f} | {hashed['cpu_s']:.2f} | {ratio['wall']:.2f} | "
            f"{ratio['cpu']:.2f} |"
        )
    lines.append("")
    return lines


def render(results: Path) -> Path:
    found = load(results)
    run = found.get("run", {})
    lines = ["# erstwhile benchmarks", ""]
    if run:
        machine = run.get("machine", {})
        lines += [
            f"Run `{run.get('command')}` at {run.get('when')} — size **{run.get('size')}**, "
            f"{run.get('seconds')} s in all. Machine: {machine.get('cpu_count')} CPUs, Python "
            f"{machine.get('python')}, SQLite {machine.get('sqlite')}, load average "
            f"{machine.get('loadavg')} at the start; thread pools: {run.get('threads')}.",
            "",
            "One process runs every engine on the same data; query *j* goes to every engine "
            "before query *j + 1*. The machine is shared and small: read the ratios, not the "
            "absolute numbers. See `bench/README.md` for what each case and engine does.",
            "",
        ]
    if found["speed"]:
        lines += [
            "## Speed",
            "",
            "Each size's table is the last run that wrote its `speed_<size>.json` "
            "(`--speed-size` runs one size), not necessarily the run named above; the "
            "README's performance section gives each one's command and load.",
            "",
        ]
        for speed in found["speed"]:
            lines += speed_tables(speed)
        lines += ["![latency vs size](latency_vs_size.png)", ""]
    if "locomo" in found:
        lines += ["## Retrieval quality: LoCoMo", "", *locomo_tables(found["locomo"])]
        lines += ["![LoCoMo recall](locomo_recall.png)", ""]
    if "time_awareness" in found:
        lines += ["## Time-awareness", "", *time_tables(found["time_awareness"])]
        lines += ["![time-awareness](time_awareness.png)", ""]
    if "cold_cli" in found:
        lines += ["## Cold CLI", "", *cold_tables(found["cold_cli"])]
    if "known_at" in found:
        lines += ["## Record time: `known_at` beside the current search", ""]
        lines += known_at_tables(found["known_at"])
    out = results / "summary.md"
    out.write_text("\n".join(lines))
    plots(found, results)
    return out


def plots(found: dict[str, Any], results: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print("no plots: matplotlib is not installed (pip install -r bench/requirements.txt)",
              file=sys.stderr)  # fmt: skip
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if found["speed"]:
        fig, grid = plt.subplots(2, 3, figsize=(13, 7.5), sharey=True)
        axes = list(grid.ravel())
        engines = list(dict.fromkeys(e for r in found["speed"] for e in r["engines"]))
        colours = {e: f"C{i}" for i, e in enumerate(engines)}  # one colour per engine
        for ax, case in zip(axes, CASES, strict=False):
            for engine in engines:
                points = [
                    (r["size"], r["cases"][case][engine]["p50_ms"])
                    for r in found["speed"]
                    if "p50_ms" in r["cases"].get(case, {}).get(engine, {})
                ]
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, marker="o", label=engine, color=colours[engine],
                            linewidth=2.5 if engine == ERSTWHILE else 1.2)  # fmt: skip
            ax.set_title(CASE_TITLES[case], fontsize=9)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("records")
            ax.grid(True, which="both", alpha=0.3)
        for ax in (axes[0], axes[3]):
            ax.set_ylabel("p50 latency, ms (log)")
        legend = axes[-1]
        legend.axis("off")
        handles = [plt.Line2D([], [], color=colours[e], marker="o", label=e) for e in engines]
        legend.legend(handles=handles, loc="center", fontsize=9)
        fig.suptitle("top-10 latency vs collection size (one query thread)")
        fig.tight_layout()
        fig.savefig(results / "latency_vs_size.png", dpi=100)
        plt.close(fig)
    if "locomo" in found:
        result = found["locomo"]
        columns = ["1", "2", "3", "4", "5", "1-4", "1-5"]
        labels = [f"{c}\n{result['categories'].get(c, 'all')}" for c in columns]
        runs = result["formats"]
        fig, axes = plt.subplots(1, len(runs), figsize=(7 * len(runs), 4.2), sharey=True)
        for ax, (name, run) in zip(np.atleast_1d(axes), runs.items(), strict=True):
            rankings = list(run["results"])
            width = 0.8 / len(rankings)
            for i, ranking in enumerate(rankings):
                values = [run["results"][ranking].get(c, {}).get("R@10", 0) for c in columns]
                ax.bar([x + i * width for x in range(len(columns))], values, width, label=ranking)
            ax.set_xticks([x + width * (len(rankings) - 1) / 2 for x in range(len(columns))])
            ax.set_xticklabels(labels, fontsize=8)
            ax.set_ylim(0, 1)
            for value in result.get("reference", {}).values():  # a 1-5 figure
                last = len(columns) - 1
                ax.hlines(value, last - 0.1, last + 0.9, color="black", linestyle="--")
                ax.text(last - 0.1, value + 0.02, f"reference {value}", fontsize=7)
            ax.legend(fontsize=8)
            ax.set_title(f"content format '{name}'")
        np.atleast_1d(axes)[0].set_ylabel("R@10")
        fig.suptitle("LoCoMo: recall@10 per category, per ranking")
        fig.tight_layout()
        fig.savefig(results / "locomo_recall.png", dpi=110)
        plt.close(fig)
    if "time_awareness" in found:
        result = found["time_awareness"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
        for ax, kind in zip(axes, ("now", "as of"), strict=True):
            conditions = list(result["results"])
            rankings = list(next(iter(result["results"].values())))
            width = 0.8 / len(conditions)
            for i, condition in enumerate(conditions):
                values = [result["results"][condition][r][kind]["accuracy_at_1"] for r in rankings]
                ax.bar([x + i * width for x in range(len(rankings))], values, width,
                       label=condition)  # fmt: skip
            ax.set_xticks([x + width * (len(conditions) - 1) / 2 for x in range(len(rankings))])
            ax.set_xticklabels(rankings)
            ax.set_ylim(0, 1)
            ax.set_title(f"'{kind}' questions")
        axes[0].set_ylabel("accuracy@1")
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=8)
        fig.suptitle("time-awareness: knowledge updates")
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.savefig(results / "time_awareness.png", dpi=110)
        plt.close(fig)
