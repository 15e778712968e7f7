#!/usr/bin/python3
"""`brt-dist export --hf` through transformers itself (docs/huggingface.md): the folder of a
tiny recurrent run loaded with AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)
from a copy of it (so transformers' module cache is the only place the code comes from), its
per-token losses over a validation document streamed in calls cut mid-segment, the state carried,
against `brt-dist eval --token-losses` (test_hf_export.py's bar); and, with the `sentencepiece`
package, AutoTokenizer.from_pretrained(DIR, use_fast=False) encoding a document as brt-dist did.
Exit 77 (skipped) when transformers is not importable (Debian 12 packages none).
usage: test_hf_transformers.py BRT_DIST"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import SKIP, check, run

try:
    import torch
    import transformers
except ImportError as e:
    print("skipped: %s (pip install transformers safetensors)" % e)
    sys.exit(SKIP)

from brt_dist.data import read_documents, stream_tokens
from hf_common import exported_run
from test_hf_export import CUTS, TOL, stream_losses


def check_tokenizer(folder, work, data):
    try:
        import sentencepiece  # noqa: F401
    except ImportError:
        print("  tokenizer: not checked (no sentencepiece package)")
        return
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, use_fast=False)
    docs = {tuple(t) for _, t in read_documents(data, "validation")}
    for text_file in sorted((Path(work) / "corpus-corpus" / "validation").iterdir()):
        ids = tokenizer(text_file.read_text(), add_special_tokens=False)["input_ids"]
        check(tuple(ids) in docs, "AutoTokenizer's ids of %s are not brt-dist's" % text_file)
    check(tokenizer.bos_token_id == 1, "bos_token_id %s" % tokenizer.bos_token_id)
    print("  tokenizer: %s encodes the validation documents as brt-dist did" % type(tokenizer).__name__)


def main(bin_path):
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        os.environ["HF_MODULES_CACHE"] = str(Path(work) / "hf-modules")   # not the user's cache
        data, ckpt, exported = exported_run(bin_path, work, "rec:fixed:skip")
        folder = Path(work) / "copy" / "brt_tiny"
        shutil.copytree(exported, folder)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
        check(type(model).__name__ == "BrtForCausalLM", "loaded %s" % type(model))
        token_file = Path(work) / "tokens.tsv"
        run([bin_path, "eval", "--checkpoint", ckpt, "--quiet", "--token-losses", token_file])
        cpp = {}
        for line in token_file.read_text().splitlines()[1:]:
            d, p, x = line.split("\t")
            cpp[(int(d), int(p))] = float(x)
        worst = 0.0
        for doc_id, tokens in read_documents(data, "validation"):
            ours, _ = stream_losses(model, stream_tokens(tokens), CUTS)
            worst = max([worst] + [abs(x - cpp[(doc_id, p)]) / max(1.0, abs(cpp[(doc_id, p)])) for p, x in ours.items()])
        check(worst <= TOL, "transformers-loaded model: a token's loss differs by %.2e (> %.2e)" % (worst, TOL))
        print("  AutoModelForCausalLM (transformers %s): worst per-token difference %.2e" % (transformers.__version__, worst))
        check_tokenizer(folder, work, data)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
