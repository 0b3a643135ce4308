#!/usr/bin/env python3
"""Measures the CPU time of generating each case of posenc's catalog, one process per case, and
prints golden/cases/case_costs.inc, the cost table `posenc generate --shard i/n` balances its
shards with (golden/cases/catalog.hpp, case_cost):

    /usr/bin/python3 tools/case_costs.py build/posenc > golden/cases/case_costs.inc

CPU time (user + system of the child, from getrusage) rather than wall time, so a loaded machine
changes the table little; --repeat R keeps each case's fastest of R runs. The unit is 0.1 ms.

--shards 2,4,8 measures the shards instead (docs/cluster.md's table): each `generate --shard i/n
--no-catalog` of the whole catalog run alone, its CPU time, and per n the largest and the mean.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile


def cpu_of(cmd):
    """user + system seconds of the command (a child process), or raises on failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("posenc")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--raw", action="store_true", help="print 'scheme id seconds' lines instead")
    ap.add_argument("--shards", help="comma-separated shard counts: time the shards instead")
    a = ap.parse_args()
    if a.shards:
        for n in (int(x) for x in a.shards.split(",")):
            times = []
            for i in range(n):
                with tempfile.TemporaryDirectory() as d:
                    times.append(cpu_of([a.posenc, "generate", "--shard", f"{i}/{n}", "--no-catalog", "--out", d]))
            mean = sum(times) / n
            print(f"{n} shards: largest {max(times):.2f} s, mean {mean:.2f} s, largest/mean "
                  f"{max(times) / mean:.3f} (" + " ".join(f"{t:.2f}" for t in times) + ")", flush=True)
        return
    cases = json.loads(subprocess.run([a.posenc, "list", "--format", "json"], check=True,
                                      capture_output=True, text=True).stdout)
    startup = min(cpu_of([a.posenc, "list"]) for _ in range(3))
    rows = []
    for c in cases:
        best = None
        for _ in range(a.repeat):
            with tempfile.TemporaryDirectory() as d:
                t = cpu_of([a.posenc, "generate", "--scheme", c["scheme"], "--case", "^" + c["id"] + "$",
                            "--no-catalog", "--out", d])
            best = t if best is None else min(best, t)
        rows.append((c["scheme"], c["id"], max(best - startup, 0.0)))
        print(f"{c['scheme']} {c['id']} {rows[-1][2]:.4f}", file=sys.stderr)
    if a.raw:
        for s, i, t in rows:
            print(f"{s} {i} {t:.6f}")
        return
    print("// Generated (do not edit): the CPU time of generating each case of the catalog, in units")
    print("// of 0.1 ms (at least 1), on one core of the machine that ran it. golden/cases/catalog.cpp")
    print("// balances `generate --shard i/n` with it; a case missing here costs the median of its")
    print("// scheme's rows. Regenerate after adding cases or changing a generator's cost:")
    print("//   /usr/bin/python3 tools/case_costs.py build/posenc > golden/cases/case_costs.inc")
    for s, i, t in rows:
        print(f'{{"{s}", "{i}", {max(1, round(t * 1e4))}}},')


if __name__ == "__main__":
    main()
