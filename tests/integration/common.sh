# Shared by the integration scripts: a small model that runs in a second, and helpers.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
SMALL=(model.layers=2 model.recurrent_layers=[1] model.d_model=32 model.heads=2 model.head_dim=16
       model.d_ff=64 model.vocab=64 model.seq_len=32 model.window=8 model.state_size=8
       train.batch=2 train.eval_every=0 train.peak_gflops=1 log.every=1 data.source=synthetic
       optim.warmup=2 run.dir=)  # run.dir=: no metrics or checkpoints unless a test names them
fail() { echo "FAIL: $*" >&2; exit 1; }
# Losses of the train events in a metrics file, one "step loss" per line.
losses() { grep '"event":"train"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# word_corpus DIR SEED TRAIN_DOCS VALIDATION_DOCS LINES: a PG19-layout corpus of random words
# (DIR/train, DIR/validation; LINES sentences of 10 words per document) for prepare --corpus.
word_corpus() {
  /usr/bin/python3 - "$@" <<'PY'
import os, random, sys
out, seed, n_train, n_val, lines = sys.argv[1], *map(int, sys.argv[2:])
random.seed(seed)
words = ["".join(random.choice("abcdefghij") for _ in range(random.randint(2, 6))) for _ in range(300)]
for split, n in [("train", n_train), ("validation", n_val)]:
    os.makedirs(os.path.join(out, split))
    for d in range(n):
        with open(os.path.join(out, split, "doc%d.txt" % d), "w") as f:
            f.write("\n".join(" ".join(random.choice(words) for _ in range(10)) + "." for _ in range(lines)))
PY
}
