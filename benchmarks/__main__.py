"""python -m benchmarks [--quick] [--json FILE] [--device cpu|cuda|all] [--only overhead,scaling,...]

Prints one table per benchmark and writes the same figures as JSON. Ratios are medians
of interleaved runs in one process (plain, stepdbg, ..., plain, stepdbg, ...), so each
is measured side by side on the same noisy machine. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from . import (
    client_load,
    deep_floor,
    memory,
    overhead,
    replay_cost,
    responsiveness,
    scaling,
    snapshot_cost,
)
from .common import table
from .workloads import WORKLOADS


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    return f"{os.cpu_count()} CPUs ({cpu}){gpu}; torch {torch.__version__}; {torch.get_num_threads()} torch threads"


def ok(value: float, limit: float) -> str:
    return "met" if value <= limit else "MISSED"


def main() -> None:  # noqa: C901, PLR0912, PLR0915 - one block per benchmark table, in the order docs/performance.md prints them
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="every benchmark briefly (the test suite runs this)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--only", default="overhead,deep,scaling,responsiveness,memory,replay,snapshot,clients")
    p.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                   help="cuda: only the CUDA rows (step time, memory, snapshots on the GPU); all: the CPU's, "
                        "and the GPU's where there is one")
    a = p.parse_args()
    if a.quick:  # the suite only checks that each benchmark runs: one torch thread here and in the
        # processes it starts, whose second thread only spins against the suite's other processes on
        # a busy machine (the overhead group: 151 s in a loaded suite; side by side here, 32 s and 29 s of CPU before, 12 s and 8 s so)
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here")
    devices = {"cpu": ["cpu"], "cuda": ["cuda"], "all": ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])}[a.device]
    # The other benchmarks (scaling, responsiveness, replay, clients) measure the CPU side only.
    only = [b for b in a.only.split(",") if "cpu" in devices or b in ("overhead", "memory", "snapshot")]
    t0 = time.time()
    results: dict = {"machine": machine(), "quick": a.quick}
    print(f"machine: {results['machine']}\n")
    if "overhead" in only:
        for dev in devices:
            r = overhead.run(a.quick, dev)
            results[f"overhead_{dev}"] = r
            cols = ["default watch", "activation watch", "every condition", "detect_anomaly", "isfinite hooks",
                    *(["front end watch"] if "front end watch" in r[WORKLOADS[0]] else [])]
            rows = [[w, f"{r[w]['plain_ms']:.2f}", *[f"{r[w][c]:.3f}x" for c in cols]]
                    for w in WORKLOADS if w in r]
            print(f"1. step time, ratio to the plain loop ({dev}; medians of interleaved steps)")
            print(table(rows, ["workload", "plain ms", *cols]))
            worst = {k: max(r[w][k] for w in WORKLOADS if w in r) for k in overhead.TARGETS}
            print("targets: " + "; ".join(f"{k} <= {v}x: worst {worst[k]:.3f}x {ok(worst[k], v)}"
                                          for k, v in overhead.TARGETS.items()))
            if "syncs_per_step" in r:
                print(f"host-device syncs per step (CUDA sync debug mode): {r['syncs_per_step']}")
            print()
            r = overhead.run_fused(a.quick, dev)
            results[f"overhead_fused_{dev}"] = r
            cols = ["default watch", "skip on device"]
            rows = [[w, f"{r[w]['plain_ms']:.2f}", *[f"{r[w][c]:.3f}x" for c in cols]] for w in WORKLOADS if w in r]
            print(f"1b. fused AdamW (takes found_inf): the default watch and --skip-on-device ({dev})")
            print(table(rows, ["workload", "plain ms", *cols]))
            if "syncs_per_step" in r:
                print(f"host-device syncs per step (CUDA sync debug mode): {r['syncs_per_step']}")
            print()
    if "deep" in only:
        r = deep_floor.run(a.quick)
        results["deep_floor"] = r
        print(f"1c. many tensors against torch's floor (96-block residual MLP, {r['tensors']} tensors, "
              f"SGD momentum, 1 thread; medians of interleaved steps, thread CPU time)")
        cols = ["torch's floor", "default watch"]
        print(table([[f"{r['plain_ms']:.2f}", *[f"{r[c]:.3f}x (+{r[c + ' ms']:.2f} ms)" for c in cols]]],
                    ["plain ms", *cols]))
        print(f"target: default watch <= {deep_floor.TARGET}x: {ok(r['default watch'], deep_floor.TARGET)}\n")
    if "scaling" in only:
        r = scaling.run(a.quick)
        results["scaling"] = r
        rows = [[n, v["modules"], f"{v['plain_ms']:.2f}", f"{v['watch_cost_us']:.0f}", f"{v['watch_cost_us'] / n:.2f}"]
                for n, v in r["rows"].items()]
        print("2. default watch cost against parameter tensors")
        print(table(rows, ["tensors", "modules", "plain ms", "watch us/step", "us per tensor"]))
        print(f"target: grows no faster than linearly: {'met' if r['linear_or_better'] else 'MISSED'}\n")
    if "responsiveness" in only:
        r = responsiveness.run(a.quick)
        results["responsiveness"] = r
        print(f"3. responsiveness (real served job, real client; module tree of {r['modules']} modules)")
        rows = [[k, v, f"<= {responsiveness.TARGETS[k]}" if k in responsiveness.TARGETS else "",
                 ok(v, responsiveness.TARGETS[k]) if k in responsiveness.TARGETS else ""]
                for k, v in r.items() if k != "modules"]
        print(table(rows, ["measure", "value", "target", ""]) + "\n")
    if "memory" in only:
        for dev in devices:
            r = memory.run(a.quick, dev)
            results[f"memory_{dev}"] = r
            print(f"4. memory ({dev}; gpt workload, fresh process each)")
            key = "cuda_peak" if dev != "cpu" else "peak_rss"
            print(table([[m, f"{r[m][key] / 1e6:.1f} MB"] for m in ("plain", "watch", "armed") if m in r], ["run", key]))
            w = r["watch_extra_of_params"]
            armed = r.get("armed_extra_of_params")
            print(f"default watch adds {w * 100:.2f}% of parameter memory (target < 1%: {ok(w, 0.01)})"
                  + (f"; replay armed adds {armed * 100:.2f}%" if armed is not None else "") + "\n")
    if "replay" in only:
        r = replay_cost.run(a.quick)
        results["replay"] = r
    if "replay" in only and "skipped" in results["replay"]:
        print(f"5. one replay against one step: skipped, {results['replay']['skipped']}\n")
    elif "replay" in only:
        r = results["replay"]
        print(f"5. one replay against one step ({r['model']}; medians of interleaved runs)")
        print(table([[f"{r['step_ms']:.1f}", f"{r['anomaly_step_ms']:.1f}", f"{r['replay_ms']:.1f}",
                      f"{r['replay_per_step']:.2f}x", f"{r['budget_ms']:.1f}"]],
                    ["step ms", "step under detect_anomaly ms", "replay ms", "replay / step", "budget ms"]))
        print(f"target: replay <= 3 steps + detect_anomaly's overhead: {'met' if r['within_budget'] else 'MISSED'}\n")
    if "snapshot" in only:
        for dev in devices:
            r = snapshot_cost.run(a.quick, dev)
            results[f"snapshot_{dev}"] = r
            print(f"6. one snapshot (--keep-every) against one step ({dev}; medians of interleaved runs)")
            cuda = dev != "cpu"
            rows = [[w, f"{v['step_ms']:.2f}", f"{v['snapshot_ms']:.2f}", f"{v['snapshot_per_step']:.2f}x",
                     f"{v['bytes'] / 1e6:.1f} MB", *([f"{v['keep_every_100_ratio']:.3f}x"] if cuda else [])]
                    for w, v in r.items()]
            print(table(rows, ["workload", "step ms", "snapshot ms", "snapshot / step", "size (model + optimizer)",
                               *(["steps at --keep-every 100"] if cuda else [])]))
            worst = max(v["snapshot_per_step"] for v in r.values())
            line = f"target: a snapshot <= {snapshot_cost.TARGET_CPU:g} step: worst {worst:.2f}x {ok(worst, 1.0)}"
            if cuda:
                w100 = max(v["keep_every_100_ratio"] for v in r.values()) - 1
                line += f"; at --keep-every 100 < 2% of step time: worst {w100 * 100:.2f}% {ok(w100, 0.02)}"
            print(line + "\n")
    if "clients" in only:
        rows = []
        for op, r in client_load.run(a.quick, ops=("status", "stacks")).items():
            results["clients" if op == "status" else f"clients_{op}"] = r
            rows.append([op, f"{r['plain_step_ms']:.3f}", f"{r['attached_ratio']:.3f}x",
                         f"{r['flooded_step_ms']:.3f}", f"{r['ratio']:.3f}x", f"{r['polling_ratio']:.3f}x",
                         f"{r['requests_per_s']:.0f}"])
        print(f"8. {r['clients']} clients calling one op as fast as they can, against none and against one idle "
              "front end (served job)")
        print(table(rows, ["op", "step ms", "one idle front end", "step ms, flooded", "vs none", "vs one idle",
                           "answers/s"]))
        worst = max(results["clients"]["polling_ratio"], results["clients_stacks"]["polling_ratio"])
        print(f"target: flooded <= {client_load.TARGET}x one idle front end (attaching arms the replay: "
              f"python -m benchmarks.armed_cost): worst {worst:.3f}x {ok(worst, client_load.TARGET)}\n")
    if not torch.cuda.is_available():
        print("7. GPU: no CUDA device here; the CUDA rows run where one is present.")
    results["seconds"] = round(time.time() - t0, 1)
    print(f"\ntotal {results['seconds']} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
