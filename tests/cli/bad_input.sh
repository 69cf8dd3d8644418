#!/usr/bin/env bash
# Bad input to the trainer: corpus recipes (tests/recipe/bad), unreadable data, an output directory
# that cannot be made. Each must exit with code 2, print exactly one line on stderr (the exact
# corpus message for corpus files), and leave nothing behind: no --out directory, no runs/, no
# file changed in the working directory.   usage: bad_input.sh TRAINER SOURCE_DIR
set -u
trainer=$(realpath "$1")  # the runs below start in another directory
src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

work="$tmp/work"  # the trainer's working directory: what it holds before a run is all it may hold after
mkdir "$work"
good="$src/recipes/mlp_fmnist.toml"
bert="$src/recipes/lamb_bert.toml"
corpus="$src/tests/recipe/bad"

printf 'not a directory\n' >"$work/afile"
mkdir "$work/empty_dir"
printf 'text\0with a NUL byte\n' >"$work/binary.txt"

# Every path with its type; files also with size and modification time.
snapshot() { (cd "$work" && { find . -type f -printf '%p f %s %T@\n'; find . ! -type f -printf '%p %y\n'; } | sort); }

# expect NAME EXACT_LINE_OR_EMPTY PATTERN ARGS...: exit code 2, exactly one line on stderr (equal
# to EXACT_LINE when given, else matching the extended regex PATTERN), the working directory unchanged.
expect() {
  local name=$1 exact=$2 pattern=$3
  shift 3
  local before after rc lines last why=""
  before=$(snapshot)
  (cd "$work" && timeout 300 "$trainer" "$@" >"$tmp/out" 2>"$tmp/err")
  rc=$?
  after=$(snapshot)
  lines=$(wc -l <"$tmp/err")
  last=$(tail -c 1 "$tmp/err" | od -An -tx1 | tr -d ' \n')
  [ $rc -eq 2 ] || why="$why exit code $rc (expected 2);"
  { [ "$lines" -eq 1 ] && [ "$last" = "0a" ]; } || why="$why $lines lines on stderr (expected exactly one);"
  if [ -n "$exact" ]; then
    [ "$(cat "$tmp/err")" = "$exact" ] || why="$why stderr is not: $exact;"
  elif ! grep -Eq -- "$pattern" "$tmp/err"; then
    why="$why stderr does not match /$pattern/;"
  fi
  if [ "$before" != "$after" ]; then
    why="$why the working directory changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | tr '\n' ' ');"
  fi
  if [ -n "$why" ]; then
    echo "FAIL $name:$why stderr: $(head -c 2000 "$tmp/err")"
    fails=$((fails + 1))
  else
    echo "ok   $name: $(cat "$tmp/err")"
  fi
  # Leave the next case a clean directory even after a failure.
  (cd "$work" && find . -mindepth 1 -maxdepth 1 ! -name afile ! -name empty_dir ! -name binary.txt -exec rm -rf {} +)
}

# Corpus recipes, each with and without --out: the message is exactly the one its first line names.
n=0
for name in syntax_double_equals syntax_duplicate_table type_micro_batch_string type_section_scalar \
            range_lr_negative range_world_size_zero range_topk_ratio_above_one unknown_strategy \
            unknown_section_typo unknown_key_typo cross_empty_recipe cross_heads_not_dividing_dim \
            cross_groups_not_dividing_world cross_momentum_with_diloco phases_unknown_strategy \
            units_duration_parsecs units_bandwidth_no_per_second; do
  f="$corpus/$name.toml"
  if [ ! -f "$f" ]; then
    echo "FAIL corpus/$name: $f is missing"
    fails=$((fails + 1))
    continue
  fi
  msg="trainer: error: $f:$(head -n 1 "$f" | sed 's/^# expect: //')"
  if [ $((n % 2)) -eq 0 ]; then
    expect "corpus/$name --out" "$msg" "" --recipe "$f" --out run_out
  else
    expect "corpus/$name" "$msg" "" --recipe "$f"
  fi
  n=$((n + 1))
done

# A good recipe made bad by an override: the message names the override.
expect bad_override "" "^trainer: error: --optimizer\.lr=-1: expected a number > 0, got -1$" \
  --recipe "$good" --optimizer.lr=-1 --out run_out

# More streaming DiLoCo fragments than the model has tensors (known once the model is built).
expect too_many_fragments "" "sync\.streaming_diloco\.fragments: expected at most 6 \(the model's tensors: a fragment is a run of whole tensors\), got 7$" \
  --recipe "$good" --sync.strategy=streaming_diloco --sync.streaming_diloco.fragments=7 --out run_out

# Data that cannot be read: missing, a file where a folder is expected, a folder with no text,
# a binary file as text.
expect data_missing "" "/nonexistent/fashion: no such directory" \
  --recipe "$good" --data.path=/nonexistent/fashion --out run_out
expect data_is_a_file "" "afile: no such directory" \
  --recipe "$good" --data.path=afile --out run_out
expect text_data_missing "" "/nonexistent/corpus\.txt: no such file or directory" \
  --recipe "$bert" --data.path=/nonexistent/corpus.txt --out run_out
expect text_data_empty_dir "" "empty_dir: no text documents" \
  --recipe "$bert" --data.path=empty_dir --out run_out
expect text_data_binary "" "binary\.txt: not a text file" \
  --recipe "$bert" --data.path=binary.txt --out run_out

# An output directory that cannot be made (we run as root, so a read-only folder would not stop
# us: the run directory goes under a regular file instead). These train, so they need the data.
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
   [ -d /usr/share/datasets/fashion-mnist ]; then
  expect out_under_a_file "" "afile/run: cannot create run directory: Not a directory" \
    --recipe "$good" --train.steps=1 --out afile/run
  expect out_is_a_file "" "afile: cannot create run directory" \
    --recipe "$good" --train.steps=1 --out afile
  expect out_dir_under_a_file "" "afile/runs/mlp_fmnist: cannot create run directory: Not a directory" \
    --recipe "$good" --train.steps=1 --run.out_dir=afile/runs
else
  echo "skip output-directory checks: Debian's dataset-fashion-mnist is not installed"
fi

# trainer simulate: a directory that is no run, a bad network file, a projection that is no count.
# (Outside the working directory, which each case leaves clean.)
sim="$tmp/sim"
mkdir -p "$sim/a_run" && cp "$good" "$sim/a_run/recipe.resolved.toml"  # a run directory without a trace
printf '[network]\ngroups = 2\ninter_bandwith = "1 Gbit/s"\n' >"$sim/typo_net.toml"
printf '[train]\nsteps = 3\n' >"$sim/not_net.toml"
expect simulate_not_a_run "" "empty_dir: not a run directory" simulate empty_dir
expect simulate_typo_key "" "typo_net\.toml:3:1: unknown key 'network\.inter_bandwith'" \
  simulate "$sim/a_run" --network "$sim/typo_net.toml"
expect simulate_other_section "" "not_net\.toml:1:2: a network file holds only a \[network\] table" \
  simulate "$sim/a_run" --network "$sim/not_net.toml"
expect simulate_no_network "" "the run describes no \[network\] to replay on" simulate "$sim/a_run"
expect simulate_as_params "" "--as-params: expected a whole number of parameters >= 1, got 0.5" simulate empty_dir --as-params 0.5
expect simulate_failures "" "--failures: expected mtbf=DURATION,restart=DURATION, got 'restart=1m'" \
  simulate empty_dir --failures restart=1m

# device = "cuda" where it cannot run: a build without CUDA, or no visible device (this machine,
# unless a GPU is present: then the run would be legitimate and the case is skipped).
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect device_cuda_unavailable "" 'mlp_fmnist\.toml: distributed\.device = "cuda" but (this build has no CUDA|no CUDA device is visible)' \
    --recipe "$good" --distributed.device=cuda --train.steps=1
  expect device_cuda_unavailable_out "" 'distributed\.device = "cuda" but' \
    --recipe "$good" --distributed.device=cuda --train.steps=1 --out run_out
else
  echo "skip device = cuda refusals: a GPU is present"
fi

if [ $fails -ne 0 ]; then echo "$fails failed"; exit 1; fi
echo "all bad-input checks passed"
