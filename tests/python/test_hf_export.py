#!/usr/bin/python3
"""`brt-dist export --hf` (docs/huggingface.md): for an attention, a recurrent and a BST variant,
a tiny run (D 32, 3 layers, N 64, W 16) exported, the folder loaded ALONE as transformers'
remote-code loader loads it (only the .py files its rule copies, in a fresh package; config from
config.json, weights from model.safetensors) on the fallback stand-ins (transformers is not
needed), and its losses compared with `brt-dist eval --token-losses` over two validation
documents of 11 segments each, the state carried across segments and across calls cut
mid-segment (exit 77 = skipped without PyTorch).

Contract: the folder's model is brt_dist.torch's (parameters bit for bit, logits identical in
float64 to the package's BrtModel); in float32 every target's loss is brt-dist's within
TOL = 32 ulp(1) = 2^-18 ~ 3.8e-6 of max(1, |loss|): both sides round in float32 (ulp 2^-23),
summing in different orders over D, the window and the vocabulary at every layer; the agreement
test measured ~1.3 ulp for each side against float64 (docs/python.md), this one ~1.1 ulp between
them, and leaving out a carried piece moves losses by ~1e-4 or more.
usage: test_hf_export.py BRT_DIST   (~10 s on 2 cores)"""
import json
import re
import sys
import tempfile
from pathlib import Path

from common import SKIP, check, run
from hf_common import exported_run, load_remote_package, remote_code_files

try:
    import torch
except ImportError:
    print("skipped: PyTorch is not installed (Debian: python3-torch)")
    sys.exit(SKIP)

import numpy as np

from brt_dist import load_checkpoint
from brt_dist.data import read_documents, stream_tokens
from brt_dist.torch import from_checkpoint
from brt_dist.weights import read_safetensors

TOL = 2.0 ** -18
VARIANTS = ["slide", "rec:fixed:skip", "bst:sh:s4d"]
CUTS = [50, 77, 64, 1, 130]   # call lengths: mid-segment, across a boundary, a whole one, one token


def check_folder(folder, ckpt, data, variant):
    config = json.loads((folder / "config.json").read_text())
    check(config["model_type"] == "brt" and config["architectures"] == ["BrtForCausalLM"]
          and config["auto_map"]["AutoModelForCausalLM"] == "modeling_brt.BrtForCausalLM"
          and config["torch_dtype"] == "float32", "%s: config.json %s" % (variant, config))
    for name, value in vars(ckpt.model_config).items():
        check(config[name] == value, "%s: config.json %s = %r, the checkpoint's %r" % (variant, name, config[name], value))
    check(config["vocab_size"] == ckpt.model_config.vocab, "%s: vocab_size" % variant)
    check((folder / "tokenizer.model").read_bytes() == (Path(data) / "tokenizer.model").read_bytes(),
          "%s: tokenizer.model is not the run's" % variant)
    check(json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"] == "LlamaTokenizer",
          "%s: tokenizer_config.json" % variant)
    # A module-level import of the package would load brt_dist where it is installed and fail
    # where it is not (here the repository's python/ is on sys.path): every module the folder's
    # code needs must be embedded (launch/CMakeLists.txt, BRT_HF_PYTHON).
    for py in folder.glob("*.py"):
        for line in py.read_text().splitlines():
            check(not re.match(r"(from|import)\s+brt_dist\b", line), "%s: %s: %s" % (variant, py.name, line))
    weights, metadata = read_safetensors(folder / "model.safetensors")
    check(metadata.get("format") == "pt", "%s: safetensors metadata %s (transformers needs format pt)" % (variant, metadata))
    check(set(weights) == {"model." + k for k in ckpt.parameters}, "%s: safetensors names %s" % (variant, sorted(weights)))
    for name, value in ckpt.parameters.items():
        w = weights["model." + name]
        check(w.dtype == np.float32 and np.array_equal(w, np.asarray(value, dtype=np.float32)),
              "%s: %s differs from the checkpoint" % (variant, name))
    return config, weights


def check_sentencepiece(folder, work, data):
    """With Debian's python3-sentencepiece: the exported tokenizer.model, used as LlamaTokenizer's
    legacy mode uses it (SentencePiece alone), encodes each validation document as brt-dist did.
    Returns False when the package is missing (not checked)."""
    try:
        import sentencepiece
    except ImportError:
        return False
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    docs = {tuple(t) for _, t in read_documents(data, "validation")}
    for text_file in sorted((Path(work) / "corpus-corpus" / "validation").iterdir()):
        check(tuple(sp.encode(text_file.read_text())) in docs, "sentencepiece's ids of %s are not brt-dist's" % text_file)
    check((sp.bos_id(), sp.eos_id(), sp.unk_id(), sp.id_to_piece(1)) == (1, 2, 0, "<s>"),
          "special pieces differ from tokenizer_config.json's")
    return True


def stream_losses(model, stream, cuts):
    """Per-target losses {position: nats} of one document stream fed in calls of `cuts`
    tokens (then the rest at once), the state carried from call to call."""
    inputs = torch.as_tensor(stream[:-1])[None]
    logits, past, begin = [], None, 0
    for n in list(cuts) + [len(stream)]:
        if begin >= inputs.shape[1]:
            break
        with torch.no_grad():
            out = model(inputs[:, begin:begin + n], past_key_values=past)
        logits.append(out.logits)
        past, begin = out.past_key_values, begin + n
    logits = torch.cat(logits, 1)[0].double()
    losses = torch.nn.functional.cross_entropy(logits, torch.as_tensor(stream[1:]), reduction="none")
    return {p + 1: float(x) for p, x in enumerate(losses)}, logits


def check_variant(bin_path, work, variant, data):
    data, ckpt_path, folder = exported_run(bin_path, work, variant, data=data)
    ckpt = load_checkpoint(ckpt_path)
    config, weights = check_folder(folder, ckpt, data, variant)
    configuration, modeling, copied = load_remote_package(folder, Path(work) / "modules", "brt_" + variant.replace(":", "_"))
    check(Path(modeling.BrtModel.__module__.replace(".", "/")).name == "brt_model"
          and Path(sys.modules[modeling.BrtModel.__module__].__file__).parent == copied,
          "%s: the model did not come from the copied folder" % variant)
    model = modeling.BrtForCausalLM(configuration.BrtConfig(**config))
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()}, strict=True)
    model.eval()
    token_file = Path(work) / (variant.replace(":", "_") + ".tokens.tsv")
    run([bin_path, "eval", "--checkpoint", ckpt_path, "--quiet", "--token-losses", token_file])
    cpp = {}
    for line in token_file.read_text().splitlines()[1:]:
        d, p, x = line.split("\t")
        cpp[(int(d), int(p))] = float(x)
    worst, cut = 0.0, 0.0
    package = from_checkpoint(ckpt, dtype=torch.float64)
    for doc_id, tokens in read_documents(data, "validation"):
        stream = stream_tokens(tokens)
        ours, logits = stream_losses(model, stream, CUTS)
        whole, logits_whole = stream_losses(model, stream, [])
        # However the document is cut into calls: the same segments, so the same logits, bit for bit
        # but for BST, whose FFT convolution (model.md §7) rounds the padding of a partial
        # segment into the tokens before it (the size of float32 rounding).
        cut = max(cut, float(((logits - logits_whole).abs() / logits_whole.abs().clamp(min=1)).max()))
        for p, x in ours.items():
            worst = max(worst, abs(x - cpp[(doc_id, p)]) / max(1.0, abs(cpp[(doc_id, p)])))
        check(len(ours) == sum(1 for d, _ in cpp if d == doc_id), "%s: doc %d: the targets differ" % (variant, doc_id))
    check(cut == 0 or (variant.startswith("bst") and cut <= TOL),
          "%s: the logits depend on how a document is cut into calls (%.2e)" % (variant, cut))
    check(worst <= TOL, "%s: a token's loss differs from brt-dist's by %.2e (> %.2e)" % (variant, worst, TOL))
    check_package_identity(model, package, read_documents(data, "validation")[0][1], variant)
    check_labels(model, stream_tokens(read_documents(data, "validation")[0][1]), variant)
    return worst, cut, len(cpp), remote_code_files(folder)


def check_package_identity(model, package, tokens, variant):
    """In float64 the folder's model computes exactly what brt_dist.torch's BrtModel does."""
    model64 = model.to(torch.float64)
    inputs = torch.as_tensor(stream_tokens(tokens)[:2 * package.cfg.seq_len])[None]
    with torch.no_grad():
        ours = model64(inputs).logits
        state, theirs = {}, []
        for begin in range(0, inputs.shape[1], package.cfg.seq_len):
            logits, state = package(inputs[:, begin:begin + package.cfg.seq_len], state)
            theirs.append(logits)
    check(torch.equal(ours, torch.cat(theirs, 1)), "%s: float64 logits differ from brt_dist.torch's" % variant)
    model.to(torch.float32)


def check_labels(model, stream, variant):
    """labels: the mean shifted cross-entropy, as transformers' causal LMs define it."""
    ids = torch.as_tensor(stream[:100])[None]
    labels = ids.clone()
    labels[0, :10] = -100
    with torch.no_grad():
        out = model(ids, labels=labels)
    expect = torch.nn.functional.cross_entropy(out.logits[0, 9:-1].double(), ids[0, 10:])
    check(abs(float(out.loss) - float(expect)) <= 1e-6 * float(expect), "%s: loss %s vs %s" % (variant, out.loss, expect))


def main(bin_path):
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        data = None
        for variant in VARIANTS:
            worst, cut, targets, files = check_variant(bin_path, work, variant, data)
            data = Path(work) / "corpus-data"
            print("  %-16s %d targets, worst per-token difference %.2e (bar %.2e); cut into calls: logits "
                  "differ by %.2e" % (variant, targets, worst, TOL, cut))
        print("  remote-code files: %s" % ", ".join(files))
        print("  tokenizer.model: %s" % ("encodes the validation documents as brt-dist did (sentencepiece)"
                                         if check_sentencepiece(Path(work) / "hf-bst_sh_s4d", work, data)
                                         else "not checked (no python3-sentencepiece)"))
    print("hf export: every variant within %.2e of brt-dist" % TOL)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
