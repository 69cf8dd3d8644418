#!/usr/bin/env bash
# train.precision = "bf16" (GEMM operands rounded to bf16, fp32 sums, fp32 master weights,
# optimizer and reductions: workloads/nn/precision.h) trains the MLP and the GPT to within 1% of
# fp32's held-out loss at equal steps, same seed and data; and it is in effect (the losses differ
# from fp32's in their bits). The MLP: mlp_fmnist cut to one epoch (234 steps; held-out loss
# about 0.42); the GPT: gpt_fortunes cut to d96, 2 layers, 4 heads, ffn 384, sequences of 64, 100
# steps of 8 sequences per rank (it ends below the unigram baseline: it learned more than token
# frequencies). About 24 s of CPU; the two precisions were 0.04% (MLP) and 0.01% (GPT) apart.
# usage: bf16_quality.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || [ ! -d /usr/share/games/fortunes ]; then
  echo "Fashion-MNIST or fortunes not installed (scripts/install-deps installs them): skipping"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gpt=(--model.dim=96 --model.layers=2 --model.heads=4 --model.ffn=384 --data.seq_len=64
     --train.steps=100 --train.micro_batch=8 --train.eval_every=100 --schedule.warmup_steps=10)
for p in fp32 bf16; do
  "$trainer" --recipe "$src/recipes/mlp_fmnist.toml" --train.epochs=1 --train.precision=$p --out "$tmp/mlp_$p" | tail -1
  "$trainer" --recipe "$src/recipes/gpt_fortunes.toml" "${gpt[@]}" --train.precision=$p --out "$tmp/gpt_$p" | tail -1
done
grep -q '^precision = "bf16"' "$tmp/gpt_bf16/recipe.resolved.toml" || { echo "FAIL: recipe.resolved.toml lacks precision"; exit 1; }
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
ok = True
for model in ("mlp", "gpt"):
    f32, b16 = (json.load(open(f"{tmp}/{model}_{p}/summary.json")) for p in ("fp32", "bf16"))
    rel = abs(b16["eval_loss"] - f32["eval_loss"]) / f32["eval_loss"]
    print(f"{model}: held-out loss fp32 {f32['eval_loss']:.6f}, bf16 {b16['eval_loss']:.6f}: {100 * rel:.3f}% apart")
    if rel > 0.01:
        print(f"FAIL: {model}'s bf16 held-out loss is more than 1% from fp32's"); ok = False
    if b16["final_loss"] == f32["final_loss"]:
        print(f"FAIL: {model}'s bf16 run has fp32's final loss to the bit: precision not applied"); ok = False
sys.exit(0 if ok else 1)
PY
echo "PASS: bf16 within 1% of fp32's held-out loss (MLP, GPT)"
