#!/usr/bin/python3
"""Per-kernel table from `ncu --csv --metrics ...` (tools/gpu/lease.sh profile): share of the GPU
time, mean duration, DRAM bytes and throughput, SM throughput.
    tools/gpu/ncu_table.py ncu.csv"""
import argparse
import collections
import csv
import io


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="ncu --csv output")
    table(ap.parse_args().csv)


def table(path):
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        by[r["Kernel Name"].split("(")[0][:58]][r["Metric Name"]].append(
            float(r["Metric Value"].replace(",", "")))
    total = sum(sum(m["gpu__time_duration.sum"]) for m in by.values())
    print(f"{'kernel':58s} {'share':>6s} {'n':>4s} {'mean us':>8s} {'DRAM MB':>8s} "
          f"{'DRAM %':>7s} {'SM %':>5s}")
    for k, m in sorted(by.items(), key=lambda kv: -sum(kv[1]["gpu__time_duration.sum"])):
        t = m["gpu__time_duration.sum"]
        n = len(t)
        mb = (sum(m["dram__bytes_read.sum"]) + sum(m["dram__bytes_write.sum"])) / n / 1e6
        dram = sum(m["dram__throughput.avg.pct_of_peak_sustained_elapsed"]) / n
        sm = sum(m["sm__throughput.avg.pct_of_peak_sustained_elapsed"]) / n
        print(f"{k:58s} {100 * sum(t) / total:5.1f}% {n:4d} {sum(t) / n / 1e3:8.1f} {mb:8.1f} "
              f"{dram:6.1f}% {sm:4.0f}%")


if __name__ == "__main__":
    main()
