#!/usr/bin/env bash
# Weights out and back in through the command line: a GPT trains with checkpoints, `trainer export`
# writes its newest checkpoint as safetensors (Hugging Face GPT-2 names, metadata, config.json), a
# second run starts from that file with model.init_from, and bad input (not a run directory, an
# unknown format, an unwritable --out, a corrupt or foreign weights file) is a one-line error,
# exit 2, with nothing written.
# usage: export.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

for i in $(seq 1 80); do printf 'line %d of a small corpus for the export test, words and more words\n\n' "$i"; done > "$tmp/c.txt"
"$trainer" tokenize --input "$tmp/c.txt" --vocab-size 300 --out "$tmp/tok" --eval-fraction 0.1 > "$tmp/tok.log"
vocab=$(sed -n 's/.*vocab_size = \([0-9]*\).*/\1/p' "$tmp/tok.log")
cat > "$tmp/gpt.toml" <<TOML
[run]
out_dir = "$tmp/runs"
name = "a"
[model]
name = "gpt"
dim = 16
layers = 1
heads = 2
ffn = 32
[data]
name = "tokens"
train_path = "$tmp/tok/train.bin"
val_path = "$tmp/tok/val.bin"
vocab_size = $vocab
seq_len = 8
[train]
steps = 5
micro_batch = 4
[optimizer]
name = "adamw"
lr = 0.01
[distributed]
world_size = 2
[checkpoint]
every = 2
TOML
"$trainer" --recipe "$tmp/gpt.toml" > "$tmp/a.log"
[ -f "$tmp/runs/a/checkpoints/step-000000005/MANIFEST.json" ] || { echo "the last step was not checkpointed"; exit 1; }

"$trainer" export "$tmp/runs/a" --format safetensors --out "$tmp/a.safetensors" --config "$tmp/config.json" | tee "$tmp/export.log"
grep -q "export: .*step-000000005 (step 5): gpt L1 d16" "$tmp/export.log"
grep -q "wrote $tmp/a.safetensors: 16 tensors, .* Hugging Face GPT2LMHeadModel names; config in $tmp/config.json" "$tmp/export.log"
"$py" - "$tmp/a.safetensors" "$tmp/config.json" "$vocab" <<'PY'
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
h = json.loads(blob[8:8 + n])
meta = h.pop("__metadata__")
assert meta["format"] == "pt" and meta["laconic.architecture"] == "gpt" and meta["laconic.step"] == "5", meta
assert "[model]" in meta["laconic.recipe"] and len(meta["laconic.recipe_hash"]) == 16
assert h["transformer.h.0.attn.c_attn.weight"]["shape"] == [16, 48], h["transformer.h.0.attn.c_attn.weight"]
assert h["transformer.wte.weight"]["shape"] == [int(sys.argv[3]), 16]
assert "lm_head.weight" not in h  # tied to wte, not written
end = max(e["data_offsets"][1] for e in h.values())
assert len(blob) == 8 + n + end, (len(blob), n, end)
c = json.load(open(sys.argv[2]))
assert c["model_type"] == "gpt2" and c["n_embd"] == 16 and c["activation_function"] == "gelu", c
PY
# The checkpoint directory itself exports the same file.
"$trainer" export "$tmp/runs/a/checkpoints/step-000000005" --out "$tmp/b.safetensors" > /dev/null
cmp "$tmp/a.safetensors" "$tmp/b.safetensors"

# A run from the exported weights.
"$trainer" --recipe "$tmp/gpt.toml" --run.name=b --model.init_from="$tmp/a.safetensors" --checkpoint.every=0 > "$tmp/b.log"
grep -q "^done: 5 steps" "$tmp/b.log"

expect_error() {  # expect_error PATTERN [--no-run NAME] -- ARGS...: exit 2, one line matching PATTERN
  local pattern=$1; shift
  set +e
  "$trainer" "$@" > "$tmp/out.log" 2> "$tmp/err.log"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || { echo "expected exit 2, got $rc: $*"; cat "$tmp/err.log"; exit 1; }
  [ "$(wc -l < "$tmp/err.log")" -eq 1 ] || { echo "expected one line: $*"; cat "$tmp/err.log"; exit 1; }
  grep -q -- "$pattern" "$tmp/err.log" || { echo "expected '$pattern' in:"; cat "$tmp/err.log"; exit 1; }
}
expect_error "$tmp/tok: expected a run directory (with recipe.resolved.toml) or a checkpoint directory" \
  export "$tmp/tok" --out "$tmp/x.safetensors"
expect_error 'export: --format: expected "safetensors", got "onnx"' export "$tmp/runs/a" --format onnx --out "$tmp/x.safetensors"
expect_error "$tmp/no/such/dir/x.safetensors" export "$tmp/runs/a" --out "$tmp/no/such/dir/x.safetensors"
[ ! -e "$tmp/x.safetensors" ] || { echo "a file was left behind"; exit 1; }
head -c 100 "$tmp/a.safetensors" > "$tmp/cut.safetensors"
expect_error "$tmp/cut.safetensors: not a safetensors file: header length" \
  --recipe "$tmp/gpt.toml" --run.name=c --model.init_from="$tmp/cut.safetensors"
expect_error "$tmp/a.safetensors: model.init_from: tensor 'transformer.wte.weight': shape \[$vocab, 16\], expected \[$vocab, 32\]" \
  --recipe "$tmp/gpt.toml" --run.name=c --model.dim=32 --model.init_from="$tmp/a.safetensors"
[ ! -e "$tmp/runs/c" ] || { echo "a run directory was left behind"; exit 1; }
echo "export: ok"
