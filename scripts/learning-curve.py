#!/usr/bin/env python3
"""Draws the learning curve of BENCHMARKS.md from the table of scripts/learning-curve.sh.

    python3 scripts/learning-curve.py OUT/learning-curve.tsv FIGURE.png   (needs matplotlib)

One panel per horizon: held-out MSE of `--preset fmri` and of eval's best linear baseline
(both fitted on the same training subjects) against the number of training subjects, with
the model's paired-bootstrap 95 % interval relative to the baseline as error bars. The SVG
twin is written beside the PNG.
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(tsv, png):
    rows = defaultdict(list)
    with open(tsv, newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows[(int(r["horizon"]), float(r["horizon_s"]))].append(r)
    fig, axes = plt.subplots(1, len(rows), figsize=(5.6 * len(rows), 4.8), squeeze=False)
    for ax, ((h, secs), rs) in zip(axes[0], sorted(rows.items())):
        rs.sort(key=lambda r: int(r["subjects"]))
        n = [int(r["subjects"]) for r in rs]
        model = [float(r["model_mse"]) for r in rs]
        base = [float(r["baseline_mse"]) for r in rs]
        # The interval of (model - baseline) / baseline, drawn around the model's MSE.
        lo = [m - b * (1 + float(r["lo"])) for m, b, r in zip(model, base, rs)]
        hi = [b * (1 + float(r["hi"])) - m for m, b, r in zip(model, base, rs)]
        names = sorted({r["baseline"] for r in rs})
        ax.plot(n, base, "s--", color="tab:gray",
                label=f"best linear baseline of eval ({', '.join(names)}, fitted on the same subjects)")
        ax.errorbar(n, model, yerr=[lo, hi], fmt="o-", color="tab:blue", capsize=4,
                    label="model, --preset fmri (95 % bootstrap interval)")
        for x, m, b in zip(n, model, base):
            ax.annotate(f"{100 * (m - b) / b:+.1f} %", (x, m), textcoords="offset points",
                        xytext=(8, 4), ha="left", fontsize=9, color="tab:blue")
        ax.set_xscale("log")
        ax.set_xticks(n)
        ax.set_xticklabels([str(x) for x in n])
        ax.minorticks_off()
        ax.set_xlabel("training subjects (ds000140, 3 runs each)")
        ax.set_ylabel("held-out MSE, subjects 24-33 (variance units)")
        ax.set_title(f"h{h} ({secs:g} s ahead)")
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.suptitle("Learning curve on ds000140 (band-pass filtered: scores are optimistic)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(png, dpi=120)
    fig.savefig(png.rsplit(".", 1)[0] + ".svg")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: learning-curve.py TSV FIGURE.png")
    main(sys.argv[1], sys.argv[2])
