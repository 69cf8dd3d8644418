#!/usr/bin/env bash
# `trainer generate` on a short gpt_fortunes run: greedy continuations are deterministic and exactly
# --tokens long, a longer greedy run extends a shorter one, a seeded sample repeats with its seed;
# a missing run, a non-GPT run and bad options are one-line errors, exit 2. Also the tokenizer
# cache: one cut short and edited to match (3 merges) is an error naming it, not a smaller vocabulary.
# usage: generate.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -d /usr/share/games/fortunes ] || { echo "Debian's fortunes not installed: skipping"; exit 77; }

small=(--run.out_dir="$tmp/runs" --train.steps=5 --checkpoint.every=5 --train.eval_every=0 --distributed.world_size=1
       --model.dim=32 --model.layers=1 --model.heads=2 --model.ffn=64 --data.vocab_size=400 --data.seq_len=32)
"$trainer" --recipe "$src/recipes/gpt_fortunes.toml" "${small[@]}" > "$tmp/train.log"
run="$tmp/runs/gpt_fortunes"
grep -q "data text: read [0-9]* files (.*) under /usr/share/games/fortunes; skipped" "$tmp/train.log" ||
  { echo "no corpus line in the run log"; cat "$tmp/train.log"; exit 1; }

gen() { "$trainer" generate "$run" --prompt "The meaning of life is" "$@" 2> "$tmp/gen.err"; }
gen --tokens 12 --temperature 0 --ids > "$tmp/g1.txt"
gen --tokens 12 --temperature 0 --ids > "$tmp/g2.txt"
cmp "$tmp/g1.txt" "$tmp/g2.txt"
grep -q "^generate: 12 tokens after a [0-9]*-token prompt from .*step-000000005 (step 5), greedy" "$tmp/gen.err"
[ "$(wc -l < "$tmp/g1.txt")" -eq 2 ] || { echo "expected the text and the ids"; cat "$tmp/g1.txt"; exit 1; }
head -1 "$tmp/g1.txt" | grep -q "^the meaning of life is " || { echo "the prompt does not lead"; cat "$tmp/g1.txt"; exit 1; }
ids12=$(sed -n 2p "$tmp/g1.txt")
[ "$(echo "$ids12" | wc -w)" -eq 12 ] || { echo "expected 12 ids: $ids12"; exit 1; }
for id in $ids12; do [ "$id" -ge 0 ] && [ "$id" -lt 400 ] || { echo "id $id outside the vocabulary"; exit 1; }; done
gen --tokens 20 --temperature 0 --ids > "$tmp/g3.txt"
ids20=$(sed -n 2p "$tmp/g3.txt")
[ "$(echo "$ids20" | wc -w)" -eq 20 ] || { echo "expected 20 ids: $ids20"; exit 1; }
[ "${ids20#"$ids12 "}" != "$ids20" ] || { echo "greedy 20 does not extend greedy 12: $ids12 / $ids20"; exit 1; }

# Sampling: the same seed, the same text; top-k 1 is greedy.
gen --tokens 15 --temperature 1.5 --seed 7 --ids > "$tmp/s1.txt"
gen --tokens 15 --temperature 1.5 --seed 7 --ids > "$tmp/s2.txt"
cmp "$tmp/s1.txt" "$tmp/s2.txt"
gen --tokens 15 --temperature 1.5 --seed 8 --ids > "$tmp/s3.txt"
! cmp -s "$tmp/s1.txt" "$tmp/s3.txt" || { echo "seeds 7 and 8 drew the same 15 tokens"; exit 1; }
gen --tokens 12 --temperature 2 --top-k 1 --seed 3 --ids > "$tmp/k1.txt"
[ "$(sed -n 2p "$tmp/k1.txt")" = "$ids12" ] || { echo "top-k 1 is not greedy"; exit 1; }

expect_error() {  # expect_error PATTERN ARGS...: exit 2, one line on stderr matching PATTERN
  local pattern=$1; shift
  set +e
  "$trainer" "$@" > "$tmp/out.log" 2> "$tmp/err.log"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || { echo "expected exit 2, got $rc: $*"; cat "$tmp/err.log"; exit 1; }
  [ "$(wc -l < "$tmp/err.log")" -eq 1 ] || { echo "expected one line: $*"; cat "$tmp/err.log"; exit 1; }
  grep -q -- "$pattern" "$tmp/err.log" || { echo "expected '$pattern' in:"; cat "$tmp/err.log"; exit 1; }
}
expect_error "$tmp/nowhere: expected a run directory" generate "$tmp/nowhere" --prompt hi
expect_error "generate: --tokens: expected at least 1, got 0" generate "$run" --prompt hi --tokens 0
expect_error "generate: --temperature: expected a number >= 0" generate "$run" --prompt hi --temperature -1
"$trainer" --recipe "$src/recipes/gpt_fortunes.toml" "${small[@]}" --run.name=bert --model.name=bert --train.steps=1 \
  --checkpoint.every=1 > /dev/null
expect_error "$tmp/runs/bert: generate samples from GPT runs (model.name = \"gpt\"); this run's model is \"bert\"" \
  generate "$tmp/runs/bert" --prompt hi

# The tokenizer cache cut to 3 merges, its count edited to match.
cache=$(ls "$tmp"/runs/tokenizer-400-*.txt)
{ sed -n 1,3p "$cache"; echo "merges 3"; sed -n 5,8p "$cache"; } > "$tmp/cut.txt"
mv "$tmp/cut.txt" "$cache"
expect_error "tokenizer cache $cache:5: expected the 3 merges to have checksum .*; delete it to train the tokenizer again" \
  --recipe "$src/recipes/gpt_fortunes.toml" "${small[@]}" --run.name=again
[ ! -e "$tmp/runs/again" ] || { echo "a run directory was left behind"; exit 1; }
echo "generate: ok"
