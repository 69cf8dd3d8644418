#!/usr/bin/env bash
# Data you bring, end to end: `trainer tokenize` writes llm.c token files a GPT then trains on;
# files from a reference llm.c writer (tests/fixtures/tokens/llmc_writer.py, numpy) load as they
# are; a corrupt file or an id beyond the vocabulary is a one-line error naming the file, exit 2,
# with no run directory left behind.
# usage: tokens.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3  # Debian's, with python3-numpy (scripts/install-deps)
"$py" -c "import numpy" 2>/dev/null || { echo "python3-numpy not installed (scripts/install-deps): skipping"; exit 77; }

mkdir -p "$tmp/corpus/notes"
for i in $(seq 1 60); do
  printf 'the quick brown fox %d jumps over the lazy dog\n\nsome more text in paragraph %d of the corpus\n\n' "$i" "$i"
done > "$tmp/corpus/book.txt"
printf 'a second file with its own words\n' > "$tmp/corpus/notes/extra.txt"
printf 'not read: markdown\n' > "$tmp/corpus/readme.md"

"$trainer" tokenize --input "$tmp/corpus" --vocab-size 400 --out "$tmp/tok" --eval-fraction 0.1 | tee "$tmp/tok.log"
grep -q "tokenize: 121 documents" "$tmp/tok.log"
for f in train.bin val.bin tokenizer.txt; do [ -s "$tmp/tok/$f" ] || { echo "missing $f"; exit 1; }; done
vocab=$(sed -n 's/.*vocab_size = \([0-9]*\).*/\1/p' "$tmp/tok.log")

cat > "$tmp/gpt.toml" <<TOML
[model]
name = "gpt"
dim = 32
layers = 1
heads = 2
ffn = 64
[data]
name = "tokens"
train_path = "$tmp/tok/train.bin"
val_path = "$tmp/tok/val.bin"
vocab_size = $vocab
seq_len = 16
[train]
steps = 30
micro_batch = 8
log_every = 10
[optimizer]
name = "adamw"
lr = 0.01
[distributed]
world_size = 2
TOML
"$trainer" --recipe "$tmp/gpt.toml" --out "$tmp/run" | tee "$tmp/run.log"
grep -q "unigram baseline (context-free) next-token loss" "$tmp/run.log"
/usr/bin/python3 - "$tmp/run" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["steps"] == 30 and s["eval_loss"] < 5.0, s
PY

# A reference llm.c writer's files (both kinds) and a headerless nanoGPT file train as they are.
w="$src/tests/fixtures/tokens/llmc_writer.py"
ids=$("$py" -c "print(' '.join(str((i * 7) % 50) for i in range(400)))")
"$py" "$w" "$tmp/ref_gpt2.bin" gpt-2 $ids
"$py" "$w" "$tmp/ref_llama.bin" llama-3 $ids
"$py" "$w" "$tmp/ref_raw.bin" raw-u16 $ids
common=(--data.vocab_size=50 --data.val_path="" --train.steps=2 --distributed.world_size=1)
"$trainer" --recipe "$tmp/gpt.toml" "${common[@]}" --data.train_path="$tmp/ref_gpt2.bin" --out "$tmp/r1" > /dev/null
"$trainer" --recipe "$tmp/gpt.toml" "${common[@]}" --data.train_path="$tmp/ref_llama.bin" --out "$tmp/r2" > /dev/null
"$trainer" --recipe "$tmp/gpt.toml" "${common[@]}" --data.train_path="$tmp/ref_raw.bin" --data.token_format=u16 --out "$tmp/r3" > /dev/null

# Bad data: exit 2, one line naming the file, nothing written.
expect_bad() {  # expect_bad WHAT ARGS...
  local what=$1; shift
  set +e
  "$trainer" --recipe "$tmp/gpt.toml" "${common[@]}" --out "$tmp/bad" "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
  local rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "expected exit 2, got $rc for $*"; cat "$tmp/bad.err"; exit 1; }
  [ "$(wc -l < "$tmp/bad.err")" = 1 ] || { echo "expected one line:"; cat "$tmp/bad.err"; exit 1; }
  grep -qF "$what" "$tmp/bad.err" || { echo "expected '$what' in:"; cat "$tmp/bad.err"; exit 1; }
  [ ! -e "$tmp/bad" ] || { echo "a run directory was left behind"; exit 1; }
}
head -c 1500 "$tmp/ref_gpt2.bin" > "$tmp/truncated.bin"
expect_bad "$tmp/truncated.bin: header says 400 tokens (800 bytes) but the file holds 476 bytes after the header (truncated)" \
  --data.train_path="$tmp/truncated.bin"
expect_bad "$tmp/ref_raw.bin: 800 bytes, shorter than llm.c's header of 1024 bytes (for headerless uint16 files, as nanoGPT's prepare.py writes, set data.token_format = \"u16\")" --data.train_path="$tmp/ref_raw.bin"
expect_bad "$tmp/ref_gpt2.bin: token 42 at index 6 is outside the model's vocabulary [0, 40)" \
  --data.train_path="$tmp/ref_gpt2.bin" --data.vocab_size=40
expect_bad "$tmp/none_*.bin: data.train_path: no file matches" --data.train_path="$tmp/none_*.bin"
expect_bad "tokenize" tokenize --input "$tmp/corpus" --vocab-size 100 --out "$tmp/bad"
echo "token files passed"
