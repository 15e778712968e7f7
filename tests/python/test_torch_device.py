#!/usr/bin/python3
"""brt_dist.torch off the CPU, for every variant (docs/python.md "Devices"; exit 77 = skipped
without PyTorch). Each variant's model (D 32, 3 layers, N 64, W 16, drawn by
BrtModel.initialised) streams three segments of two documents with carried state and a document
reset in the second stream, then a backward pass of the summed loss:
 - on the meta device, everywhere: every tensor the model makes follows its parameters (a tensor
   left on the CPU raises "Expected all tensors to be on the same device"), and the losses, the
   carried state and the gradients come back on that device;
 - on CUDA, where there is one (the GPU check's `python` part): the losses, the carried state and
   the gradients equal the CPU float64 model's. Contract, from rounding: float64 on both sides,
   only the summation order differs (cuBLAS, cuFFT): RTOL_64 = 1e-10 relative (of max(1, |x|)),
   ~1e6 ulps at reduction depths of ≤ 2W·dh; float32 (TF32 off) to RTOL_32 = 1e-4, bfloat16 to
   3e-2 on the loss (test_torch_agreement.py's precision bars).
usage: test_torch_device.py [cuda|meta]   (default: meta, and cuda when available; ~2 s on meta)"""
import sys

from common import SKIP, VARIANTS, check

try:
    import torch
except ImportError:
    print("skipped: PyTorch is not installed (Debian: python3-torch)")
    sys.exit(SKIP)

import numpy as np

from brt_dist.config import ModelConfig
from brt_dist.torch.model import BrtModel

TINY = dict(layers=3, recurrent_layers=[1], bst_layers=[0, 2], d_model=32, heads=2, head_dim=16,
            d_ff=64, vocab=320, seq_len=64, window=16, state_size=8, ctx_states=8, ssm_state=16)
SEGMENTS = 3
RTOL_64, RTOL_32, RTOL_BF16 = 1e-10, 1e-4, 3e-2


def config(variant):
    table = dict(TINY, variant=variant)
    if variant == "xl":
        table["window"] = 64
    return ModelConfig.from_config({"model": table})


def stream(model, batches, with_grad=True):
    """Sum of the losses of SEGMENTS carried segments (stream 1 starts a new document at the
    second), and the last carried state; the gradients are left on the parameters."""
    model.zero_grad(set_to_none=True)
    state, total, losses = {}, 0, []
    for s, (inputs, targets, mask) in enumerate(batches):
        doc_start = torch.tensor([s == 0, s != 2])      # the model moves it to its device
        nats, _, state = model.segment_loss(inputs, targets, mask, state, doc_start, detach_state=True)
        losses.append(nats)
        total = total + nats
    if with_grad:
        total.backward()
    return losses, state


def random_batches(cfg, seed):
    rnd = np.random.default_rng(seed)
    out = []
    for _ in range(SEGMENTS):
        tokens = rnd.integers(0, cfg.vocab, size=(2, cfg.seq_len + 1))
        mask = rnd.random((2, cfg.seq_len)) > 0.1
        out.append((tokens[:, :-1], tokens[:, 1:], mask))
    return out


def on(model, device, dtype):
    """A copy of `model` on `device` in `dtype` (the original stays as it is)."""
    copy = BrtModel(model.cfg).to(dtype)
    copy.load_state_dict(model.state_dict())
    return copy.to(device)


def check_meta(variant, model, batches):
    meta = on(model, "meta", torch.float64)
    losses, state = stream(meta, batches)
    placed = [("loss", t) for t in losses] + [(n, t) for n, t in state.items()]
    placed += [(n, p.grad) for n, p in meta.named_parameters() if p.grad is not None]
    wrong = [n for n, t in placed if t.device.type != "meta"]
    check(not wrong, "%s: on the meta device, these came back elsewhere: %s" % (variant, wrong[:5]))
    check(sum(p.grad is not None for p in meta.parameters()) > 0, "%s: no gradient on meta" % variant)


def rel_diff(a, b):
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    return float(((a - b).abs() / b.abs().clamp(min=1)).max()) if b.numel() else 0.0


def check_cuda(variant, model, batches):
    """CUDA float64 against the CPU float64 model: losses, carried state and gradients."""
    ref_losses, ref_state = stream(model, batches)
    ref_grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    gpu = on(model, "cuda", torch.float64)
    losses, state = stream(gpu, batches)
    worst = max(rel_diff(a, b) for a, b in zip(losses, ref_losses))
    check(set(state) == set(ref_state), "%s: carried state names differ on CUDA" % variant)
    worst_state = max([rel_diff(state[n], ref_state[n]) for n in ref_state] or [0.0])
    grads = {n: p.grad for n, p in gpu.named_parameters() if p.grad is not None}
    check(set(grads) == set(ref_grads), "%s: gradients on CUDA for %s, on the CPU for %s"
          % (variant, sorted(set(grads) ^ set(ref_grads))[:3], "the others"))
    worst_grad = max(rel_diff(grads[n], ref_grads[n]) for n in ref_grads)
    check(max(worst, worst_state, worst_grad) <= RTOL_64,
          "%s: CUDA float64 vs CPU float64: loss %.1e, state %.1e, gradient %.1e > %.0e"
          % (variant, worst, worst_state, worst_grad, RTOL_64))
    low = {}
    for dtype, bar in ((torch.float32, RTOL_32), (torch.bfloat16, RTOL_BF16)):
        with torch.no_grad():
            lowered, _ = stream(on(model, "cuda", dtype), batches, with_grad=False)
        low[dtype] = max(abs(float(a) - float(b)) / max(1.0, abs(float(b))) for a, b in zip(lowered, ref_losses))
        check(low[dtype] <= bar, "%s: CUDA %s loss differs by %.1e (> %.0e)" % (variant, dtype, low[dtype], bar))
    print("  %-22s cuda float64: loss %.1e state %.1e gradient %.1e; float32 %.1e; bfloat16 %.1e"
          % (variant, worst, worst_state, worst_grad, low[torch.float32], low[torch.bfloat16]))


def main(devices):
    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False   # float32 means float32 (the RTOL_32 contract)
    if "cuda" in devices and not torch.cuda.is_available():
        if devices == ["cuda"]:
            print("skipped: no CUDA device (torch.cuda.is_available() is false)")
            sys.exit(SKIP)
        devices = [d for d in devices if d != "cuda"]
    for variant in VARIANTS:
        model = BrtModel.initialised(config(variant), dtype=torch.float64, seed=1)
        batches = random_batches(model.cfg, seed=2)
        if "meta" in devices:
            check_meta(variant, model, batches)
        if "cuda" in devices:
            check_cuda(variant, model, batches)
    print("brt_dist.torch on %s: %d variants passed" % (" and ".join(devices), len(VARIANTS)))


if __name__ == "__main__":
    main(sys.argv[1:] or ["meta", "cuda"])
