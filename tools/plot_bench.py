#!/usr/bin/env python3
"""Plots for a `specdec bench` report (bench.json), written next to it as PNG:

  speedup_vs_budget.png   tree: mean per-turn speedup over AR vs tree budget, one line per depth
  speedup_dist.png        per-turn speedup distribution per configuration (box plot)
  time_split.png          decode time split per configuration (draft / tree+mask / verify / commit / other)
  forward_cost.png        AR micro-mode: forward(N)/forward(1) per thread count (when present)

Usage: python3 tools/plot_bench.py OUT/bench.json [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_budget(summary, out: Path) -> bool:
    lines = defaultdict(list)
    for s in summary:
        if s["method"] == "tree" and s.get("speedup_turns"):
            key = (s["tree_depth"], s["threads"], s["temp"], s["batch"], s.get("lookup_min", 0))
            lines[key].append((s["tree_budget"], s["speedup_mean"]))
    if not lines:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for (d, t, temp, b, lookup), pts in sorted(lines.items()):
        pts.sort()
        lab = f"depth {d}" + (f", t={t}" if len({k[1] for k in lines}) > 1 else "")
        lab += f", T={temp}" if len({k[2] for k in lines}) > 1 else ""
        lab += f", B={b}" if len({k[3] for k in lines}) > 1 else ""
        lab += f", lookup {lookup}" if lookup else ""
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=lab)
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tree budget (nodes)")
    ax.set_ylabel("mean per-turn speedup over AR")
    ax.set_title("Tree speculation: speedup vs budget")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def plot_dist(data, out: Path) -> bool:
    by = defaultdict(list)
    for r in data["records"]:
        if r.get("speedup") is not None and r["method"] != "ar":
            by[r["label"]].append(r["speedup"])
    if not by:
        return False
    labels = list(by)
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(labels) + 2), 4))
    ax.boxplot([by[k] for k in labels], showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1), labels, rotation=30, ha="right", fontsize=8)
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_ylabel("per-turn speedup over AR")
    ax.set_title("Per-turn speedup distribution")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def plot_split(summary, out: Path) -> bool:
    rows = [s for s in summary if s.get("time_split_s") and s["generated_tokens"] > 0]
    if not rows:
        return False
    parts = ["draft", "tree_mask", "verify", "commit", "other"]
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(rows) + 2), 4))
    bottom = [0.0] * len(rows)
    for p in parts:
        # milliseconds per generated token
        vals = [1000.0 * s["time_split_s"][p] / s["generated_tokens"] for s in rows]
        ax.bar(range(len(rows)), vals, bottom=bottom, label=p)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(rows)), [s["label"] for s in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("decode ms per generated token")
    ax.set_title("Decode time split")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def plot_forward(micro, out: Path) -> bool:
    if not micro:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in micro:
        f = m["forward"]
        ax.plot([x["n"] for x in f], [x["ratio"] for x in f], marker="o", label=f"{m['threads']} threads")
    ns = [x["n"] for x in micro[0]["forward"]]
    ax.plot(ns, ns, color="gray", lw=0.8, ls="--", label="linear")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("rows per forward (N)")
    ax.set_ylabel("forward(N) / forward(1)")
    ax.set_title("Cost of a verification forward")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Plot a specdec bench report.")
    ap.add_argument("bench_json", type=Path)
    ap.add_argument("--out-dir", type=Path, default=None, help="default: the report's directory")
    args = ap.parse_args(argv)
    data = json.loads(args.bench_json.read_text())
    out = args.out_dir or args.bench_json.parent
    out.mkdir(parents=True, exist_ok=True)
    summary = data.get("summary", [])
    made = []
    for name, fn, arg in (("speedup_vs_budget.png", plot_budget, summary),
                          ("speedup_dist.png", plot_dist, data),
                          ("time_split.png", plot_split, summary),
                          ("forward_cost.png", plot_forward, data.get("micro", []))):
        if fn(arg, out / name):
            made.append(str(out / name))
    print("\n".join(made) if made else "nothing to plot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
