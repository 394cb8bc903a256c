#!/usr/bin/env bash
# The learning curve of BENCHMARKS.md ("Learning curve on ds000140"): held-out MSE of
# `--preset fmri` and of eval's best linear baseline against the number of training subjects.
#
#   scripts/learning-curve.sh DATA OUT [N ...]     (default N: 3 6 12 19)
#
# DATA is the tree of scripts/fetch-ds000140.sh. For each N it trains on subjects 01..N,
# validates (best step) on 20-23 and scores the test subjects 24-33 with eval --test-subjects;
# the baselines are fitted on the same N training subjects. A finished run in OUT/nN is
# reused. Writes OUT/nN/test.json per N and OUT/learning-curve.tsv; draw the figure with
# scripts/learning-curve.py OUT/learning-curve.tsv FIGURE.png.
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 DATA OUT [N ...]" >&2
    exit 2
fi
data=$1
out=$2
shift 2
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(3 6 12 19)
bc=${BC_CLI:-bc-cli}
mkdir -p "$out"
for n in "${sizes[@]}"; do
    if [ "$n" -lt 1 ] || [ "$n" -gt 19 ]; then
        echo "N must be 1..19 (20-23 validate, 24-33 test): $n" >&2
        exit 2
    fi
done
tsv="$out/learning-curve.tsv"
tmp="$tsv.tmp-$$"
printf 'subjects\thorizon\thorizon_s\tmodel_mse\tbaseline\tbaseline_mse\trelative\tlo\thi\n' >"$tmp"
for n in "${sizes[@]}"; do
    run="$out/n$n"
    if [ ! -e "$run/summary.json" ]; then
        "$bc" train --data "$data" --preset fmri --subjects-train "$(printf '%02d\n' $(seq 1 "$n") | paste -sd,)" \
            --subjects-heldout 20,21,22,23 --out "$run"
    fi
    "$bc" eval --checkpoint "$run" --test-subjects "$(seq -s, 24 33)" --json >"$run/test.json.tmp"
    mv "$run/test.json.tmp" "$run/test.json"
    python3 - "$n" "$run/test.json" >>"$tmp" <<'PY'
import json, sys
n, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
model = next(r for r in d["rows"] if r["name"] == "model")["per_horizon"]
imp = d["improvement"]
boot = {b["horizon"]: b for b in d["bootstrap"]["per_horizon"]}
for i, h in enumerate(d["horizons"]):
    b = boot[h]
    # The bootstrap's difference is model - best baseline (negative: the model is better).
    print(f"{n}\t{h}\t{h * d['tr_seconds']:g}\t{model[i]:.6f}\t{imp['best_baseline'][i]}\t"
          f"{imp['best_mse'][i]:.6f}\t{b['relative_difference']:.4f}\t"
          f"{b['interval']['lo']:.4f}\t{b['interval']['hi']:.4f}")
PY
done
mv "$tmp" "$tsv"
echo "wrote $tsv"
