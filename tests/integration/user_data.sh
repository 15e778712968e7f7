#!/usr/bin/env bash
# A researcher's own data (docs/data-format.md "Inputs"): a JSONL corpus with malformed records
# (refused naming file and line, or skipped and counted), its texts decoded (never raw JSON),
# a held-out split made for a corpus without one, a gzip'd JSONL and a text in a folder of any
# mix, a JSONL given as --files, a single text cut into documents so validation exists, then
# trained end to end with evaluation and generation; fewer documents than streams refused
# naming both numbers, or shared at distinct offsets when asked.
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")
books=${BRT_SHARED_DIR:-$PWD/../shared}/data/books/raw
[ -d "$books" ] || { echo "SKIP: no book corpus at $books"; exit 0; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$books" "$work" <<'PY'
import gzip, json, os, sys
books, work = sys.argv[1:3]
texts = []
for name in sorted(os.listdir(books))[:4]:
    t = open(os.path.join(books, name), encoding="utf-8").read()
    texts += [t[i:i + 12000] for i in range(0, 120000, 12000)]
with open(os.path.join(work, "corpus.jsonl"), "w") as f:
    for i, t in enumerate(texts):
        f.write(json.dumps({"id": i, "text": t}) + "\n")
        if i == 7:
            f.write('{"text": "a record cut off\n')
            f.write('{"title": "no text field"}\n')
def normalised(t):  # what prepare keeps of a document: no leading BOM, CRLF as LF (data/corpus/text.h)
    return (t[1:] if t.startswith("\ufeff") else t).replace("\r\n", "\n")
json.dump(sum(len(normalised(t).encode()) for t in texts), open(os.path.join(work, "bytes.json"), "w"))
os.makedirs(os.path.join(work, "mix/more"))
with gzip.open(os.path.join(work, "mix/more/body.jsonl.gz"), "wt") as f:
    for t in texts[:10]:
        f.write(json.dumps({"body": t}) + "\n")
open(os.path.join(work, "mix/book.txt"), "w").write(texts[0] * 3)
open(os.path.join(work, "long.txt"), "w").write(open(os.path.join(books, sorted(os.listdir(books))[0])).read() * 6)
PY
cd "$work"
# 1. A malformed record is refused by default, naming the file and line; nothing is written.
if "$bin" prepare --input corpus.jsonl --out data --vocab 512 --quiet > refuse.log 2>&1; then fail "a malformed record was accepted"; fi
grep -q "corpus.jsonl:9: not valid JSON" refuse.log || fail "unclear refusal: $(cat refuse.log)"
[ ! -e data/index.tsv ] || fail "a refused prepare wrote an index"
# 2. Skipped and counted; the held-out split is made and stated; the texts are decoded.
"$bin" prepare --input corpus.jsonl --out data --vocab 512 --on-bad-record skip --quiet > prep.log 2> prep.err
grep -q "40 JSONL records, 2 malformed records skipped" prep.log || fail "summary: $(cat prep.log)"
grep -q "held out 1 of 40 documents for validation and 1 for test" prep.log || fail "holdout: $(cat prep.log)"
grep -q "corpus.jsonl:10: no \"text\" field" prep.err || fail "skip warning: $(cat prep.err)"
/usr/bin/python3 - <<'PY' || fail "the index's bytes are not the decoded texts'"
import json
want = json.load(open("bytes.json"))
rows = [l.split("\t") for l in open("data/index.tsv") if l[0].isdigit()]
got = sum(int(r[5]) for r in rows)
assert got == want, (got, want)
assert all(r[7].strip().startswith("corpus.jsonl:") for r in rows), rows[0]
PY
# 3. A JSONL given as a file list is read as a corpus; a folder of any mix with another text key.
"$bin" prepare --files corpus.jsonl --out data-files --vocab 512 --on-bad-record skip --quiet > files.log 2>&1
grep -q "corpus.jsonl is a JSONL corpus, read as --input" files.log || fail "--files x.jsonl: $(cat files.log)"
"$bin" prepare --corpus mix --text-key body --out data-mix --vocab 512 --quiet > mix.log 2>&1
grep -q "read 2 input files: 10 JSONL records" mix.log || fail "mixed folder: $(cat mix.log)"
# 4. One long text: cut into documents, so it has validation and test splits.
"$bin" prepare --input long.txt --out data-long --vocab 512 --quiet > long.log 2>&1
grep -q "1 long text cut into documents" long.log || fail "no cut: $(cat long.log)"
grep -Eq "splits: train [0-9]+, validation [1-9]" long.log || fail "no validation: $(cat long.log)"
# 5. Trained end to end on the JSONL corpus: the tiny config's eval_every (200) never fires in 4
#    steps, so a warning says so and the last step is evaluated; a checkpoint, then generation.
"$bin" train "$OLDPWD/configs/tiny.toml" "${SMALL[@]}" model.vocab=512 data.source=shards data.path=data \
  train.eval_every=200 train.steps=4 run.dir=runs/jsonl > train.log 2> train.err || fail "train: $(tail -3 train.err)"
grep -q "train.eval_every = 200 is more than train.steps = 4" train.err || fail "no eval_every warning: $(cat train.err)"
grep -q "eval  step      4" train.log || fail "no final evaluation: $(cat train.log)"
[ -f runs/jsonl/ckpt/ckpt-00000004.h5 ] && [ -f runs/jsonl/metrics.jsonl ] || fail "run.dir: $(ls -R runs)"
"$bin" generate --checkpoint runs/jsonl/ckpt --prompt "It was" --max-tokens 20 --seed 1 > gen.txt 2>&1 || fail "generate: $(cat gen.txt)"
# 6. Fewer documents than streams: refused naming both numbers and the fix, or shared when asked.
printf 'one short document, the only one.\n' > one.txt
"$bin" prepare --input one.txt --out data-one --vocab 320 --quiet > /dev/null 2>&1 || fail "prepare one"
if "$bin" train "$OLDPWD/configs/tiny.toml" "${SMALL[@]}" model.vocab=320 data.source=shards data.path=data-one train.batch=4 \
     train.steps=2 > one.log 2>&1; then fail "4 streams over 1 document trained silently"; fi
grep -q "has 1 document for 4 global streams" one.log || fail "unclear refusal: $(cat one.log)"
grep -q "data.share_documents=true" one.log || fail "no way out named: $(cat one.log)"
"$bin" train "$OLDPWD/configs/tiny.toml" "${SMALL[@]}" model.vocab=320 data.source=shards data.path=data-one train.batch=4 \
  train.steps=2 data.share_documents=true > share.log 2>&1 || fail "share: $(tail -3 share.log)"
grep -q "streams share documents, each starting at a distinct offset" share.log || fail "no warning: $(cat share.log)"
echo "user_data: JSONL refused/skipped by file:line, decoded, held out, gz + folder + --files, one text cut, trained, streams guarded"
