#!/usr/bin/env bash
# What `--resume auto` does with a run's checkpoints, none of which may ever cost a result:
#  - every run with a directory checkpoints its last step (checkpoint.every = 0 too), so it exports;
#  - a finished run resumed says so in one line, exits 0 and leaves every file byte for byte;
#  - raising train.steps continues it from its last checkpoint; another recipe is refused naming
#    the keys that differ, before anything is written (recipe.resolved.toml included), as are
#    another world size and fewer steps than the checkpoint holds;
#  - a damaged newest checkpoint (same size: flipped bytes, swapped shards) falls back to the newest
#    intact one with a line naming the damage; none intact is exit 2 with nothing written;
#  - a checkpoint directory that cannot be written (checkpoint.dir = "/proc/self") is refused
#    before the run directory exists.
# usage: resume.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
args=(--recipe "$src/recipes/mlp_fmnist.toml" --model.hidden=[16] --train.epochs=0 --train.log_every=5
      --train.eval_every=0 --distributed.world_size=2 --schedule.warmup_steps=0)
fail() { echo "FAIL: $*"; exit 1; }

# Every file under DIR with its size, modification time and checksum.
snapshot() { (cd "$1" && find . -type f -printf '%p %s %T@\n' | sort && find . -type f -exec md5sum {} + | sort); }

# expect_refused NAME PATTERN DIR ARGS...: exit 2, one line on stderr matching PATTERN, DIR unchanged.
expect_refused() {
  local name=$1 pattern=$2 dir=$3 before rc
  shift 3
  before=$(snapshot "$dir")
  set +e
  "$trainer" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { cat "$tmp/out" "$tmp/err"; fail "$name: exit $rc, expected 2"; }
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "$name: expected one line on stderr"; }
  grep -Eq "$pattern" "$tmp/err" || { cat "$tmp/err"; fail "$name: stderr does not match /$pattern/"; }
  [ "$before" = "$(snapshot "$dir")" ] || fail "$name: $dir changed"
  echo "ok: $name: $(cat "$tmp/err")"
}

# 1. A run without checkpoint.every keeps its last step, and exports from it.
"$trainer" "${args[@]}" --train.steps=20 --out "$tmp/run" >"$tmp/run.log"
[ -f "$tmp/run/checkpoints/step-000000020/MANIFEST.json" ] || fail "no checkpoint of the last step"
"$trainer" export "$tmp/run" --out "$tmp/model.safetensors" >"$tmp/export.log"
[ -s "$tmp/model.safetensors" ] || fail "trainer export wrote nothing"
echo "ok: the last step is checkpointed and exports"

# 2. A finished run resumed: one line, exit 0, not one byte changed.
before=$(snapshot "$tmp/run")
"$trainer" "${args[@]}" --train.steps=20 --out "$tmp/run" --resume auto >"$tmp/again.log" 2>"$tmp/again.err"
grep -q "finished its 20 steps already" "$tmp/again.log" || { cat "$tmp/again.log" "$tmp/again.err"; fail "no 'finished' line"; }
[ ! -s "$tmp/again.err" ] || { cat "$tmp/again.err"; fail "stderr not empty"; }
[ "$before" = "$(snapshot "$tmp/run")" ] || fail "resuming a finished run changed its files"
echo "ok: $(grep finished "$tmp/again.log")"

# 3. Refused before anything is written: another recipe (the keys named), another world size.
expect_refused "another recipe" "optimizer\.lr = 0\.05 in the checkpoint, 0\.07 here" "$tmp/run" \
  "${args[@]}" --train.steps=20 --out "$tmp/run" --resume auto --optimizer.lr=0.07
expect_refused "another world size" "checkpoint of 2 ranks" "$tmp/run" \
  "${args[@]}" --train.steps=20 --out "$tmp/run" --resume auto --distributed.world_size=3
expect_refused "fewer steps" "past this run's 10 steps" "$tmp/run" \
  "${args[@]}" --train.steps=10 --out "$tmp/run" --resume auto

# 4. More steps continue the finished run from its last checkpoint.
"$trainer" "${args[@]}" --train.steps=30 --out "$tmp/run" --resume auto >"$tmp/more.log"
grep -q "continuing .* with train.steps = 20 in the checkpoint, 30 here" "$tmp/more.log" || { cat "$tmp/more.log"; fail "no 'continuing' line"; }
grep -q "resumed from .*step-000000020" "$tmp/more.log" || { cat "$tmp/more.log"; fail "not resumed from step 20"; }
$py - "$tmp/run" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
assert s["steps"] == 30, s
steps = [json.loads(l)["step"] for l in open(f"{sys.argv[1]}/metrics.jsonl")]
assert steps == [5, 10, 15, 20, 25, 30], steps
PY
[ -f "$tmp/run/checkpoints/step-000000030/MANIFEST.json" ] || fail "no checkpoint of the new last step"
echo "ok: --train.steps=30 continued the finished run to step 30"

# 5. Damaged checkpoints (sizes unchanged): the newest intact one is used, the damage named.
"$trainer" "${args[@]}" --train.steps=30 --checkpoint.every=10 --checkpoint.keep_latest=3 --out "$tmp/dmg" >/dev/null
flip() { $py - "$1" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x40
open(p, "wb").write(b)
PY
}
ck="$tmp/dmg/checkpoints"
flip "$ck/step-000000030/rank-1.bin"
mv "$ck/step-000000020/rank-0.bin" "$tmp/swap"; mv "$ck/step-000000020/rank-1.bin" "$ck/step-000000020/rank-0.bin"
mv "$tmp/swap" "$ck/step-000000020/rank-1.bin"
cp -a "$tmp/dmg" "$tmp/dmg_all"
"$trainer" "${args[@]}" --train.steps=40 --out "$tmp/dmg" --resume auto >"$tmp/dmg.log"
grep -q "skipped .*step-000000030/rank-1.bin" "$tmp/dmg.log" || { cat "$tmp/dmg.log"; fail "the damaged step 30 is not named"; }
grep -q "skipped .*step-000000020/rank-0.bin" "$tmp/dmg.log" || { cat "$tmp/dmg.log"; fail "the swapped step 20 is not named"; }
grep -q "resumed from .*step-000000010" "$tmp/dmg.log" || { cat "$tmp/dmg.log"; fail "not resumed from the intact step 10"; }
echo "ok: fell back to step 10 past a flipped byte (step 30) and swapped shards (step 20)"

flip "$tmp/dmg_all/checkpoints/step-000000010/rank-0.bin"
expect_refused "every checkpoint damaged" "no intact checkpoint: all 3 are damaged" "$tmp/dmg_all" \
  "${args[@]}" --train.steps=40 --out "$tmp/dmg_all" --resume auto

# 6. An unwritable checkpoint directory is found before the run directory is made.
set +e
"$trainer" "${args[@]}" --train.steps=5 --out "$tmp/proc" --checkpoint.dir=/proc/self >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "checkpoint.dir" "$tmp/err" || { cat "$tmp/out" "$tmp/err"; fail "checkpoint.dir=/proc/self: exit $rc"; }
[ ! -e "$tmp/proc" ] || fail "checkpoint.dir=/proc/self: the run directory was written"
echo "ok: $(cat "$tmp/err")"
