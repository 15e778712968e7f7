#!/usr/bin/python3
"""The PyTorch peer (bench/peer/peer_model.py) computes brt-dist's model (docs/gpu.md, "The
PyTorch peer"): for each variant, a tiny model (D 32, 3 layers, N 64, W 16) trained a few steps
by brt-dist, its checkpoint loaded into the peer (CPU, plain attention, float64 and float32),
and the validation split streamed segment by segment with carried state and document resets
(model.md §8) by the peer and by `brt-dist eval --json`: total nats within RTOL, the same tokens;
and, as a control, the peer with its carried state dropped at every segment must miss by > 10 RTOL.
The GPU formulations (`sdpa`, `flex`) must equal `plain` in float64 (check_formulations).
Exit 77 (skipped) without PyTorch or h5py.  usage: test_peer_agreement.py BRT_DIST  (~30 s)"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "python"), str(REPO / "bench" / "peer")]
SKIP = 77
try:
    import torch
    import h5py  # noqa: F401  (brt_dist.checkpoint)
except ImportError as e:
    print("skipped: %s (Debian: python3-torch, python3-h5py)" % e)
    sys.exit(SKIP)

from brt_dist.checkpoint import load_checkpoint
from brt_dist.data import read_documents, segments, stream_tokens
import peer_model

RTOL = 1e-5        # measured: ~1e-9 in float64, ~1e-7 in float32 (brt-dist eval computes in fp32)
STEPS = 6
VARIANTS = ["slide", "xl", "rec:fixed:skip", "rec:lstm:dual", "bst:sh:s4d", "bst:mh:s4d", "bst:mf:unstructured"]
TINY = ["model.layers=3", "model.recurrent_layers=[1]", "model.bst_layers=[0,2]", "model.d_model=32",
        "model.heads=2", "model.head_dim=16", "model.d_ff=64", "model.vocab=320", "model.seq_len=64",
        "model.window=16", "model.state_size=8", "model.ctx_states=8", "model.ssm_state=16",
        "train.eval_every=0", "train.peak_gflops=1", "log.every=10", "log.metrics_path=", "run.dir=",
        "data.share_documents=true",  # corpora of 1-2 documents for 4 streams (docs/data-format.md)
        "data.source=shards", "checkpoint.async=false", "optim.warmup=2"]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(cmd):
    done = subprocess.run([str(c) for c in cmd], env=ENV, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(map(str, cmd[:3])), done.returncode,
                                                     (done.stdout + done.stderr)[-1500:]))
    return done.stdout


def write_corpus(root, train_docs=2, validation_docs=2, lines=200, seed=3):
    """Random "words" in PG19-style book files (as tests/python/common.py makes them)."""
    rnd = random.Random(seed)
    words = ["".join(rnd.choice("abcdefghij") for _ in range(rnd.randint(2, 6))) for _ in range(300)]
    for split, n, length in (("train", train_docs, lines), ("validation", validation_docs, lines // 10)):
        (root / split).mkdir(parents=True, exist_ok=True)
        for d in range(n):
            text = "\n".join(" ".join(rnd.choice(words) for _ in range(10)) + "." for _ in range(length))
            (root / split / ("doc%d.txt" % d)).write_text(text)


def peer_eval(model, docs, dtype, reset_every_segment=False):
    """Total nats and tokens of the documents, each streamed from a fresh state (model.md §8);
    reset_every_segment: drop the carried state at every segment (the control)."""
    nats, tokens = 0.0, 0
    N = model.cfg.seq_len
    with torch.no_grad():
        for _, doc in docs:
            state = model.initial_state(1)
            for n, (inputs, targets, mask) in enumerate(segments(stream_tokens(doc), N)):
                losses, state = model.token_losses(torch.as_tensor(inputs)[None], torch.as_tensor(targets)[None],
                                                   torch.as_tensor(mask)[None], state,
                                                   torch.tensor([n == 0 or reset_every_segment]))
                nats += float(losses.double().sum())
                tokens += int(mask.sum())
    return nats, tokens


# ------------------------------------------------------------------ the GPU formulations
def reference_sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """torch.nn.functional.scaled_dot_product_attention as documented (torch >= 2.1)."""
    s = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    return torch.softmax(s, -1) @ v


def reference_create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None):
    """A dense [Q_LEN, KV_LEN] stand-in for FlexAttention's BlockMask (mask_mod(b, h, q, kv))."""
    return mask_mod(0, 0, torch.arange(Q_LEN)[:, None], torch.arange(KV_LEN)[None, :])


def reference_flex_attention(q, k, v, score_mod=None, block_mask=None, scale=None):
    """flex_attention as documented: score_mod(score, b, h, q_idx, kv_idx) on every q·k score
    (times scale), then the mask, softmax over kv; q, k, v [B, H, L, E]."""
    B, H, L, _ = q.shape
    s = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    idx = [torch.arange(n).view(*[-1 if i == d else 1 for i in range(4)]) for d, n in enumerate((B, H, L, k.shape[2]))]
    if score_mod is not None:
        s = score_mod(s, *idx)
    if block_mask is not None:
        s = s.masked_fill(~block_mask, float("-inf"))
    return torch.softmax(s, -1) @ v


def check_formulations(model, docs, failures):
    """The peer's `sdpa` (blocked W x 2W windows, additive mask) and `flex` (band of
    [cache; segment], mask_mod + score_mod) attention against `plain`, float64, on the first
    two carried segments of a document: the real torch functions where this torch has them,
    else the reference implementations above (then only the peer's index math is checked)."""
    real = peer_model.HAVE_SDPA, peer_model.flex_attention is not None
    saved = peer_model.sdpa, peer_model.HAVE_SDPA, peer_model.flex_attention, peer_model.create_block_mask
    if not real[0]:
        peer_model.sdpa, peer_model.HAVE_SDPA = reference_sdpa, True
    if not real[1]:
        peer_model.flex_attention, peer_model.create_block_mask = reference_flex_attention, reference_create_block_mask
    try:
        segs = segments(stream_tokens(docs[0][1]), model.cfg.seq_len)[:2]
        totals = {}
        for impl in ("plain", "sdpa", "flex"):
            model.attention, model._masks = impl, {}
            state, total = model.initial_state(1), 0.0
            with torch.no_grad():
                for n, (inputs, targets, mask) in enumerate(segs):
                    losses, state = model.token_losses(torch.as_tensor(inputs)[None], torch.as_tensor(targets)[None],
                                                       torch.as_tensor(mask)[None], state, torch.tensor([n == 0]))
                    total += float(losses.sum())
            totals[impl] = total
    finally:
        peer_model.sdpa, peer_model.HAVE_SDPA, peer_model.flex_attention, peer_model.create_block_mask = saved
        model.attention = "plain"
    worst = max(abs(totals[i] - totals["plain"]) / abs(totals["plain"]) for i in ("sdpa", "flex"))
    if not worst <= 1e-9:
        failures.append("%s: sdpa/flex formulations differ from plain: %s" % (model.cfg.variant, totals))
    return worst, "/".join("real" if r else "reference" for r in real)


def main(bin_path):
    torch.set_num_threads(1)
    start = time.time()
    failures = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        write_corpus(work / "corpus")
        data = work / "data"
        run([bin_path, "prepare", "--corpus", work / "corpus", "--out", data, "--vocab", "320", "--quiet"])
        docs = read_documents(data, "validation")
        print("%-22s %14s %10s %10s %8s %12s %9s" % ("variant", "eval nats", "rel fp64", "rel fp32", "tokens",
                                                     "no-carry rel", "sdpa/flex (functions)"))
        for variant in VARIANTS:
            out = work / variant.replace(":", "_")
            xl = ["model.window=64"] if variant == "xl" else []
            run([bin_path, "train", REPO / "configs" / "tiny.toml", *TINY, "model.variant=" + variant,
                 "data.path=%s" % data, "train.steps=%d" % STEPS, "checkpoint.dir=%s" % out, *xl])
            ckpt_path = out / ("ckpt-%08d.h5" % STEPS)
            report = work / (out.name + ".json")
            run([bin_path, "eval", "--checkpoint", ckpt_path, "--quiet", "--json", report])
            cpp = json.loads(report.read_text())
            ckpt = load_checkpoint(ckpt_path)
            model = peer_model.PeerModel(peer_model.PeerConfig.from_table(ckpt.config["model"]), attention="plain")
            model.load_brt_parameters(ckpt.parameters)
            rels = []
            for dtype in (torch.float64, torch.float32):
                nats, tokens = peer_eval(model.to(dtype), docs, dtype)
                if tokens != cpp["tokens"]:
                    failures.append("%s: the peer scored %d tokens, brt-dist eval %d" % (variant, tokens, cpp["tokens"]))
                rels.append(abs(nats - cpp["nats"]) / abs(cpp["nats"]))
                if not rels[-1] <= RTOL:
                    failures.append("%s %s: peer %.10f nats vs brt-dist eval %.10f: relative %.2e > %.0e"
                                    % (variant, dtype, nats, cpp["nats"], rels[-1], RTOL))
            form, which = check_formulations(model.to(torch.float64), docs, failures)
            # The control: without the carried state (cache, Σ, SSM carry) the peer must miss.
            control = abs(peer_eval(model, docs, torch.float32, True)[0] - cpp["nats"]) / abs(cpp["nats"])
            if not control > 10 * RTOL:
                failures.append("%s: dropping the carried state moves the total only %.1e: the test cannot see it"
                                % (variant, control))
            print("%-22s %14.6f %10.2e %10.2e %8d %12.1e %9.1e (%s)" % (
                variant, cpp["nats"], rels[0], rels[1], cpp["tokens"], control, form, which), flush=True)
    for f in failures:
        print("FAILED: " + f)
    print("peer agreement: %d variants, %s (limit %.0e relative), %.0f s"
          % (len(VARIANTS), "FAILED" if failures else "all within", RTOL, time.time() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1]).resolve()))
