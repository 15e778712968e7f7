"""Prepared corpora (docs/data-format.md): the documents of a split as token arrays, and the
segments a stream reads from a document (model.md §8; data/streams.cpp)."""
from pathlib import Path

import numpy as np

BOS_ID = 1  # SentencePiece's <s> in every brt-dist tokenizer (docs/data-format.md, "Tokenizer")


def _tsv(path):
    lines = Path(path).read_text().splitlines()
    return [line.split("\t") for line in lines[1:]]  # the first line names the file kind


def read_manifest(data_dir):
    out = {"splits": {}}
    for fields in _tsv(Path(data_dir) / "manifest.tsv"):
        if fields[0] == "split":
            out["splits"][fields[1]] = dict(zip(("shards", "documents", "tokens", "bytes", "words"),
                                                map(int, fields[2:7])))
        else:
            out[fields[0]] = int(fields[1]) if fields[1].isdigit() else fields[1]
    return out


def read_documents(data_dir, split="validation"):
    """[(doc_id, tokens as int64 array)] of a split in document-id order (the order
    TokenDataset holds them), read from the shards."""
    data_dir = Path(data_dir)
    token_bytes = read_manifest(data_dir).get("token_bytes", 2)
    dtype = np.dtype("<u2" if token_bytes == 2 else "<u4")
    shards, docs = {}, []
    for fields in _tsv(data_dir / "index.tsv"):
        doc_id, doc_split, shard, offset, tokens = int(fields[0]), fields[1], int(fields[2]), int(fields[3]), int(fields[4])
        if doc_split != split:
            continue
        if shard not in shards:
            shards[shard] = np.fromfile(data_dir / "shards" / ("%s-%05d.bin" % (split, shard)), dtype=dtype)
        docs.append((doc_id, shards[shard][offset:offset + tokens].astype(np.int64)))
    return docs


def stream_tokens(doc_tokens, add_bos=True, bos_id=BOS_ID):
    """The document as a stream sees it: BOS first, so every text token is a target."""
    doc_tokens = np.asarray(doc_tokens, dtype=np.int64)
    return np.concatenate([[bos_id], doc_tokens]) if add_bos else doc_tokens


def segments(tokens, seq_len, pad_id=0):
    """(inputs, targets, mask) per segment of N = seq_len: inputs tokens [iN, (i+1)N), targets
    [iN+1, (i+1)N+1), the last segment padded with mask 0 (data/streams.cpp fill_stream).
    Documents shorter than two tokens give no segment."""
    tokens = np.asarray(tokens, dtype=np.int64)
    out = []
    for begin in range(0, max(0, len(tokens) - 1), seq_len):
        piece = tokens[begin:begin + seq_len + 1]
        inputs = np.full(seq_len, pad_id, dtype=np.int64)
        targets = np.zeros(seq_len, dtype=np.int64)
        mask = np.zeros(seq_len, dtype=bool)
        inputs[:min(seq_len, len(piece))] = piece[:seq_len]
        n_targets = len(piece) - 1
        targets[:n_targets] = piece[1:]
        mask[:n_targets] = True
        out.append((inputs, targets, mask))
    return out
