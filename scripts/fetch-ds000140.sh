#!/usr/bin/env bash
# fetch-ds000140.sh DIR: real BOLD data to develop on, in one command.
#
# OpenNeuro ds000140 (heat pain with regulation and ratings, 33 subjects), parcellated into
# the 122 regions of the MIST atlas, as the PyPI wheel connattractor==0.1.0 ships it under
# resources/ex_timeseries_task/: sub-XX_ts.txt (run 1, 209 TRs) and sub-XX_ts_run_03.tsv,
# sub-XX_ts_run_07.tsv (191 TRs), tab-separated with a header row, TR 2 s. This script
# downloads the wheel with pip (no dependencies, into a temporary directory removed at the
# end), and writes the tree `bc-cli --data DIR` reads:
#
#   DIR/sub-XX/func/sub-XX_task-heatpain_run-{1,3,7}_bold.tsv   122 columns, header = names
#   DIR/task-heatpain_bold.json      {"RepetitionTime": 2.0}: the TR of every run (BIDS
#                                    inheritance from the root)
#   DIR/atlas/parcel_labels.tsv      column, name in the runs, MIST name (outside sub-*/,
#                                    so the loader does not list it as an ignored file)
#   DIR/dataset_description.json, DIR/README, DIR/.fetch-ds000140 (what made the tree)
#
# What it changes, and why:
# - Run 1 is labelled one subject too high: sub-XX_ts.txt is subject XX-1's first run
#   (sub-02_ts.txt is sub-01's, ..., sub-33_ts.txt is sub-32's; the wheel has no sub-01_ts.txt).
#   Functional-connectivity fingerprinting shows it: matching each run-1 file's connectivity
#   (Fisher z, group mean removed) to the mean of each subject's runs 3 and 7, the best match
#   is subject XX-1 for 29 of 32 files and subject XX for none (runs 3 and 7 find each other
#   for 30 of 33 subjects). After the relabelling sub-33 has no run 1: it keeps its runs 3 and
#   7 (2 runs, 382 TRs); every other subject has 3 runs. 98 runs in all.
# - The first column, GlobSig, is the global signal (r = 0.99 with the mean of the regions),
#   not a region: it is dropped.
# - Four MIST names occur twice (L_IPlob, PCcor, PRC_d, SPlob); the loader needs distinct
#   names, so both copies get their column number (1-based, after the global signal):
#   `L_IPlob_29`, `L_IPlob_34`, ... The values are copied as written.
#
# What it leaves: three cerebellar regions (CER7b_l, CER9_v, CER7b_m) are constant in 23, 6
# and 4 runs; the loader sets them to zeros there and says so. The series were band-pass
# filtered (99.9 % of the power below about 0.08 Hz; Nyquist 0.25 Hz), probably with a
# zero-phase filter, which leaks later samples into earlier ones: the loader's filtered-input
# check warns, and forecast scores on these data are optimistic. Use them to develop the
# machinery, not to claim forecasting skill.
#
# DIR must not exist, be empty, or have been made by this script (then nothing is done). The
# tree is built beside DIR and renamed into place whole. Needs python3 with pip, and the
# network (PyPI). Exits non-zero, with the reason on stderr, on any failure.
set -euo pipefail

VERSION="connattractor==0.1.0 layout 1"
die() { echo "fetch-ds000140: error: $*" >&2; exit 1; }

[ $# -eq 1 ] && [ -n "$1" ] || die "usage: scripts/fetch-ds000140.sh DIR"
dir=${1%/}
[ -n "$dir" ] || dir=/
command -v python3 >/dev/null || die "python3 not found"
python3 -m pip --version >/dev/null 2>&1 || die "python3 has no pip (python3 -m pip)"

if [ -e "$dir" ] && [ ! -d "$dir" ]; then
    die "$dir exists and is not a directory"
fi
if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    if [ -f "$dir/.fetch-ds000140" ]; then
        made=$(cat "$dir/.fetch-ds000140")
        if [ "$made" = "$VERSION" ]; then
            echo "fetch-ds000140: $dir is already complete ($VERSION); nothing to do"
            exit 0
        fi
        die "$dir was made by another version of this script ($made); remove it or give another directory"
    fi
    die "$dir is not empty and was not made by this script; give a new or empty directory"
fi

parent=$(dirname "$dir")
mkdir -p "$parent" || die "cannot create $parent"
tmp=$(mktemp -d) || die "cannot create a temporary directory"
stage=$(mktemp -d "$parent/.$(basename "$dir").partial.XXXXXX") || die "cannot write in $parent"
trap 'rm -rf "$tmp" "$stage"' EXIT

echo "fetch-ds000140: downloading connattractor==0.1.0 from PyPI" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$tmp" "connattractor==0.1.0" \
    || die "pip download connattractor==0.1.0 failed (is PyPI reachable?)"
wheel=$(ls "$tmp"/connattractor-0.1.0-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || die "pip left no connattractor-0.1.0 wheel in $tmp"

python3 - "$wheel" "$stage" "$VERSION" <<'PY' || die "converting the wheel failed"
import json, os, sys, zipfile

wheel, out, version = sys.argv[1:4]
SRC = "resources/ex_timeseries_task/"
SUBJECTS, REGIONS, TASK = 33, 122, "heatpain"


def fail(msg):
    sys.exit(f"fetch-ds000140: error: {msg}")


z = zipfile.ZipFile(wheel)
names = set(z.namelist())


def read(name):
    if SRC + name not in names:
        fail(f"{wheel} has no {SRC}{name}")
    return z.read(SRC + name).decode("utf-8").splitlines()


# (source file, subject, run): run 1 of sub-XX is in sub-(XX+1)_ts.txt.
plan = []
for s in range(1, SUBJECTS + 1):
    if s < SUBJECTS:
        plan.append((f"sub-{s + 1:02d}_ts.txt", s, 1))
    plan += [(f"sub-{s:02d}_ts_run_03.tsv", s, 3), (f"sub-{s:02d}_ts_run_07.tsv", s, 7)]

header, runs = None, []
for src, s, run in plan:
    lines = [l for l in read(src) if l.strip()]
    cols = lines[0].split("\t")
    if header is None:
        header = cols
        if len(cols) != REGIONS + 1 or cols[0] != "GlobSig":
            fail(f"{src}: expected GlobSig and {REGIONS} regions, found {len(cols)} columns ({cols[0]}, ...)")
    elif cols != header:
        fail(f"{src}: its header differs from the first file's")
    rows = []
    for i, l in enumerate(lines[1:], start=2):
        cells = l.split("\t")
        if len(cells) != len(header):
            fail(f"{src}: line {i} has {len(cells)} cells, expected {len(header)}")
        rows.append("\t".join(cells[1:]))
    expected = 209 if run == 1 else 191
    if len(rows) != expected:
        fail(f"{src}: {len(rows)} TRs, expected {expected}")
    runs.append((s, run, rows))

# The global signal dropped; a repeated name gets its column number.
regions = header[1:]
unique = [f"{n}_{k}" if regions.count(n) > 1 else n for k, n in enumerate(regions, start=1)]
for s, run, rows in runs:
    sub = f"sub-{s:02d}"
    os.makedirs(os.path.join(out, sub, "func"), exist_ok=True)
    with open(os.path.join(out, sub, "func", f"{sub}_task-{TASK}_run-{run}_bold.tsv"), "w") as f:
        f.write("\t".join(unique) + "\n" + "\n".join(rows) + "\n")

os.makedirs(os.path.join(out, "atlas"))
with open(os.path.join(out, "atlas", "parcel_labels.tsv"), "w") as f:
    f.write("column\tname\tmist_name\n")
    for k, (u, n) in enumerate(zip(unique, regions), start=1):
        f.write(f"{k}\t{u}\t{n}\n")
with open(os.path.join(out, f"task-{TASK}_bold.json"), "w") as f:
    json.dump({"RepetitionTime": 2.0, "TaskName": TASK}, f, indent=2)
    f.write("\n")
with open(os.path.join(out, "dataset_description.json"), "w") as f:
    json.dump(
        {
            "Name": "ds000140 in the 122 MIST regions (from connattractor 0.1.0)",
            "BIDSVersion": "1.8.0",
            "DatasetType": "derivative",
            "GeneratedBy": [{"Name": "boldcast scripts/fetch-ds000140.sh", "Version": version}],
            "SourceDatasets": [{"URL": "https://openneuro.org/datasets/ds000140"}, {"URL": "https://pypi.org/project/connattractor/0.1.0/"}],
        },
        f,
        indent=2,
    )
    f.write("\n")
with open(os.path.join(out, "README"), "w") as f:
    f.write(
        "OpenNeuro ds000140 in the 122 MIST regions, from the connattractor 0.1.0 wheel, written by\n"
        "boldcast's scripts/fetch-ds000140.sh (its header says what was changed and why): run 1\n"
        "relabelled to the subject it belongs to (sub-XX_ts.txt is subject XX-1's), the global-signal\n"
        "column dropped, repeated MIST names given their column number (atlas/parcel_labels.tsv).\n"
        "TR 2 s. The series are band-pass filtered: develop on them, do not claim forecasting skill.\n"
    )
print(f"fetch-ds000140: {len(plan)} runs of {SUBJECTS} subjects, {len(unique)} regions", file=sys.stderr)
PY

echo "$VERSION" > "$stage/.fetch-ds000140"
if [ -d "$dir" ]; then
    rmdir "$dir" || die "cannot replace the empty directory $dir"
fi
mv "$stage" "$dir" || die "cannot move the tree into $dir"
chmod 755 "$dir"
echo "fetch-ds000140: wrote $dir"
