#!/usr/bin/env python3
"""Runs the incast scenarios of docs/congestion.md ("Incast in simulated time") with incast_sim
and renders, for each, every flow's rate through the bottleneck and the bottleneck queue over
simulated time, as PNG files; also writes the CSVs and the summaries next to them.

Usage: tools/plot-incast.py --sim build/tests/incast/incast_sim --out docs/img [--only NAME...]

The runs are deterministic, so the committed images change only when the model does.
"""
import argparse
import csv
import pathlib
import subprocess
import sys

try:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot-incast: matplotlib is missing (Debian: apt-get install python3-matplotlib, see tools/setup.sh)")

# name -> incast_sim arguments, title
SCENARIOS = {
    **{f"incast-paper-{n}": ([f"--flows", str(n), "--params", "paper"],
                             f"{n} flows into one 40 Gb/s port, DCQCN with the paper's parameters")
       for n in (2, 4, 8, 16)},
    **{f"incast-nvidia-{n}": ([f"--flows", str(n), "--params", "nvidia"],
                              f"{n} flows into one 40 Gb/s port, DCQCN with NVIDIA's defaults")
       for n in (2, 4, 8, 16)},
    "incast-none-16": (["--flows", "16", "--no-dcqcn"], "16 flows into one 40 Gb/s port, no DCQCN"),
    "arrive-leave-paper": (["--arrive-leave", "--params", "paper"],
                           "4 flows arriving and leaving every 15 ms, the paper's parameters"),
}


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"plot-incast: {path} holds no samples")
    flows = sum(1 for k in rows[0] if k.startswith("gbps_"))
    t = [float(r["time_us"]) / 1000 for r in rows]
    queue = [float(r["queue_bytes"]) / 1000 for r in rows]
    gbps = [[float(r[f"gbps_{i}"]) for r in rows] for i in range(flows)]
    return t, queue, gbps


def plot(name, title, csv_path, png_path):
    t, queue, gbps = read_csv(csv_path)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    for i, series in enumerate(gbps):
        top.plot(t, series, linewidth=0.9, label=f"flow {i}" if len(gbps) <= 8 else None)
    top.set_ylabel("rate through the bottleneck (Gb/s, 1-ms mean)")
    top.set_ylim(bottom=0)
    top.grid(alpha=0.3)
    if len(gbps) <= 8:
        top.legend(fontsize="small", ncol=4, loc="upper right")
    top.set_title(title, fontsize="medium")
    bottom.plot(t, queue, color="black", linewidth=0.8)
    bottom.axhline(5, color="tab:green", linestyle=":", linewidth=0.8, label="Kmin 5 KB")
    bottom.axhline(200, color="tab:red", linestyle=":", linewidth=0.8, label="Kmax 200 KB")
    bottom.set_ylabel("queue (KB)")
    bottom.set_xlabel("simulated time (ms)")
    bottom.set_ylim(bottom=0)
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize="small", loc="upper right")
    fig.tight_layout()
    fig.savefig(png_path, dpi=80)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", required=True, help="the incast_sim program")
    ap.add_argument("--out", required=True, help="directory for the PNGs, CSVs and summaries")
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="just these scenarios")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in args.only or SCENARIOS:
        sim_args, title = SCENARIOS[name]
        csv_path = out / f"{name}.csv"
        run = subprocess.run([args.sim, *sim_args, "--csv", str(csv_path)], capture_output=True, text=True,
                             timeout=300)
        (out / f"{name}.txt").write_text(run.stderr)
        sys.stdout.write(run.stderr)
        if run.returncode != 0:
            failed.append(f"{name}: incast_sim exited {run.returncode}")
            continue
        png = out / f"{name}.png"
        plot(name, title, csv_path, png)
        if not png.is_file() or png.stat().st_size < 1000:
            failed.append(f"{name}: no image")
        print(f"plot-incast: wrote {png}")
    for f in failed:
        print(f"plot-incast: FAIL {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
