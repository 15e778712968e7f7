"""Shared by the Python package's tests: the package from the source tree, a tiny corpus, and
brt-dist runs small enough for 2 shared cores (nothing near docs/model.md sizes: D 32, 3 layers, N 64, W 16)."""
import os
import random
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

SKIP = 77  # ctest SKIP_RETURN_CODE
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
TINY = ["model.layers=3", "model.recurrent_layers=[1]", "model.bst_layers=[0,2]", "model.d_model=32",
        "model.heads=2", "model.head_dim=16", "model.d_ff=64", "model.vocab=320", "model.seq_len=64",
        "model.window=16", "model.state_size=8", "model.ctx_states=8", "model.ssm_state=16",
        "train.eval_every=0", "train.peak_gflops=1", "log.every=10", "log.metrics_path=", "run.dir=",
        "data.share_documents=true",  # corpora of 1-2 documents for 4 streams (docs/data-format.md)
        "data.source=shards", "checkpoint.async=false", "optim.warmup=2"]
VARIANTS = ["slide", "xl", "rec:fixed:skip", "rec:lstm:skip", "rec:fixed:dual", "rec:lstm:dual",
            "feedback:fixed:skip", "feedback:lstm:dual",   # model.md §5.4 (layer 1 of 3: one below, one above)
            "bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d", "bst:sh:unstructured", "bst:mh:unstructured",
            "bst:mf:unstructured"]


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def run(cmd, log=None):
    """Runs a command; on failure raises with the tail of its output."""
    done = subprocess.run([str(c) for c in cmd], env=ENV, capture_output=True, text=True)
    if log:
        Path(log).write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(map(str, cmd[:3])), done.returncode,
                                                     (done.stdout + done.stderr)[-1500:]))
    return done.stdout


def write_corpus(root, train_docs, validation_docs, lines=200, seed=3):
    """A PG19-style corpus of random "words" (as tests/integration/eval_longer.sh makes)."""
    rnd = random.Random(seed)
    words = ["".join(rnd.choice("abcdefghij") for _ in range(rnd.randint(2, 6))) for _ in range(300)]
    for split, n, length in (("train", train_docs, lines), ("validation", validation_docs, lines // 10)):
        (Path(root) / split).mkdir(parents=True, exist_ok=True)
        for d in range(n):
            text = "\n".join(" ".join(rnd.choice(words) for _ in range(10)) + "." for _ in range(length))
            (Path(root) / split / ("doc%d.txt" % d)).write_text(text)


def prepare(bin_path, work, name, train_docs, validation_docs):
    corpus, data = Path(work) / (name + "-corpus"), Path(work) / (name + "-data")
    write_corpus(corpus, train_docs, validation_docs)
    run([bin_path, "prepare", "--corpus", corpus, "--out", data, "--vocab", "320", "--quiet"])
    return data


def train(bin_path, work, variant, data, steps, extra=()):
    """Trains `variant` for `steps` steps; returns the final checkpoint's path."""
    name = "ckpt-" + variant.replace(":", "_") + "-%d" % steps + ("-" + str(abs(hash(tuple(extra))) % 10000) if extra else "")
    out = Path(work) / name
    xl = ["model.window=64"] if variant == "xl" else []
    run([bin_path, "train", REPO / "configs" / "tiny.toml", *TINY, "model.variant=" + variant,
         "data.path=%s" % data, "train.steps=%d" % steps, "checkpoint.dir=%s" % out, *xl, *extra])
    return out / ("ckpt-%08d.h5" % steps)
