#!/usr/bin/python3
"""Runs bench_log_records several times and prints each run's ratios against the goals.

    bench/log/log_record_ratios.py build/default/bench/log/bench_log_records [RUNS]

The log files go to the current directory (its file system is part of what is measured). The
VM's neighbours move single figures by tens of percent from one run to the next, so each ratio
is taken within one run (a level and its write(2) baseline measured seconds apart) and the
spread over the runs is printed. Goals: bench/README.md.
"""
import json
import statistics
import subprocess
import sys


def one_run(binary):
    out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_repetitions=3",
                          "--benchmark_report_aggregates_only=true"],
                         check=True, capture_output=True, text=True).stdout
    medians = {b["run_name"]: b["cpu_time"] for b in json.loads(out)["benchmarks"]
               if b.get("aggregate_name") == "median"}
    t = lambda name: medians[name]
    return {
        "level 1 / write(2), calls/s (goal >= 0.7)": t("RawWrite/like_level/1") / t("LogRecords/level/1"),
        "level 3 / write(2), calls/s (goal >= 0.6)": t("RawWrite/like_level/3") / t("LogRecords/level/3"),
        "level 5 time / level 3 time (goal <= 1.1)": t("LogRecords/level/5") / t("LogRecords/level/3"),
        "level 1, us per call": t("LogRecords/level/1") / 1000,
        "level 3, us per call": t("LogRecords/level/3") / 1000,
        "level 5, us per call": t("LogRecords/level/5") / 1000,
        "to /dev/null: level 1, us per call": t("LogRecordsToNull/level/1") / 1000,
        "to /dev/null: level 3, us per call": t("LogRecordsToNull/level/3") / 1000,
        "to /dev/null: level 5, us per call": t("LogRecordsToNull/level/5") / 1000,
    }


def main():
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    results = [one_run(binary) for _ in range(runs)]
    for key in results[0]:
        values = [r[key] for r in results]
        print(f"{key:45s} median {statistics.median(values):6.2f}  range {min(values):.2f}-{max(values):.2f}")


if __name__ == "__main__":
    main()
