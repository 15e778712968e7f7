"""Evaluation as `brt-dist eval` does it (launch/eval/evaluator.cpp, model.md §8): every document of a
split streamed segment by segment with the carried state, reset between documents; totals by
document, by position in the document and by position in the segment."""
import math

import numpy as np
import torch

from .. import data

POSITION_BUCKETS = [(0, 512), (512, 4096), (4096, 32768), (32768, -1)]


def segment_buckets(seq_len, window, trained_seq_len=0):
    """Edges W, 2W, 4W, ... and the training length, the last bucket ending at N."""
    edges = {seq_len}
    e = max(1, window)
    while e < seq_len:
        edges.add(e)
        e *= 2
    if 0 < trained_seq_len < seq_len:
        edges.add(trained_seq_len)
    out, begin = [], 0
    for e in sorted(edges):
        out.append((begin, e))
        begin = e
    return out


def evaluate_documents(model, documents, batch=8, bos_id=data.BOS_ID, trained_seq_len=0):
    """documents: [(doc_id, tokens)] (data.read_documents). Streams up to `batch` documents
    side by side (each its own stream, state reset at its start, as the C++ streams do).
    Returns a dict shaped like `brt-dist eval --json` plus "per_document" {doc_id: nats} and
    "per_token" {(doc_id, target position): nats} (as `brt-dist eval --token-losses` writes)."""
    cfg = model.cfg
    N, W = cfg.seq_len, cfg.window
    seg_b = segment_buckets(N, W, trained_seq_len)
    pos_nats = np.zeros(len(POSITION_BUCKETS))
    pos_tokens = np.zeros(len(POSITION_BUCKETS), dtype=np.int64)
    seg_nats = np.zeros(len(seg_b))
    seg_tokens = np.zeros(len(seg_b), dtype=np.int64)
    per_doc = {}
    per_token = {}
    streams = [(doc_id, data.segments(data.stream_tokens(t, bos_id=bos_id), N)) for doc_id, t in documents]
    streams = [s for s in streams if s[1]]           # documents of >= 2 tokens (eligible)
    pos_edges = np.array([b for b, _ in POSITION_BUCKETS])
    seg_edges = np.array([e for _, e in seg_b])
    for group_start in range(0, len(streams), batch):
        group = streams[group_start:group_start + batch]
        state = {}
        for step in range(max(len(segs) for _, segs in group)):
            inputs, targets, mask, doc_start = [], [], [], []
            for _, segs in group:
                if step < len(segs):
                    i, t, m = segs[step]
                else:                                # idle: this stream's document has ended
                    i, t, m = np.zeros(N, np.int64), np.zeros(N, np.int64), np.zeros(N, bool)
                inputs.append(i)
                targets.append(t)
                mask.append(m)
                doc_start.append(step == 0 or step >= len(segs))
            losses, state = model.token_losses(np.stack(inputs), np.stack(targets), np.stack(mask),
                                               state, torch.tensor(doc_start))
            losses = losses.double().cpu().numpy()
            for b, (doc_id, segs) in enumerate(group):
                if step >= len(segs):
                    continue
                m = mask[b]
                l = losses[b][m]
                per_doc[doc_id] = per_doc.get(doc_id, 0.0) + float(l.sum())
                target_pos = step * N + np.nonzero(m)[0] + 1          # position in the document
                per_token.update(((doc_id, int(p)), float(x)) for p, x in zip(target_pos, l))
                k = np.searchsorted(pos_edges, target_pos, side="right") - 1
                np.add.at(pos_nats, k, l)
                np.add.at(pos_tokens, k, 1)
                k = np.searchsorted(seg_edges, np.nonzero(m)[0], side="right")
                np.add.at(seg_nats, k, l)
                np.add.at(seg_tokens, k, 1)
    tokens = int(pos_tokens.sum())
    nats = float(sum(per_doc.values()))

    def buckets(edges, n, c):
        return [{"begin": b, "end": e, "tokens": int(ct), "nats": float(nt),
                 "bits_per_token": float(nt / ct / math.log(2)) if ct else 0.0}
                for (b, e), nt, ct in zip(edges, n, c)]

    return {"documents": len(streams), "tokens": tokens, "nats": nats,
            "bits_per_token": nats / tokens / math.log(2) if tokens else 0.0,
            "seq_len": N, "window": W, "position_buckets": buckets(POSITION_BUCKETS, pos_nats, pos_tokens),
            "segment_buckets": buckets(seg_b, seg_nats, seg_tokens), "per_document": per_doc,
            "per_token": per_token}
