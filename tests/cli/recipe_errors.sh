#!/usr/bin/env bash
# Bad input gets one line naming the file, line, key and what was expected, exit code 2, and
# leaves no run directory behind.   usage: recipe_errors.sh TRAINER SOURCE_DIR
set -u
trainer=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

good="$src/recipes/mlp_fmnist.toml"

# expect NAME PATTERN ARGS...: exit code 2, exactly one line on stderr matching PATTERN, no run dir.
expect() {
  local name=$1 pattern=$2
  shift 2
  (cd "$tmp" && "$trainer" "$@" >"$tmp/out" 2>"$tmp/err")
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -Eq -- "$pattern" "$tmp/err" || [ -e "$tmp/runs" ]; then
    echo "FAIL $name: rc=$rc lines=$lines stderr: $(cat "$tmp/err")"
    fails=$((fails + 1))
  else
    echo "ok   $name: $(cat "$tmp/err")"
  fi
  rm -rf "$tmp/runs"
}

recipe() {  # recipe NAME CONTENT: writes $tmp/NAME.toml
  printf '%s\n' "$2" >"$tmp/$1.toml"
}

recipe unknown_key $'[train]\nsteps = 10\nmicro_bach = 4'
expect unknown_key "unknown_key\.toml:3:1:.*train\.micro_bach.*micro_batch" --recipe "$tmp/unknown_key.toml"

recipe wrong_type $'[train]\nsteps = 10\nmicro_batch = "64"'
expect wrong_type "wrong_type\.toml:3:[0-9]+:.*train\.micro_batch.*integer" --recipe "$tmp/wrong_type.toml"

recipe bad_enum $'[train]\nsteps = 10\n[sync]\nstrategy = "allreduc"'
expect bad_enum "bad_enum\.toml:4:[0-9]+:.*sync\.strategy.*allreduce" --recipe "$tmp/bad_enum.toml"

recipe out_of_range $'[train]\nsteps = 10\n[optimizer]\nmomentum = 1.5'
expect out_of_range "out_of_range\.toml:4:[0-9]+:.*optimizer\.momentum" --recipe "$tmp/out_of_range.toml"

recipe syntax $'[train]\nsteps = = 10'
expect syntax "syntax\.toml:2:[0-9]+:" --recipe "$tmp/syntax.toml"

expect missing_file "nosuch\.toml" --recipe "$tmp/nosuch.toml"
expect bad_override "train\.micro_batch.*integer" --recipe "$good" --train.micro_batch=abc
expect unknown_override "train\.nosuch" --recipe "$good" --train.nosuch=1
expect unknown_flag "--frobnicate" --recipe "$good" --frobnicate
expect missing_data "/nonexistent/fashion.*dataset-fashion-mnist" --recipe "$good" --data.path=/nonexistent/fashion

if [ $fails -ne 0 ]; then echo "$fails failed"; exit 1; fi
echo "all recipe error checks passed"
