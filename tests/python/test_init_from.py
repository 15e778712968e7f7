#!/usr/bin/python3
"""Weights written by brt_dist.save_weights train on in brt-dist (`checkpoint.init_from=FILE`:
a fresh start with FILE's /model weights, a fresh optimizer and data cursor; docs/python.md,
tests/integration/init_from.sh), for a rec:* and a feedback:* model (model.md §5, §5.4):
 - unchanged: save_weights(load_checkpoint(src)) gives exactly the first-step loss brt-dist
   has training from src itself (init_from=src), and a step-0 checkpoint (train.steps=0) holds
   src's weights bit for bit with step 0;
 - fine-tuned in PyTorch (one SGD step of the float64 model, saved as float32): brt-dist's
   first-step loss (fp32, the default precision) equals the torch model's loss on that same
   first batch to RTOL, and the step moved it well beyond RTOL.
The train split is one document and train.batch=1, so the first batch is its first segment
(BOS first, model.md §8). Without PyTorch the fine-tuning part is skipped.
usage: test_init_from.py BRT_DIST   (~15 s on 2 cores)"""
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, TINY, check, prepare, run, train

import numpy as np

from brt_dist import load_checkpoint, read_metrics, save_weights

try:
    import torch
except ImportError:
    torch = None

RTOL = 1e-5         # brt-dist's fp32 step against float64 torch; measured ~1e-9
VARIANTS = ["rec:fixed:skip", "feedback:lstm:skip"]
FIRST_BATCH = ["train.batch=1"]


def first_step_loss(bin_path, work, variant, data, init_from, name):
    """The loss brt-dist logs for step 1 of a fresh run started from `init_from`'s weights."""
    metrics = Path(work) / ("%s-%s.jsonl" % (variant.replace(":", "_"), name))
    log = run([bin_path, "train", REPO / "configs" / "tiny.toml", *TINY, "model.variant=" + variant,
               "data.path=%s" % data, "train.steps=1", "checkpoint.dir=", "checkpoint.init_from=%s" % init_from,
               "log.every=1", "log.metrics_path=%s" % metrics, *FIRST_BATCH])
    check("checkpoint.init_from: the weights of %s" % init_from in log, "%s: no init_from line:\n%s" % (name, log))
    (record,) = read_metrics(metrics, events={"train"})
    check(record["step"] == 1, "%s: %s" % (name, record))
    return record["loss"]


def torch_first_loss(model, data):
    from brt_dist.data import read_documents, segments, stream_tokens
    (_, doc), = read_documents(data, "train")
    inputs, targets, mask = segments(stream_tokens(doc), model.cfg.seq_len)[0]
    nats, count, _ = model.segment_loss(inputs[None], targets[None], mask[None], doc_start=[True])
    return nats / count


def check_variant(bin_path, work, variant, data):
    src = train(bin_path, work, variant, data, 2, extra=FIRST_BATCH)
    ckpt = load_checkpoint(src)
    tag = variant.replace(":", "_")
    # Unchanged weights: the same first step as training on from the checkpoint itself.
    same = Path(work) / (tag + "-weights.h5")
    save_weights(ckpt, same, ckpt)
    loss_src = first_step_loss(bin_path, work, variant, data, src, "src")
    loss_same = first_step_loss(bin_path, work, variant, data, same, "same")
    check(loss_same == loss_src, "%s: first-step loss from save_weights' file %r, from the checkpoint %r"
          % (variant, loss_same, loss_src))
    # A step-0 checkpoint of those weights (train.steps=0 with checkpoint.dir).
    step0_dir = Path(work) / (tag + "-step0")
    run([bin_path, "train", REPO / "configs" / "tiny.toml", *TINY, "model.variant=" + variant, "data.path=%s" % data,
         "train.steps=0", "optim.total_steps=10", "checkpoint.dir=%s" % step0_dir, "checkpoint.init_from=%s" % same,
         *FIRST_BATCH])
    step0 = load_checkpoint(step0_dir / "ckpt-00000000.h5")
    check(step0.step == 0 and step0.tokens_seen == 0, "%s: step-0 checkpoint at step %d" % (variant, step0.step))
    check(step0.parameters.keys() == ckpt.parameters.keys() and all(
        np.array_equal(step0.parameters[k], ckpt.parameters[k]) for k in ckpt.parameters),
        "%s: the step-0 checkpoint's weights are not the file's" % variant)
    line = "%-20s unchanged: first-step loss %.9f from both, step-0 copy bit-equal" % (variant, loss_src)
    if torch is None:
        print(line + "; fine-tuning skipped (no PyTorch)")
        return
    from brt_dist.torch import from_checkpoint
    # Fine-tuned in PyTorch: one SGD step on the first batch, saved (float32) and trained on.
    model = from_checkpoint(ckpt, dtype=torch.float64)
    loss_torch_src = float(torch_first_loss(model, data))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    opt.zero_grad()
    torch_first_loss(model, data).backward()
    opt.step()
    tuned = Path(work) / (tag + "-finetuned.h5")
    save_weights(model, tuned, ckpt)
    with torch.no_grad():
        loss_torch = float(torch_first_loss(from_checkpoint(tuned, dtype=torch.float64), data))
    loss_cpp = first_step_loss(bin_path, work, variant, data, tuned, "finetuned")
    err, err_src = abs(loss_cpp - loss_torch) / loss_torch, abs(loss_src - loss_torch_src) / loss_torch_src
    moved = abs(loss_torch - loss_torch_src) / loss_torch_src
    check(err <= RTOL and err_src <= RTOL, "%s: brt-dist first-step loss %r (source %r), torch %r (%r): %.2e, %.2e > %.0e"
          % (variant, loss_cpp, loss_src, loss_torch, loss_torch_src, err, err_src, RTOL))
    check(moved > 100 * RTOL, "%s: the SGD step moved the loss by only %.2e" % (variant, moved))
    print(line + "\n%-20s fine-tuned in torch: brt-dist %.9f, torch %.9f (rel %.1e; source rel %.1e; step moved %.1e)"
          % ("", loss_cpp, loss_torch, err, err_src, moved))


def main(bin_path):
    start = time.time()
    if torch is not None:
        torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        data = prepare(bin_path, work, "one", train_docs=1, validation_docs=1)
        for variant in VARIANTS:
            check_variant(bin_path, work, variant, data)
    print("init_from: save_weights' files train on in brt-dist, %.0f s" % (time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
