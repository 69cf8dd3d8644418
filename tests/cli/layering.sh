#!/usr/bin/env bash
# The layering check (scripts/check-layering) passes on the tree, fails with FILE:LINE on a planted
# upward include and on a planted include loop (a test of the test), and docs/architecture.md shows
# the same allowed direction as the script.
set -euo pipefail
src=${2:?usage: layering.sh TRAINER SOURCE_DIR}
check=$src/scripts/check-layering
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$check" --root "$src"

# A copy of the source folders to plant into.
for d in core collectives optimizers compression sim workloads framework tools python include scripts; do cp -r "$src/$d" "$tmp/"; done
line=$(( $(wc -l < "$tmp/core/check.h") + 1 ))
echo '#include "framework/train/trainer.h"' >> "$tmp/core/check.h"
if "$tmp/scripts/check-layering" --root "$tmp" > "$tmp/out" 2>&1; then
  echo "an upward include from core/ into framework/train/ passed the check"; exit 1
fi
grep -q "^core/check.h:$line: includes \"framework/train/trainer.h\" (framework/train/) from core/" "$tmp/out" ||
  { echo "the upward include was not named by file and line:"; cat "$tmp/out"; exit 1; }
cp "$src/core/check.h" "$tmp/core/check.h"

# A loop inside one folder: transport.cpp -> communicator.h, while communicator.h -> transport.h.
echo '#include "collectives/communicator.h"' >> "$tmp/collectives/transport.cpp"
if "$tmp/scripts/check-layering" --root "$tmp" > "$tmp/out" 2>&1; then
  echo "an include loop passed the check"; exit 1
fi
grep -q "an include loop: .*collectives/communicator.*collectives/transport" "$tmp/out" ||
  grep -q "an include loop: .*collectives/transport.*collectives/communicator" "$tmp/out" ||
  { echo "the loop was not named:"; cat "$tmp/out"; exit 1; }

# docs/architecture.md shows the same table (each line, spaces aside).
norm() { tr -s ' ' | sed 's/ *$//'; }
"$check" --table | norm > "$tmp/table"
norm < "$src/docs/architecture.md" > "$tmp/doc"
while IFS= read -r row; do
  grep -qxF "$row" "$tmp/doc" || { echo "docs/architecture.md lacks the layering row: $row"; exit 1; }
done < "$tmp/table"
echo "layering: the tree is clean; a planted upward include and a planted loop are caught; docs match"
