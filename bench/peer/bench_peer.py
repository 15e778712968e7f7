#!/usr/bin/env python3
"""Training throughput of the PyTorch peer (peer_model.py) on a brt-dist config, and of
brt-dist itself on the same config, device and steps (docs/gpu.md, "The PyTorch peer").

    bench_peer.py configs/150m.toml train.batch=4 --steps 10 --brt-dist build/release/launch/brt-dist
    bench_peer.py configs/tiny.toml --device cpu --threads 1 --steps 3 --warmup 1
    bench_peer.py --verify slide rec:fixed:skip bst:sh:s4d     # fast path vs plain float64

A step is forward, backward, gradient clipping and AdamW on B x N tokens (random tokens; the
carried state runs across steps as in brt-dist, model.md §8). Timed: `--steps` steps after
`--warmup` steps (torch.compile happens in the first), synchronised at both ends. Printed:
tokens/s, achieved TFLOP/s by model.md §10's count (brt-dist's "FLOPs/token" line when it runs,
else this file's port of core/flops.cpp) and MFU against a GEMM peak measured now (bf16
8192^3 torch.matmul on CUDA, fp32 2048^3 best of 7 on the CPU, as brt-dist's own) or
--peak-tflops. With --brt-dist BIN: `BIN train CONFIG OVERRIDES ...` for warmup + steps steps
(AdamW, log every step, synthetic data, train.device/precision as the peer's), its tokens/s
over the same timed steps, and brt-dist / peer tokens/s.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import peer_config  # noqa: E402  (torch-free: the config as brt-dist reads it)


def fail(msg):
    print("bench_peer: error: " + msg, file=sys.stderr)
    sys.exit(2)


# ------------------------------------------------------------------ config (as brt-dist reads it)
def load_config(path, overrides):
    """peer_config.load_config (bases, overrides, every key checked against brt-dist's schema);
    a refused config ends the benchmark with status 2, naming the file or key."""
    try:
        return peer_config.load_config(path, overrides)
    except peer_config.ConfigError as e:
        fail(str(e))


def flops_per_token(c):
    """model.md §10 training FLOPs per token (3 x forward), as core/flops.cpp counts them."""
    D, A, F, W, S, V = c.d_model, c.A, c.d_ff, c.window, c.state_size, c.vocab
    fwd = (2 * (4 * D * A + 2 * D * F) + 4 * W * A) * c.layers + 2 * D * V
    kind = c.kind
    if kind[0] == "rec":
        per_state = 8 * D * A + 4 * S * A + 8 * W * A + 2 * 2 * A * D
        if kind[1] == "lstm":
            per_state += 2 * (2 * 2 * A * D)
        if kind[2] == "dual":
            per_state += 2 * 2 * D * F + (2 * (2 * F * D) if kind[1] == "lstm" else 0)
        fwd += len(c.recurrent_layers) * (2 * (2 * D * A) + 4 * S * A + (S / W) * per_state)
    if kind[0] == "bst":
        Ds, mf, mh = D / 4, kind[1] == "mf", kind[1] == "mh"
        C = c.ctx_states if mf else c.heads if mh else 1
        r, k_c = (c.ctx_states / W, c.ctx_states) if mf else (1, W / 2)
        u = c.ctx_states / W if mf else c.heads if mh else 1
        fwd += len(c.bst_layers) * (2 * (D * A + A * D) + 4 * D * A * r + 4 * A * k_c + 2 * D * Ds +
                                    2 * Ds * D * u + (65 * (1 + C) + 8 * C) * Ds)
    return 3 * fwd


# ------------------------------------------------------------------ brt-dist
STEP_RE = re.compile(r"^step\s+(\d+)/(\d+) \| loss ([-\d.naif]+) .*?\|\s+([\d.]+) tok/s", re.M)


def run_brt_dist(args, tokens_per_step, device, precision):
    steps = args.warmup + args.steps
    cmd = [args.brt_dist, "train", args.config, *args.overrides, "train.batch=%d" % args.batch_size,
           "train.steps=%d" % steps, "optim.kind=adamw", "optim.schedule=constant", "log.every=1",
           "log.metrics_path=", "train.eval_every=0", "checkpoint.dir=", "data.source=synthetic",
           "train.device=" + device, "train.precision=" + precision]
    if args.checkpoint:   # the same weights (brt-dist checks that the shapes fit the config)
        cmd.append("checkpoint.init_from=%s" % args.checkpoint)
    env = dict(os.environ)
    if device == "cpu":
        env["OMP_NUM_THREADS"] = str(args.threads)
    print("brt-dist command: " + " ".join(map(str, cmd)), flush=True)
    start = time.time()
    done = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True)
    out = done.stdout + done.stderr
    if args.brt_dist_log:
        Path(args.brt_dist_log).write_text(out)
    if done.returncode != 0:
        fail("brt-dist exited %d:\n%s" % (done.returncode, out[-3000:]))
    m = re.search(r"FLOPs/token \(model.md §10, training = 3x forward\): ([0-9.e+-]+)", out)
    steps_seen = [(int(s), float(loss), float(tps)) for s, _, loss, tps in STEP_RE.findall(out)]
    timed = [t for t in steps_seen if t[0] > args.warmup]
    if not m or len(timed) < args.steps:
        fail("brt-dist output has no FLOPs/token line or fewer than %d step lines:\n%s" % (args.steps, out[-3000:]))
    seconds = sum(tokens_per_step / tps for _, _, tps in timed)
    return {"flops_per_token": float(m.group(1)), "tokens_per_s": len(timed) * tokens_per_step / seconds,
            "step_ms": 1e3 * seconds / len(timed), "loss_last": timed[-1][1], "wall_s": time.time() - start,
            "cmd": " ".join(map(str, cmd))}


# ------------------------------------------------------------------ the peer
def measure_peak(torch, device):
    """TFLOP/s of a bf16 8192^3 matmul on CUDA (mean of 10 after 3), fp32 2048^3 best of 7 on the CPU."""
    if device.type == "cuda":
        a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        return 2 * 8192 ** 3 * 10 / (time.perf_counter() - t) / 1e12, "bf16 8192^3 torch.matmul, mean of 10, measured now"
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    best = min(_timed(lambda: a @ b) for _ in range(7))
    return 2 * 2048 ** 3 / best / 1e12, "fp32 2048^3 torch.matmul, best of 7, %d threads, measured now" % torch.get_num_threads()


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def make_optimizer(torch, model, optim, device):
    """AdamW as brt-dist's (model.md §10c): β 0.9/0.98, ε 1e-8, decay on matrices only; fused on CUDA."""
    wd = float(optim["weight_decay"])
    params = [p for p in model.parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    kw = dict(lr=float(optim["lr"]), betas=(float(optim["beta1"]), float(optim["beta2"])), eps=float(optim["eps"]))
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "AdamW(fused)"
        except (TypeError, RuntimeError):
            pass
    try:
        return torch.optim.AdamW(groups, foreach=True, **kw), "AdamW(foreach)"
    except TypeError:
        return torch.optim.AdamW(groups, **kw), "AdamW"


def build_model(torch, pm, mcfg, args, device, compile_on):
    model = pm.PeerModel(mcfg, attention=args.attention, compile=compile_on, device=device)
    if args.checkpoint:
        model.load_brt_parameters(args._ckpt.parameters)
    else:
        model.init_random(args.seed)
    return model.to(device=device, dtype=torch.float64 if args.precision == "fp64" else torch.float32)


def bench_peer(torch, pm, mcfg, args, device, clip):
    compile_on = not args.no_compile and pm.HAVE_COMPILE
    model = build_model(torch, pm, mcfg, args, device, compile_on)
    opt, opt_name = make_optimizer(torch, model, args._cfg["optim"], device)
    bf16 = args.precision == "bf16"
    act = torch.bfloat16 if bf16 else next(model.parameters()).dtype
    B, N, V = args.batch_size, mcfg.seq_len, mcfg.vocab
    gen = torch.Generator(device=device).manual_seed(args.seed)
    batches = [(torch.randint(0, V, (B, N), device=device, generator=gen),
                torch.randint(0, V, (B, N), device=device, generator=gen)) for _ in range(2)]
    mask = torch.ones(B, N, dtype=torch.bool, device=device)
    state = model.initial_state(B, device, act)
    params = list(model.parameters())
    optim = args._cfg["optim"]
    lr, warm = float(optim["lr"]), max(1, int(optim["warmup"]))   # model.md §10c warmup
    print("peer: %s, %d layers, D %d, H %d x %d, F %d, V %d, N %d, W %d, S %d; B %d; attention %s, compile %s, %s, %s, torch %s, %s"
          % (mcfg.variant, mcfg.layers, mcfg.d_model, mcfg.heads, mcfg.head_dim, mcfg.d_ff, V, N, mcfg.window,
             mcfg.state_size, B, model.attention, "on" if model.compiled else "off",
             "bf16 autocast" if bf16 else args.precision, opt_name, torch.__version__, device), flush=True)

    def step(i):
        nonlocal state
        tok, tgt = batches[i % 2]
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (i + 1) / warm)
        start = torch.full((B,), i == 0, dtype=torch.bool, device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss, state = model.loss(tok, tgt, mask, state, start)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    t = time.perf_counter()
    for i in range(args.warmup):
        loss = step(i)
    sync()
    warm_s = time.perf_counter() - t
    losses = []
    t = time.perf_counter()
    for i in range(args.warmup, args.warmup + args.steps):
        losses.append(step(i))
    sync()
    seconds = time.perf_counter() - t
    last = float(losses[-1])
    if not math.isfinite(last):
        print("warning: the peer's loss is %s (the timing stands)" % last)
    out = {"tokens_per_s": args.steps * B * N / seconds, "step_ms": 1e3 * seconds / args.steps, "loss_last": last,
           "warmup_s": warm_s, "attention": model.attention, "compile": model.compiled, "optimizer": opt_name}
    if device.type == "cuda":
        out["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    del model, opt, state, batches
    return out


# ------------------------------------------------------------------ --verify
def verify(torch, pm, args, device):
    """The fast path (attention/compile as chosen, float32, on `device`) against the plain path
    in float64 on a tiny model of each variant: 2 carried segments, one stream restarting at the
    second; losses and whole gradients. Then bf16 autocast's loss (uncompiled: no second compile)."""
    worst_ok = True
    for variant in args.verify:
        table = dict(variant=variant, layers=3, recurrent_layers=[1], bst_layers=[0, 2], d_model=64, heads=2,
                     head_dim=32, d_ff=128, vocab=512, seq_len=512, window=512 if variant == "xl" else 128,
                     state_size=16, ctx_states=8, ssm_state=16)
        mcfg = pm.PeerConfig.from_table(table)
        ref = pm.PeerModel(mcfg, attention="plain").init_random(args.seed).double().to(device)
        fast = pm.PeerModel(mcfg, attention=args.attention, compile=not args.no_compile, device=device)
        fast.load_state_dict(ref.state_dict())
        fast = fast.float().to(device)
        gen = torch.Generator(device=device).manual_seed(1)
        segs = [(torch.randint(0, 512, (2, 512), device=device, generator=gen),
                 torch.randint(0, 512, (2, 512), device=device, generator=gen)) for _ in range(2)]
        mask = torch.ones(2, 512, dtype=torch.bool, device=device)
        mask[1, 400:] = False
        starts = [torch.tensor([True, True], device=device), torch.tensor([False, True], device=device)]

        def run(model, act, bf16=False):
            model.zero_grad(set_to_none=True)
            state, total = model.initial_state(2, device, act), 0
            for (tok, tgt), st in zip(segs, starts):
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    loss, state = model.loss(tok, tgt, mask, state, st)
                total = total + loss
            total.backward()
            return float(total), {n: p.grad.double() for n, p in model.named_parameters()}

        t = time.time()
        l64, g64 = run(ref, torch.float64)
        l32, g32 = run(fast, torch.float32)
        eager = pm.PeerModel(mcfg, attention="sdpa" if pm.HAVE_SDPA else "plain", device=device)
        eager.load_state_dict(ref.state_dict())
        lbf, _ = run(eager.float().to(device), torch.bfloat16, bf16=True)
        num = sum(float(((g32[n] - g64[n]) ** 2).sum()) for n in g64)
        den = sum(float((g64[n] ** 2).sum()) for n in g64)
        rl, rg, rb = abs(l32 - l64) / abs(l64), (num / den) ** 0.5, abs(lbf - l64) / abs(l64)
        ok = rl <= 1e-4 and rg <= 1e-3 and rb <= 3e-2
        worst_ok &= ok
        print("verify %-20s %s: attention %s, compile %s: loss fp32 %.2e, gradient fp32 %.2e, loss bf16 %.2e "
              "relative to plain float64 (limits 1e-4, 1e-3, 3e-2), %.1f s"
              % (variant, "ok" if ok else "FAILED", fast.attention, "on" if fast.compiled else "off", rl, rg, rb,
                 time.time() - t), flush=True)
    return 0 if worst_ok else 1


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Overrides are brt-dist's: section.key=value (model.*, train.batch, optim.lr, ...).")
    ap.add_argument("config", nargs="?", help="a brt-dist config (TOML; base = ... inherits)")
    ap.add_argument("overrides", nargs="*", help="section.key=value, as on brt-dist's command line")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3; compile happens here)")
    ap.add_argument("--batch", type=int, help="streams B (= train.batch=B)")
    ap.add_argument("--device", default="auto", help="cuda, cpu or auto (cuda if available)")
    ap.add_argument("--precision", choices=["auto", "bf16", "fp32", "fp64"], default="auto",
                    help="bf16 = bf16 autocast, fp32 master weights (auto: bf16 on cuda, fp32 on cpu)")
    ap.add_argument("--attention", default="auto", choices=["auto", "flex", "sdpa", "plain"])
    ap.add_argument("--no-compile", action="store_true", help="do not torch.compile")
    ap.add_argument("--checkpoint", help="start from a brt-dist checkpoint's weights (its [model] config)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, help="CPU threads for both (default: OMP_NUM_THREADS or torch's)")
    ap.add_argument("--brt-dist", metavar="BIN", help="also time `BIN train` on the same config, device and steps")
    ap.add_argument("--brt-dist-log", metavar="FILE", help="write brt-dist's output there")
    ap.add_argument("--flops-per-token", type=float, help="model.md §10 training FLOPs/token (default: brt-dist's or computed)")
    ap.add_argument("--peak-tflops", type=float, help="MFU denominator (default: measured now)")
    ap.add_argument("--no-peak", action="store_true", help="measure no peak, print no MFU")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--verify", nargs="*", metavar="VARIANT",
                    help="check the fast path against plain float64 on tiny models (default: rec:fixed:skip bst:sh:s4d) and exit")
    args = ap.parse_args()
    if args.verify is None and not args.config:
        ap.error("a config is needed (or --verify)")
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    if args.brt_dist and not os.access(args.brt_dist, os.X_OK):
        fail("--brt-dist %s: not an executable file" % args.brt_dist)
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed (Debian: python3-torch)")
    import peer_model as pm
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        fail("--device %s: %s" % (args.device, e))
    if device.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: this torch sees no GPU")
    if args.precision == "auto":
        args.precision = "bf16" if device.type == "cuda" else "fp32"
    try:
        pm.pick_attention(args.attention, not args.no_compile and pm.HAVE_COMPILE, device)
    except ValueError as e:
        fail("--" + str(e))
    if args.threads:
        torch.set_num_threads(args.threads)
    args.threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", 0)) or torch.get_num_threads()
    if args.verify is not None:
        args.verify = args.verify or ["rec:fixed:skip", "bst:sh:s4d"]   # standard + recurrent; BST
        sys.exit(verify(torch, pm, args, device))

    overrides = list(args.overrides) + (["train.batch=%d" % args.batch] if args.batch else [])
    args.overrides = overrides
    args._cfg = load_config(args.config, overrides)
    table = args._cfg["model"]
    if args.checkpoint:
        sys.path.insert(0, str(REPO / "python"))
        from brt_dist.checkpoint import load_checkpoint
        args._ckpt = load_checkpoint(args.checkpoint)
    try:
        mcfg = pm.PeerConfig.from_table(table)
        if args.checkpoint:   # the config must describe the checkpoint's model (brt-dist runs the config)
            theirs = pm.PeerConfig.from_table(args._ckpt.config["model"])
            diff = [k for k in mcfg.__dataclass_fields__ if getattr(mcfg, k) != getattr(theirs, k)]
            if diff:
                fail("--checkpoint %s has model.%s = %r, the config %r" % (args.checkpoint, diff[0],
                                                                       getattr(theirs, diff[0]), getattr(mcfg, diff[0])))
    except (ValueError, TypeError) as e:
        fail("%s: %s" % (args.config, e))
    args.batch_size = int(args._cfg["train"]["batch"])
    tokens_per_step = args.batch_size * mcfg.seq_len
    optim = args._cfg["optim"]
    clip = float(optim["clip_norm"])
    clip = 1.0 if clip < 0 else clip   # -1: the kind's default, AdamW's 1.0 (model.md §10c; brt-dist's resolve())
    results = {"config": args.config, "overrides": overrides, "variant": mcfg.variant, "batch": args.batch_size,
               "seq_len": mcfg.seq_len, "steps": args.steps, "warmup": args.warmup, "device": str(device),
               "precision": args.precision}
    flops_src = "model.md §10, computed by bench_peer (core/flops.cpp's count)"
    flops = flops_per_token(mcfg)
    if args.brt_dist:   # first: the peer's memory is not held while brt-dist runs
        results["brt_dist"] = b = run_brt_dist(args, tokens_per_step, device.type, args.precision)
        if abs(b["flops_per_token"] - flops) > 1e-3 * flops:
            print("note: brt-dist's FLOPs/token %.4g differs from bench_peer's %.4g" % (b["flops_per_token"], flops))
        flops, flops_src = b["flops_per_token"], "model.md §10, brt-dist's FLOPs/token line"
    if args.flops_per_token:
        flops, flops_src = args.flops_per_token, "model.md §10, --flops-per-token"
    peak, peak_src = (args.peak_tflops, "--peak-tflops") if args.peak_tflops else (None, None)
    if peak is None and not args.no_peak:
        peak, peak_src = measure_peak(torch, device)
    results.update(flops_per_token=flops, flops_source=flops_src, peak_tflops=peak, peak_source=peak_src)
    results["peer"] = bench_peer(torch, pm, mcfg, args, device, clip)

    def line(name, r):
        tf = r["tokens_per_s"] * flops / 1e12
        r["tflops"] = tf
        mfu = " | MFU %5.1f%%" % (100 * tf / peak) if peak else ""
        return "%-9s %12.1f tok/s | %8.3f TFLOP/s%s | step %9.1f ms | loss %.4f" % (
            name + ":", r["tokens_per_s"], tf, mfu, r["step_ms"], r["loss_last"])

    print("FLOPs/token %.4g (%s)%s" % (flops, flops_src, "; peak %.4g TFLOP/s (%s)" % (peak, peak_src) if peak else ""))
    print(line("peer", results["peer"]))
    if args.brt_dist:
        print(line("brt-dist", results["brt_dist"]))
        results["ratio_brt_dist_over_peer"] = r = results["brt_dist"]["tokens_per_s"] / results["peer"]["tokens_per_s"]
        print("brt-dist / peer tokens/s: %.3f  (%s, %s, B %d x N %d, %d timed steps after %d)"
              % (r, device, args.precision, args.batch_size, mcfg.seq_len, args.steps, args.warmup))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
