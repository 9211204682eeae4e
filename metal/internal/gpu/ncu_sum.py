"""Sums ncu's --csv metrics of a decode step (run.sh ncu-decode): DRAM bytes
read and written per kernel and for the step, kernel time, and the step's
DRAM throughput (bytes over the kernels' time, and ncu's own percentage of
peak averaged over the kernels, weighted by time)."""
import csv
import sys
from collections import OrderedDict

SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
         "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "%": 1}

rows = {}
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    key = (r["ID"], r["Kernel Name"])
    v = float(r["Metric Value"].replace(",", "")) * SCALE.get(r["Metric Unit"], 1)
    rows.setdefault(key, {})[r["Metric Name"]] = v
by = OrderedDict()
tot = {"read": 0.0, "write": 0.0, "time": 0.0, "pct_time": 0.0}
for (_, name), m in rows.items():
    k = by.setdefault(name.split("(")[0], {"n": 0, "read": 0.0, "write": 0.0, "time": 0.0})
    k["n"] += 1
    k["read"] += m.get("dram__bytes_read.sum", 0)
    k["write"] += m.get("dram__bytes_write.sum", 0)
    k["time"] += m.get("gpu__time_duration.sum", 0)
    tot["read"] += m.get("dram__bytes_read.sum", 0)
    tot["write"] += m.get("dram__bytes_write.sum", 0)
    tot["time"] += m.get("gpu__time_duration.sum", 0)
    tot["pct_time"] += m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", 0) * m.get("gpu__time_duration.sum", 0)
print("%-28s %5s %12s %12s %10s %8s" % ("kernel", "count", "read MB", "written MB", "time us", "GB/s"))
for name, k in sorted(by.items(), key=lambda kv: -kv[1]["time"]):
    gbs = (k["read"] + k["write"]) / k["time"] / 1e9 if k["time"] else 0
    print("%-28s %5d %12.3f %12.3f %10.1f %8.0f" % (name, k["n"], k["read"] / 1e6, k["write"] / 1e6, 1e6 * k["time"], gbs))
if tot["time"]:
    print("step: %d dispatches, read %.2f MB, written %.2f MB, kernel time %.1f us, %.0f GB/s over kernel time, "
          "dram__throughput %.1f%% of peak (time-weighted)" % (len(rows), tot["read"] / 1e6, tot["write"] / 1e6, 1e6 * tot["time"],
                                                              (tot["read"] + tot["write"]) / tot["time"] / 1e9, tot["pct_time"] / tot["time"]))
