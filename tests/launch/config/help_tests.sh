#!/usr/bin/env bash
# Help on every command: `COMMAND --help`, `-h` and `brt-dist help COMMAND`
# exit 0 with usage, flags and examples and no MPI noise; train, eval and generate list every
# config key of the key table with its type and default; `config show` prints the resolved
# TOML, which reads back to the same config; train writes it beside its metrics.
set -uo pipefail
bin=$(realpath "$1")
cd "$(dirname "$0")/../../.."
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
keys=$("$bin" config keys | grep -cE '^    [a-z]+\.[a-z_]+ ')
[ "$keys" -ge 60 ] || fail "config keys lists only $keys keys"
for cmd in train eval generate prepare ckpt config plan doctor version help; do
  for form in "$cmd --help" "$cmd -h" "help $cmd"; do
    out=$("$bin" $form 2>&1); rc=$?
    [ $rc -eq 0 ] || fail "brt-dist $form exits $rc"
    grep -q "^usage: brt-dist" <<< "$out" || fail "brt-dist $form: no usage line"
    grep -qi "mpi_abort\|orte\|pmix" <<< "$out" && fail "brt-dist $form: MPI noise"
  done
  listed=$("$bin" $cmd --help | grep -cE '^    [a-z]+\.[a-z_]+ ')
  case $cmd in
    train|eval|generate) [ "$listed" -eq "$keys" ] || fail "$cmd --help lists $listed of $keys keys" ;;
  esac
done
# (grep -q on a pipe would stop reading early: the writer's SIGPIPE fails the pipeline.)
grep -q "verify FILE" <<< "$("$bin" ckpt verify --help)" || fail "ckpt verify --help"
grep -q "train.timeout_s *a number *default 600.0 " <<< "$("$bin" train --help)" || fail "train --help lacks train.timeout_s with its default"
grep -q "^  config " <<< "$("$bin" --help)" || fail "the overview lacks the config command"
# config show: inheritance and overrides applied; the output is itself a config giving the same.
"$bin" config show tiny train.steps=5 optim.lr=0.02 > "$work/a.toml" || fail "config show"
grep -q "^steps = 5 " "$work/a.toml" || fail "override not applied"
grep -q "^lr = 0.02 " "$work/a.toml" || fail "override not applied"
"$bin" config show "$work/a.toml" > "$work/b.toml" || fail "config show of its own output"
diff "$work/a.toml" "$work/b.toml" > /dev/null || fail "config show is not a fixed point"
"$bin" config show no-such-config > "$work/err.txt" 2>&1 && fail "config show of a missing config exited 0"
grep -q "unknown config .no-such-config.: no such file" "$work/err.txt" || fail "unclear error: $(cat "$work/err.txt")"
# train writes the resolved config beside its metrics.
(cd "$work" && "$bin" train "$OLDPWD/configs/tiny.toml" data.source=synthetic train.steps=1 train.eval_every=0 \
   train.peak_gflops=1 log.metrics_path=run/metrics.jsonl > train.log 2>&1) || fail "train: $(tail -3 "$work/train.log")"
"$bin" config show "$work/run/metrics.config.toml" train.steps=1 > /dev/null || fail "the written config does not load"
grep -q "^steps = 1 " "$work/run/metrics.config.toml" || fail "train wrote another config"
echo "help_tests: every command's help and config show passed ($keys keys)"
