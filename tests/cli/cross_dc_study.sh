#!/usr/bin/env bash
# scripts/cross-dc-study at 4 steps (a smoke test of the study docs/cross_dc records): every run
# trains and replays, the report and its replay on docs/cross_dc/batch_1m.toml are written with the new columns;
# the same at 2 steps for its GPT variant (--model gpt).
#   usage: TRAINER SOURCE_DIR
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$2/scripts/cross-dc-study" --steps 4 --out "$out" --build "$(dirname "$(realpath "$1")")" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
for f in report/report.md report/compare.json; do
  [[ -s "$out/$f" ]] || { echo "missing $f"; cat "$out/log"; exit 1; }
done
grep -q "peak inter-group" "$out/report/report.md" || { echo "no peak column"; exit 1; }
grep -q "sparseloco" "$out/report/report.md" || { echo "no sparseloco row"; exit 1; }
[[ -s "$out/report/batch_1m/report.md" ]] || { echo "no replay on batch_1m.toml"; ls "$out/report"; exit 1; }
# The GPT variant of the same comparison.
"$2/scripts/cross-dc-study" --model gpt --steps 2 --out "$out/gpt" --build "$(dirname "$(realpath "$1")")" >"$out/gpt.log" 2>&1 ||
  { cat "$out/gpt.log"; exit 1; }
grep -q '^name = "gpt"' "$out/gpt/diloco/recipe.resolved.toml" ||
  { echo "the GPT study did not train the GPT"; exit 1; }
[[ -s "$out/gpt/report/report.md" ]] || { echo "no GPT report"; exit 1; }
echo "cross-dc-study smoke: ok"
