#!/usr/bin/env bash
# trainer compare: two variants of mlp_fmnist (allreduce vs topk) trained side by side write
# report.md with both rows, compare.json and the plots; --runs on the two run directories gives
# the same table; bad --vary flags and unfinished runs stop it with exit 2 before it writes.
# usage: compare.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$(realpath "$1")
src=$2
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "Fashion-MNIST not installed (scripts/install-deps installs it): skipping"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
recipe="$src/recipes/mlp_fmnist.toml"
tiny=(--train.steps=20 --train.eval_every=10 --train.log_every=5 --distributed.world_size=2 "--model.hidden=[32]")

# expect_input_error NAME PATTERN ARGS...: exit 2, one line on stderr matching PATTERN, no $tmp/NAME.
expect_input_error() {
  local name=$1 pattern=$2
  shift 2
  local rc=0
  (cd "$tmp" && "$trainer" compare --out "$tmp/$name" "$@") >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -eq 2 ] || { echo "$name: expected exit 2, got $rc"; cat "$tmp/out" "$tmp/err"; exit 1; }
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "$name: expected one line on stderr:"; cat "$tmp/err"; exit 1; }
  grep -q -- "$pattern" "$tmp/err" || { echo "$name: stderr does not match '$pattern':"; cat "$tmp/err"; exit 1; }
  [ ! -e "$tmp/$name" ] || { echo "$name: wrote $tmp/$name"; exit 1; }
  [ ! -e "$tmp/runs" ] || { echo "$name: wrote $tmp/runs"; exit 1; }
}
expect_input_error no_values "--vary sync.strategy: expected section.key=value1,value2" \
  --recipe "$recipe" --vary sync.strategy
expect_input_error unknown_key "unknown key 'sync.nope'" --recipe "$recipe" --vary sync.nope=1,2
# The second variant is bad: nothing may have been trained for the first.
expect_input_error bad_value "--vary sync.strategy=bogus" --recipe "$recipe" --vary sync.strategy=allreduce,bogus "${tiny[@]}"
expect_input_error both_modes "either --recipe" --recipe "$recipe" --vary sync.strategy=topk --runs "$tmp"
# As if started by mpirun (the variable OpenMPI sets): refused, whatever the build.
OMPI_COMM_WORLD_SIZE=2 expect_input_error under_mpirun "not supported under mpirun" \
  --recipe "$recipe" --vary sync.strategy=topk "${tiny[@]}"

# The real thing.
"$trainer" compare --recipe "$recipe" --vary sync.strategy=allreduce,topk --out "$tmp/cmp" \
  --plot-script "$src/scripts/plot" "${tiny[@]}" | tee "$tmp/log"
grep -q "^\[topk\] step 20/20" "$tmp/log" || { echo "log lines are not prefixed by the variant"; exit 1; }
for v in allreduce topk; do
  for f in recipe.resolved.toml metrics.jsonl summary.json; do
    [ -s "$tmp/cmp/$v/$f" ] || { echo "missing $v/$f"; exit 1; }
  done
done
[ -s "$tmp/cmp/report.md" ] && [ -s "$tmp/cmp/compare.json" ] || { echo "no report.md or compare.json"; exit 1; }
grep -q "^| allreduce |" "$tmp/cmp/report.md" && grep -q "^| topk |" "$tmp/cmp/report.md" ||
  { echo "report.md lacks a row:"; cat "$tmp/cmp/report.md"; exit 1; }
grep -q 'sync.strategy = "topk"' "$tmp/cmp/report.md" || { echo "report.md lacks the difference"; exit 1; }
grep -Eq '^\| topk \| [0-9.]+ ms \| [0-9.]+ ms \| [0-9.]+x \| [0-9]+ \([0-9]+ of [0-9]+ records\) \|$' "$tmp/cmp/report.md" ||
  { echo "report.md lacks the per-rank step time spread:"; cat "$tmp/cmp/report.md"; exit 1; }
python3 - "$tmp/cmp" <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + "/compare.json"))
assert [r["name"] for r in c["runs"]] == ["allreduce", "topk"], c
assert c["clock"] == "wall" and c["series"] == "eval" and c["default_target"], c
base, topk = c["runs"]
assert base["target_reached"] and base["speedup"] == 1.0, base
assert topk["bytes_ratio"] < 0.5 and topk["compression_ratio"] > 10, topk  # top-k sends far less
PY

if python3 -c "import matplotlib" 2>/dev/null || /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  for p in loss_vs_steps loss_vs_bytes loss_vs_time; do
    [ -s "$tmp/cmp/$p.png" ] || { echo "missing $p.png"; exit 1; }
    grep -q "($p.png)" "$tmp/cmp/report.md" || { echo "report.md does not show $p.png"; exit 1; }
  done
else
  echo "matplotlib not installed (apt-get install python3-matplotlib): not checking the plots"
  grep -q "No plots" "$tmp/cmp/report.md" || { echo "report.md does not say why there are no plots"; exit 1; }
fi

# The same table from the finished run directories.
"$trainer" compare --runs "$tmp/cmp/allreduce" "$tmp/cmp/topk" --out "$tmp/again" --no-plots >/dev/null
diff <(grep "^|" "$tmp/cmp/report.md") <(grep "^|" "$tmp/again/report.md") ||
  { echo "--runs gave another table"; exit 1; }
grep -q "No plots: not requested" "$tmp/again/report.md" || { echo "--no-plots not stated"; exit 1; }

# A recipe with a [network]: the replay rewrites metrics.jsonl's simulated clock after training, and
# --recipe reads it back as --runs does, so both give the same non-null time to target and speedup.
"$trainer" compare --recipe "$recipe" --vary sync.strategy=allreduce,topk "${tiny[@]}" --network.groups=2 \
  --target-loss 1.6 --out "$tmp/net" --no-plots >"$tmp/net.log" 2>&1 || { echo "compare [network] failed"; tail -5 "$tmp/net.log"; exit 1; }
"$trainer" compare --runs "$tmp/net/allreduce" "$tmp/net/topk" --target-loss 1.6 --out "$tmp/net_runs" --no-plots >/dev/null
python3 - "$tmp/net/compare.json" "$tmp/net_runs/compare.json" <<'PY'
import json, sys
variants, runs = (json.load(open(p)) for p in sys.argv[1:])
assert variants["clock"] == "simulated", variants["clock"]
for v, r in zip(variants["runs"], runs["runs"]):
    for key in ["time_to_target_s", "steps_to_target", "speedup"]:
        assert v[key] is not None and v[key] == r[key], (v["name"], key, v[key], r[key])
    assert 0 < v["time_to_target_s"] < v["time_s"], v
assert variants["runs"][0]["speedup"] == 1.0
PY
[ $? -eq 0 ] || { echo "compare --recipe with [network]: no time to target, or another than --runs"; exit 1; }

# An unfinished run (no summary.json) is named with the missing file.
mkdir -p "$tmp/half" && cp "$tmp/cmp/topk/metrics.jsonl" "$tmp/half/"
expect_input_error unfinished "half: not a finished run: summary.json is missing" --runs "$tmp/cmp/allreduce" "$tmp/half"
# --networks: the runs' traces replayed on each network; a report per network, the runs x networks
# table. A bad network file is refused before anything trains.
printf '[network]\ngroups = 2\ninter_bandwidth = "1 Gbit/s"\ninter_latency = "30 ms"\n' >"$tmp/wan.toml"
printf '[network]\ngroups = 2\ninter_bandwidth = "10 Mbit/s"\ninter_link = "per_pair"\n' >"$tmp/slow.toml"
printf '[network]\ngroups = 3\n' >"$tmp/three.toml"
expect_input_error networks_bad "three.toml:2:1: network.groups: expected a divisor of distributed.world_size" \
  --recipe "$src/recipes/mlp_fmnist.toml" --vary sync.strategy=allreduce,topk --train.steps=4 --networks "$tmp/three.toml"
[ ! -e "$tmp/nets" ] || { echo "--networks with a bad file wrote $tmp/nets"; exit 1; }
"$trainer" compare --recipe "$src/recipes/mlp_fmnist.toml" --vary sync.strategy=allreduce,topk --train.steps=20 \
  --train.log_every=10 --networks "$tmp/wan.toml,$tmp/slow.toml" --out "$tmp/nets" --no-plots >"$tmp/nets.log" 2>&1 ||
  { echo "compare --networks failed"; tail -5 "$tmp/nets.log"; exit 1; }
python3 - "$tmp/nets" <<'PY'
import json, sys
d = sys.argv[1]
table = open(d + "/networks.md").read()
assert "| run | wan | slow |" in table, table
times = {}
for net in ["wan", "slow"]:
    c = json.load(open(f"{d}/{net}/compare.json"))
    assert c["clock"] == "simulated", c
    times[net] = {r["name"]: r["time_s"] for r in c["runs"]}
for run in ["allreduce", "topk"]:
    assert times["slow"][run] > times["wan"][run], times  # 10 Mbit/s is slower than 1 Gbit/s
assert times["slow"]["topk"] < times["slow"]["allreduce"], times  # top-k sends far less
PY
[ $? -eq 0 ] || { echo "compare --networks: wrong tables"; exit 1; }
# --seeds 2 --budget: every variant with seeds run.seed + 0, 1 (matched across variants), the
# report's mean +- std, the loss at an equal budget of examples, the Pareto sections and plots.
expect_input_error seeds_runs "compare: --seeds needs --recipe and --vary" --runs "$tmp/nets/allreduce" --seeds 2
expect_input_error bad_budget "--budget steps=5: expected examples=E, bytes=B or sim_time=T" \
  --recipe "$recipe" --vary sync.strategy=allreduce,topk "${tiny[@]}" --budget steps=5
(cd "$tmp" && "$trainer" compare --recipe "$recipe" --vary sync.strategy=allreduce,topk "${tiny[@]}" \
  --seeds 2 --budget examples=400 --out "$tmp/seeds") >"$tmp/seeds.log" 2>&1 ||
  { echo "compare --seeds failed"; tail -5 "$tmp/seeds.log"; exit 1; }
python3 - "$tmp/seeds" <<'PY'
import json, os, re, sys
d = sys.argv[1]
seed = {}
for v in ["allreduce", "topk"]:
    for k in [0, 1]:
        text = open(f"{d}/{v}/seed{k}/recipe.resolved.toml").read()
        seed[v, k] = int(re.search(r"^seed = (\d+)$", text, re.M).group(1))
assert seed["allreduce", 0] == seed["topk", 0] and seed["allreduce", 1] == seed["topk", 1], seed
assert seed["allreduce", 1] == seed["allreduce", 0] + 1, seed
c = json.load(open(d + "/compare.json"))
assert [g["name"] for g in c["groups"]] == ["allreduce", "topk"] and c["groups"][0]["runs"] == [0, 1], c["groups"]
report = open(d + "/report.md").read()
for section in ["## Across seeds", "## At equal budget: examples=400", "## Pareto front"]:
    assert section in report, section
# The table's mean +- std is the runs' own: recompute it from their summaries.
losses = [json.load(open(f"{d}/allreduce/seed{k}/summary.json"))["eval_loss"] for k in [0, 1]]
mean = sum(losses) / 2
std = (sum((x - mean) ** 2 for x in losses)) ** 0.5
assert f"| allreduce | 2 | {mean:.4f} ± {std:.4f} |" in report, (losses, report)
assert losses[0] != losses[1], "two seeds gave the same run"
if os.path.exists(d + "/loss_vs_steps.png"):
    assert os.path.exists(d + "/pareto_bytes.png") and os.path.exists(d + "/pareto_time.png")
PY
[ $? -eq 0 ] || { echo "compare --seeds: wrong report"; exit 1; }
echo "compare passed"
