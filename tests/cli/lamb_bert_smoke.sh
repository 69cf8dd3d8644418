#!/usr/bin/env bash
# A short, shrunken lamb_bert run must learn: the held-out MLM loss ends clearly below its
# value at initialisation (ln(vocab) for BERT's small init), and the run prints the unigram
# baseline and the resolved learning rate.   usage: lamb_bert_smoke.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -d /usr/share/games/fortunes ]; then
  echo "fortunes not installed (scripts/install-deps installs it): skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$trainer" --recipe "$src/recipes/lamb_bert.toml" --out "$tmp/run" --run.out_dir="$tmp/cache" \
  --train.steps=300 --train.eval_every=0 --train.log_every=20 --train.micro_batch=8 --train.grad_accum=1 \
  --distributed.world_size=2 --data.seq_len=32 --data.vocab_size=1000 \
  --model.dim=64 --model.layers=1 --model.heads=2 --model.ffn=128 \
  --optimizer.lr=0.02 --schedule.scaling_rule=none --schedule.warmup_steps=10 | tee "$tmp/log"
grep -q "unigram baseline" "$tmp/log"
grep -q "peak lr 0.02 (no scaling)" "$tmp/log"
# The closing line: the held-out loss against the baseline, bytes in units, where the weights are.
grep -Eq "^done: 300 steps in .*, eval loss [0-9.]+ \([0-9.]+ nats (below|above) the unigram baseline [0-9.]+\), eval accuracy [0-9.]+%, sent [0-9.]+ [KMGTP]?B per rank; weights in $tmp/run/checkpoints/step-000000300; results in $tmp/run/" "$tmp/log" \
  || { tail -1 "$tmp/log"; echo "unexpected closing line"; exit 1; }
grep -q "effective_lr" "$tmp/run/recipe.resolved.toml"
ls "$tmp"/cache/tokenizer-1000-????????????????.txt >/dev/null 2>&1 || { echo "tokenizer was not cached (keyed by its corpus)"; ls "$tmp/cache"; exit 1; }
/usr/bin/python3 - "$tmp/run" <<'PY'
import json, math, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print("summary:", s)
start = math.log(1000)
assert s["eval_loss"] < start - 1.0, f"eval MLM loss {s['eval_loss']:.3f} not clearly below ln(1000) = {start:.3f}"
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
assert all("grad_norm" in r for r in recs), "grad_clip is on: grad_norm must be logged"
assert "noise_scale" in recs[-1], "noise_scale = true with 2 ranks: B_simple must be logged"
PY
echo "lamb_bert smoke run learned"
