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
  # Under a 2 GB address-space limit: an unbounded read or allocation fails the case. Not under
  # AddressSanitizer (its shadow memory alone reserves terabytes of address space; it reports
  # oversized allocations itself): the sanitizer test environment sets ASAN_OPTIONS.
  (cd "$work" && { [ -n "${ASAN_OPTIONS:-}" ] || ulimit -v 2000000; } && timeout 300 "$trainer" "$@" >"$tmp/out" 2>"$tmp/err")
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
expect simulate_world_negative "" "--world: expected 1 to 100000 ranks, got -4" simulate "$sim/a_run" --world -4
expect simulate_groups_alone "" "--groups: expected it with --world N" simulate "$sim/a_run" --groups 4
expect simulate_exact_zero "" "--exact-up-to: expected a number of ranks >= 1, got 0" \
  simulate "$sim/a_run" --world 64 --exact-up-to 0

# Files that are no regular file, or larger than their kind may be
# (docs/reliability.md "Bad input").
big="$tmp/big"
mkdir "$big"
mkfifo "$big/fifo"
{ printf '[model]\nhidden = ['; yes 1, | head -c 75000000 | tr -d '\n'; printf '1]\n'; } >"$big/50mb.toml"
{ printf '[train]\nmicro_batch = ['; yes 1, | head -c 900000 | tr -d '\n'; printf '1]\n'; } >"$big/long_array.toml"
expect recipe_device "" "^trainer: error: /dev/zero: a character device, expected a regular file \(recipe\)$" --recipe /dev/zero
expect recipe_fifo "" "fifo: a FIFO, expected a regular file \(recipe\)$" --recipe "$big/fifo" --out run_out
expect recipe_directory "" "empty_dir: a directory, expected a regular file \(recipe\)$" --recipe empty_dir
expect recipe_50mb "" "50mb\.toml: [0-9]+ bytes, more than the limit of 1000000 \(1\.00 MB\) for a recipe$" \
  --recipe "$big/50mb.toml" --out run_out
# Under the limit, a long array is echoed by its first values and its length.
expect recipe_long_array "" "long_array\.toml:2:[0-9]+: train\.micro_batch: expected .*, got \[1, 1, 1, 1, 1, 1, 1, 1, \.\.\. \(300001 values\)\]$" \
  --recipe "$big/long_array.toml"
expect simulate_network_device "" "/dev/zero: a character device, expected a regular file \(recipe\)$" \
  simulate "$sim/a_run" --network /dev/zero
expect text_data_device "" "/dev/zero: a character device, expected a regular file \(text file\)$" \
  --recipe "$bert" --data.path=/dev/zero --out run_out

# model.init_from: what is no weights file, and weights files that are malformed (these need the
# model's data: Fashion-MNIST).
/usr/bin/python3 - "$big" <<'PY'
import json, struct, sys
d = sys.argv[1]
def write(name, header, data=b""):
    h = header.encode() if isinstance(header, str) else header
    open(f"{d}/{name}", "wb").write(struct.pack("<Q", len(h)) + h + data)
deep = "[" * 10**6 + "]" * 10**6
write("deep_dtype.safetensors", '{"fc1.weight": {"dtype": %s, "shape": [4, 784], "data_offsets": [0, 12544]}}' % deep, bytes(12544))
write("deep_shape.safetensors", '{"fc1.weight": {"dtype": "F32", "shape": %s, "data_offsets": [0, 12544]}}' % deep, bytes(12544))
write("newline.safetensors", json.dumps({"fc1\nweight": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}}), bytes(1))
w = [0.0] * (4 * 784)
w[5] = float("nan")
write("nan.safetensors", json.dumps({"fc1.weight": {"dtype": "F32", "shape": [4, 784], "data_offsets": [0, 12544]}}),
      struct.pack("<3136f", *w))
PY
if [ -d /usr/share/datasets/fashion-mnist ]; then
  expect init_from_device "" "/dev/zero: a character device, expected a regular file \(safetensors file for mlp " \
    --recipe "$good" --model.init_from=/dev/zero --out run_out
  expect init_from_fifo "" "fifo: a FIFO, expected a regular file \(safetensors file for mlp " \
    --recipe "$good" --model.init_from="$big/fifo"
  expect init_from_directory "" "empty_dir: a directory, expected a regular file \(safetensors file for mlp " \
    --recipe "$good" --model.init_from=empty_dir --out run_out
  expect init_from_deep_dtype "" "deep_dtype\.safetensors: corrupt safetensors header: JSON nested deeper than 64 levels$" \
    --recipe "$good" --model.hidden=[4] --model.init_from="$big/deep_dtype.safetensors" --out run_out
  expect init_from_deep_shape "" "deep_shape\.safetensors: corrupt safetensors header: JSON nested deeper than 64 levels$" \
    --recipe "$good" --model.hidden=[4] --model.init_from="$big/deep_shape.safetensors"
  expect init_from_newline_name "" "newline\.safetensors: tensor 'fc1\\\\nweight': dtype \"I8\": expected one of" \
    --recipe "$good" --model.hidden=[4] --model.init_from="$big/newline.safetensors" --out run_out
  expect init_from_nan "" "nan\.safetensors: model\.init_from: tensor 'fc1\.weight': value nan at index 5: expected finite weights$" \
    --recipe "$good" --model.hidden=[4] --model.init_from="$big/nan.safetensors" --out run_out
  # A model no machine holds is refused by its size, before its allocation fails.
  expect model_too_large "" "mlp_fmnist\.toml: model\.name = \"mlp\" \(sized by model\.hidden\): the model's 1590000000010 parameters need 12\.7 TB for weights and gradients, more than this machine's memory" \
    --recipe "$good" --model.hidden=[2000000000] --out run_out
else
  echo "skip model.init_from and model size checks: Debian's dataset-fashion-mnist is not installed"
fi

# idx files that honestly declare 2 million images (6.3 GB as floats): gzip members of zeros,
# concatenated, inflate to exactly the header and the 1.57 GB it declares.
idx="$tmp/idx"
mkdir "$idx"
printf '\x00\x00\x08\x03\x00\x1e\x84\x80\x00\x00\x00\x1c\x00\x00\x00\x1c' | gzip >"$idx/train-images-idx3-ubyte.gz"
head -c 16000000 /dev/zero | gzip -1 >"$idx/zeros.gz"
for i in $(seq 98); do cat "$idx/zeros.gz"; done >>"$idx/train-images-idx3-ubyte.gz"
{ printf '\x00\x00\x08\x01\x00\x1e\x84\x80'; head -c 2000000 /dev/zero; } | gzip >"$idx/train-labels-idx1-ubyte.gz"
rm "$idx/zeros.gz"
# The test split: one valid image and label.
{ printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c'; head -c 784 /dev/zero; } | gzip >"$idx/t10k-images-idx3-ubyte.gz"
printf '\x00\x00\x08\x01\x00\x00\x00\x01\x00' | gzip >"$idx/t10k-labels-idx1-ubyte.gz"
expect idx_2m_images "" "train-images-idx3-ubyte\.gz: the header declares 1568000000 bytes of data, more than the limit of 250000000 \(318877 images of 28x28\)$" \
  --recipe "$good" --data.path="$idx" --out run_out

# Several TCP streams: 1-64, and not on MPI (OpenMPI gained nothing from them; a build without
# MPI refuses the backend itself).
expect streams_zero "" 'distributed\.streams' --recipe "$good" --distributed.streams=0 --train.steps=1
expect streams_on_mpi "" 'distributed\.(streams = 4 on the mpi backend: OpenMPI|backend: expected "threads" or "auto", got "mpi")' \
  --recipe "$good" --distributed.backend=mpi --distributed.streams=4 --train.steps=1

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
