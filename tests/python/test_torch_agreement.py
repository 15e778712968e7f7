#!/usr/bin/python3
"""brt_dist.torch against brt-dist, for every variant (docs/model.md; exit 77 = skipped without
PyTorch):
 - losses: each variant trained 20 steps (D 32, 3 layers, N 64, W 16), then `brt-dist eval
   --json` (fp32, the only precision eval computes in) and the torch model in float64 over the
   same validation documents, streamed segment by segment with carried state and document
   resets (model.md §8): total nats, tokens and every position/segment bucket agree to RTOL;
 - gradients: one fp64 training step (train.precision=fp64, AdamW with beta1 = 0, so the saved
   first moment /optim/<p>.adamw.m is the gradient) on a corpus whose train split is one
   document, against torch autograd of the same first segment: the whole gradient to GRAD_RTOL;
 - the carried state of a checkpoint maps onto the model's (names, shapes, the S4D carry's
   bytes), and float32 / bfloat16 forwards run close to float64.
usage: test_torch_agreement.py BRT_DIST   (~1 min on 2 cores)"""
import json
import sys
import tempfile
import time
from pathlib import Path

from common import SKIP, VARIANTS, check, prepare, run, train

try:
    import torch
except ImportError:
    print("skipped: PyTorch is not installed (Debian: python3-torch)")
    sys.exit(SKIP)

import numpy as np

from brt_dist import load_checkpoint
from brt_dist.data import read_documents, segments, stream_tokens
from brt_dist.torch import evaluate_documents, from_checkpoint

RTOL = 1e-6        # measured ~3e-9 (fp32 C++ against float64); a missing carry is ~1e-4
GRAD_RTOL = 1e-4   # measured ~1e-7
STEPS = 20
GRAD_STEP = ["train.batch=1", "train.precision=fp64", "optim.kind=adamw", "optim.lr=1e-20", "optim.beta1=0",
             "optim.warmup=1", "optim.schedule=constant", "optim.clip_norm=0"]


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def check_losses(bin_path, work, variant, data, docs):
    ckpt_path = train(bin_path, work, variant, data, STEPS)
    report = Path(work) / (variant.replace(":", "_") + ".json")
    token_file = Path(work) / (variant.replace(":", "_") + ".tokens.tsv")
    run([bin_path, "eval", "--checkpoint", ckpt_path, "--quiet", "--json", report, "--token-losses", token_file])
    cpp = json.loads(report.read_text())
    ckpt = load_checkpoint(ckpt_path)
    model = from_checkpoint(ckpt, dtype=torch.float64)
    ours = evaluate_documents(model, docs)
    check(ours["tokens"] == cpp["tokens"] and ours["documents"] == cpp["documents"],
          "%s: %d tokens / %d documents, brt-dist %d / %d" % (variant, ours["tokens"], ours["documents"],
                                                              cpp["tokens"], cpp["documents"]))
    worst = rel(ours["nats"], cpp["nats"])
    for kind in ("position_buckets", "segment_buckets"):
        for a, b in zip(ours[kind], cpp[kind]):
            check(a["tokens"] == b["tokens"] and (a["begin"], a["end"]) == (b["begin"], b["end"]),
                  "%s: %s %s differs: %s vs %s" % (variant, kind, a["begin"], a, b))
            if b["tokens"]:
                worst = max(worst, rel(a["nats"], b["nats"]))
    check(worst <= RTOL, "%s: torch float64 vs brt-dist eval: relative difference %.2e > %.0e"
          % (variant, worst, RTOL))
    # Every token's loss (several segments per document, carried state, document resets): the
    # issue's bar, 1e-5 relative (of max(1, |loss|): brt-dist computes in fp32).
    lines = token_file.read_text().splitlines()
    check(lines[0] == "doc_id\tposition\tnats", "%s: %s header %r" % (variant, token_file, lines[0]))
    cpp_tokens = {(int(d), int(p)): float(x) for d, p, x in (l.split("\t") for l in lines[1:])}
    check(set(cpp_tokens) == set(ours["per_token"]), "%s: the predicted targets differ" % variant)
    worst_token = max(abs(ours["per_token"][k] - x) / max(1.0, abs(x)) for k, x in cpp_tokens.items())
    check(worst_token <= 1e-5, "%s: a token's loss differs by %.2e (> 1e-5)" % (variant, worst_token))
    print("  %-22s %d tokens, worst per-token difference %.2e" % (variant, len(cpp_tokens), worst_token))
    check_state_mapping(model, ckpt, variant)
    return ckpt, model, rel(ours["nats"], cpp["nats"]), worst, cpp["nats"]


def check_state_mapping(model, ckpt, variant):
    """The checkpoint's /state/ names and shapes are the ones the model carries."""
    carried = model.state_from_checkpoint(ckpt)
    B = next(iter(carried.values())).shape[0]
    tokens = torch.zeros(B, model.cfg.seq_len, dtype=torch.long)
    with torch.no_grad():
        _, new = model(tokens, carried, torch.zeros(B, dtype=torch.bool))
    check(new.keys() == carried.keys(), "%s: carried state names %s vs checkpoint %s"
          % (variant, sorted(new), sorted(carried)))
    for name in new:
        check(new[name].shape == carried[name].shape, "%s: %s shape %s vs checkpoint %s"
              % (variant, name, tuple(new[name].shape), tuple(carried[name].shape)))


def check_gradient(bin_path, work, variant, data1):
    ckpt = load_checkpoint(train(bin_path, work, variant, data1, 1, extra=GRAD_STEP))
    model = from_checkpoint(ckpt, dtype=torch.float64)
    (_, doc), = read_documents(data1, "train")
    inputs, targets, mask = segments(stream_tokens(doc), model.cfg.seq_len)[0]
    nats, count, _ = model.segment_loss(inputs[None], targets[None], mask[None], doc_start=[True])
    (nats / count).backward()
    num = den = 0.0
    for name, p in model.named_parameters():
        g_cpp = np.asarray(ckpt.optimizer[name + ".adamw.m"], dtype=np.float64)
        check(p.grad is not None and p.grad.shape == g_cpp.shape, "%s: no gradient for %s" % (variant, name))
        num += float(((p.grad.numpy() - g_cpp) ** 2).sum())
        den += float((g_cpp ** 2).sum())
    err = (num / den) ** 0.5
    check(err <= GRAD_RTOL, "%s: gradient relative difference %.2e > %.0e" % (variant, err, GRAD_RTOL))
    return err


def check_precisions(model64, docs, variant):
    """float32 and bfloat16 forwards of one segment, against float64 (loose: it is bf16)."""
    inputs, targets, mask = segments(stream_tokens(docs[0][1]), model64.cfg.seq_len)[0]
    losses = {}
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        model = model64.to(dtype)
        with torch.no_grad():
            nats, count, _ = model.segment_loss(inputs[None], targets[None], mask[None], doc_start=[True])
        losses[dtype] = float(nats) / count
    model64.to(torch.float64)
    check(rel(losses[torch.float32], losses[torch.float64]) < 1e-5, "%s float32: %s" % (variant, losses))
    check(rel(losses[torch.bfloat16], losses[torch.float64]) < 3e-2, "%s bfloat16: %s" % (variant, losses))


def main(bin_path):
    torch.set_num_threads(1)
    start = time.time()
    with tempfile.TemporaryDirectory() as work:
        data = prepare(bin_path, work, "many", train_docs=2, validation_docs=2)
        data1 = prepare(bin_path, work, "one", train_docs=1, validation_docs=1)
        docs = read_documents(data, "validation")
        print("%-22s %12s %10s %12s %10s" % ("variant", "eval nats", "rel total", "rel buckets", "rel grad"))
        for variant in VARIANTS:
            _, model, total, worst, nats = check_losses(bin_path, work, variant, data, docs)
            grad = check_gradient(bin_path, work, variant, data1)
            check_precisions(model, docs, variant)
            print("%-22s %12.4f %10.2e %12.2e %10.2e" % (variant, nats, total, worst, grad))
    print("torch agreement: every variant within %.0e (losses) and %.0e (gradients), %.0f s"
          % (RTOL, GRAD_RTOL, time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
