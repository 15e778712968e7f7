#!/usr/bin/python3
"""tools/scaling_study.py, two parts:
 1. collect on a hand-written sweep with known numbers (a run.txt-only folder as older scripts
    wrote, a resumed run that logged steps twice, an eval record): every derived column equals
    the value computed here by hand;
 2. `run` on a real local sweep with brt-dist (2 model sizes x 1 and 2 ranks, 10 steps each,
    synthetic data), then the CSV's rows/columns/values and the PNGs are checked.
usage: test_scaling_study.py BRT_DIST   (from the repository root)"""
import csv
import json
import math
import shlex
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "scaling_study.py"
PY = "/usr/bin/python3"
# tests/integration/common.sh's SMALL model, with a peak that keeps MFU below 100% here.
SMALL = ("model.layers=2 model.recurrent_layers=[1] model.d_model=32 model.heads=2 model.head_dim=16 "
         "model.d_ff=64 model.vocab=64 model.seq_len=32 model.window=8 model.state_size=8 "
         "train.batch=2 train.eval_every=0 train.peak_gflops=500 log.every=1 data.source=synthetic "
         "optim.warmup=2")


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def close(a, b, rel=1e-9):
    return math.isclose(float(a), float(b), rel_tol=rel)


def train_record(step, loss, tps, flops_per_token, peak, tokens_per_step, ranks=1):
    # brt-dist logs the job's MFU: achieved rate over ranks x peak per rank.
    gflops = flops_per_token * tps / 1e9
    return json.dumps({"event": "train", "step": step, "loss": loss, "bits_per_token": loss / math.log(2),
                       "lr": 0.01, "grad_norm": 1.0, "tokens_per_s": tps, "gflops": gflops,
                       "mfu": gflops / (peak * ranks), "tokens_seen": step * tokens_per_step, "eta_s": 0})


def hand_written_sweep(root):
    """Two runs of one model (1 and 4 ranks), metrics only: no train.log, so FLOPs/token and the
    peak come from the records themselves."""
    fpt, peak = 6.0e6, 100.0
    runs = {
        # name: (ranks, tokens/step, tokens/s per step 1..10)
        "m-dp1": (1, 1000, [10.0, 500, 520, 480, 510, 490, 505, 495, 500, 515]),
        "m-dp4": (4, 4000, [40.0, 1800, 1700, 1750, 1720, 1760, 1740, 1730, 1710, 1790]),
    }
    for name, (ranks, tps_step, series) in runs.items():
        d = root / name
        d.mkdir(parents=True)
        (d / "run.txt").write_text(f"name={name}\nconfig=configs/40m.toml\nranks={ranks}\n"
                                   f"overrides=train.steps=10 train.zero={int(ranks > 1)}\n")
        lines = [train_record(s, 5.0 - 0.1 * s, series[s - 1], fpt, peak, tps_step, ranks)
                 for s in range(1, 11)]
        if name == "m-dp4":  # resumed from step 8: steps 9 and 10 logged again, later wins
            lines += [train_record(s, 4.0 - 0.1 * s, 1600.0, fpt, peak, tps_step, ranks) for s in (9, 10)]
            lines.append(json.dumps({"event": "eval", "step": 10, "loss": 3.0,
                                     "bits_per_token": 3.0 / math.log(2)}))
        (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (root / "not-a-run").mkdir()  # no metrics.jsonl: skipped
    return fpt, peak


def check_hand_written(work):
    sweep = work / "hand"
    fpt, peak = hand_written_sweep(sweep)
    out = subprocess.run([PY, str(TOOL), "collect", str(sweep), "--no-plots"],
                         capture_output=True, text=True)
    check(out.returncode == 0, f"collect failed: {out.stdout}{out.stderr}")
    rows = {r["name"]: r for r in csv.DictReader(open(sweep / "sweep.csv"))}
    check(set(rows) == {"m-dp1", "m-dp4"}, f"rows {sorted(rows)}")
    # Warm-up = 10% of 10 steps = step 1 left out; medians of steps 2..10 by hand.
    med1 = sorted([500, 520, 480, 510, 490, 505, 495, 500, 515])[4]
    med4 = sorted([1800, 1700, 1750, 1720, 1760, 1740, 1730, 1600, 1600])[4]
    a, b = rows["m-dp1"], rows["m-dp4"]
    check(close(a["tokens_per_s"], med1) and close(b["tokens_per_s"], med4),
          f"median tokens/s {a['tokens_per_s']} {b['tokens_per_s']} != {med1} {med4}")
    check(close(b["scaling_efficiency"], (med4 / 4) / med1), f"efficiency {b['scaling_efficiency']}")
    check(close(a["scaling_efficiency"], 1.0) and b["baseline"] == "m-dp1", "baseline")
    check(close(b["mfu"], fpt * med4 / 1e9 / (4 * peak), 1e-6), f"mfu {b['mfu']}")
    check(close(b["final_loss"], 3.0) and close(a["final_loss"], 4.0), "final loss (later record wins)")
    check(close(b["final_eval_bits_per_token"], 3.0 / math.log(2), 1e-8) and a["final_eval_bits_per_token"] == "",
          "eval bits/token")
    check(close(b["compute_flops"], 40000 * fpt, 1e-6) and close(b["train_flops_per_token"], fpt, 1e-6), "compute")
    check(b["global_batch_tokens"] == "4000" and b["zero"] == "1" and b["dp"] == "4", "layout columns")
    print(f"hand-written sweep: medians {med1}/{med4} tok/s, efficiency {float(b['scaling_efficiency']):.4f}, "
          "MFU, compute, resume de-duplication and eval as computed by hand")


def png_size(path):
    data = Path(path).read_bytes()
    check(data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path}: not a PNG")
    check(data[-8:-4] == b"IEND", f"{path}: truncated PNG")
    return struct.unpack(">II", data[16:24]), len(data)


def check_real_sweep(work, brt_dist):
    table = work / "table.tsv"
    sizes = {"d32": "", "d64": "model.d_model=64 model.d_ff=128"}
    lines = ["# NAME CONFIG RANKS OVERRIDES"]
    for size, extra in sizes.items():
        for ranks in (1, 2):
            zero = " train.zero=1" if ranks == 2 and size == "d64" else ""
            lines.append(f"{size}-dp{ranks}  configs/tiny.toml  {ranks}  {SMALL} {extra} train.steps=10{zero}")
    table.write_text("\n".join(lines) + "\n")
    sweep = work / "sweep"
    cmd = [PY, str(TOOL), "run", str(table), str(sweep), "--brt-dist", brt_dist, "--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        for log in sweep.glob("*/train.log"):
            print(f"== {log}\n{log.read_text()[-2000:]}", file=sys.stderr)
        raise AssertionError(f"{shlex.join(cmd)} failed: {out.stdout}{out.stderr}")
    rows = list(csv.DictReader(open(sweep / "sweep.csv")))
    expected_columns = ["name", "model_variant", "params", "ranks", "dp", "tp", "global_batch_tokens",
                        "tokens_per_s", "gflops", "mfu", "final_loss", "final_eval_bits_per_token",
                        "tokens_seen", "compute_flops", "scaling_efficiency"]
    missing = [c for c in expected_columns if c not in rows[0]]
    check(not missing, f"sweep.csv lacks {missing}")
    by_name = {r["name"]: r for r in rows}
    check(sorted(by_name) == ["d32-dp1", "d32-dp2", "d64-dp1", "d64-dp2"], f"rows {sorted(by_name)}")
    for r in rows:
        ranks = int(r["ranks"])
        check(int(r["dp"]) == ranks and r["tp"] == "1", f"{r['name']}: dp/tp {r['dp']} {r['tp']}")
        check(r["model_variant"] == "rec:fixed:skip", f"{r['name']}: variant {r['model_variant']}")
        # 2 streams x 32 tokens per rank per step, 10 steps.
        check(int(r["global_batch_tokens"]) == 64 * ranks, f"{r['name']}: batch {r['global_batch_tokens']}")
        check(int(r["tokens_seen"]) == 640 * ranks, f"{r['name']}: tokens {r['tokens_seen']}")
        check(float(r["tokens_per_s"]) > 0 and float(r["gflops"]) > 0, f"{r['name']}: throughput")
        check(0 < float(r["mfu"]) < 1, f"{r['name']}: MFU {r['mfu']}")
        check(math.isfinite(float(r["final_loss"])) and 0 < float(r["final_loss"]) < math.log(64) + 1,
              f"{r['name']}: loss {r['final_loss']}")
        check(close(r["compute_flops"], float(r["tokens_seen"]) * float(r["train_flops_per_token"]), 1e-9),
              f"{r['name']}: compute")
        check(float(r["scaling_efficiency"]) > 0, f"{r['name']}: efficiency")
        check(r["baseline"] == r["name"][:3] + "-dp1", f"{r['name']}: baseline {r['baseline']}")
        run_json = json.loads((sweep / r["name"] / "run.json").read_text())
        check(run_json["status"] == 0 and run_json["params"] == int(r["params"]), f"{r['name']}: run.json")
    check(int(by_name["d64-dp1"]["params"]) > int(by_name["d32-dp1"]["params"]), "params order")
    check(by_name["d64-dp1"]["params"] == by_name["d64-dp2"]["params"], "same model, same params")
    check(float(by_name["d64-dp1"]["train_flops_per_token"]) > float(by_name["d32-dp1"]["train_flops_per_token"]),
          "FLOPs/token grow with the model")
    check(by_name["d64-dp2"]["zero"] == "1" and by_name["d32-dp2"]["zero"] == "0", "ZeRO column from train.log")
    md = (sweep / "sweep.md").read_text().splitlines()
    check(md[0].startswith("| run |") and sum(l.startswith("| d") for l in md) == 4, "sweep.md rows")
    for png in ("throughput_vs_ranks", "scaling_efficiency", "mfu", "loss_vs_tokens", "loss_vs_compute"):
        (w, h), nbytes = png_size(sweep / f"{png}.png")
        check(w >= 800 and h >= 600 and nbytes > 20000, f"{png}.png: {w}x{h}, {nbytes} bytes")
    print("local sweep: 4 runs (2 sizes x 1, 2 ranks) -> sweep.csv/sweep.md with the expected rows and "
          "values, 5 PNG plots; throughput " +
          ", ".join(f"{r['name']} {float(r['tokens_per_s']):.0f} tok/s" for r in rows))


def main():
    brt_dist = str(Path(sys.argv[1]).resolve())
    with tempfile.TemporaryDirectory(prefix="scaling-study-") as tmp:
        work = Path(tmp)
        check_hand_written(work)
        check_real_sweep(work, brt_dist)
    print("PASS")


if __name__ == "__main__":
    main()
