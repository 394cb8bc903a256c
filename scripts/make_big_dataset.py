"""A synthetic dataset of float32 .npy runs for the larger-than-memory benchmark (BENCHMARKS.md):
SUBJECTS x 1 run x N_TR TRs x P parcels of AR(1) noise, written through numpy's memory-mapped
writer, plus parcels.tsv (centroids on a circle)."""
import sys, os, numpy as np
root, subjects, n_tr, p = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(root, exist_ok=True)
rng = np.random.default_rng(0)
for s in range(1, subjects + 1):
    x = np.lib.format.open_memmap(f"{root}/sub-{s:04d}_run-1_bold.npy", mode="w+", dtype="<f4", shape=(n_tr, p))
    e = rng.standard_normal((n_tr, p), dtype=np.float32)
    x[0] = e[0]
    for t in range(1, n_tr):
        x[t] = 0.9 * x[t - 1] + 0.4359 * e[t]
    x.flush(); del x
with open(f"{root}/parcels.tsv", "w") as f:
    f.write("name\tx\ty\tz\n")
    for q in range(p):
        a = 2 * np.pi * q / p
        f.write(f"parcel-{q:03d}\t{np.cos(a)}\t{np.sin(a)}\t0\n")
