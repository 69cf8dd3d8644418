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
# PowerSGD (start_iter = 100) is dense for all 20 steps: warned. The verdict names the variants
# the table's numbers single out.
"$trainer" compare --recipe "$recipe" --vary sync.strategy=allreduce,topk,powersgd "${tiny[@]}" --network.groups=2 \
  --target-loss 1.6 --out "$tmp/net" --no-plots >"$tmp/net.log" 2>&1 || { echo "compare [network] failed"; tail -5 "$tmp/net.log"; exit 1; }
"$trainer" compare --runs "$tmp/net/allreduce" "$tmp/net/topk" "$tmp/net/powersgd" --target-loss 1.6 --out "$tmp/net_runs" \
  --no-plots >/dev/null
grep -q "^compare: warning: powersgd was dense for 20 of its 20 steps (100%, sync.powersgd.start_iter = 100)" "$tmp/net.log" ||
  { echo "no warning about PowerSGD's dense warm-up on the log"; cat "$tmp/net.log"; exit 1; }
python3 - "$tmp/net/compare.json" "$tmp/net_runs/compare.json" "$tmp/net/report.md" <<'PY'
import json, sys
variants, runs = (json.load(open(p)) for p in sys.argv[1:3])
report = open(sys.argv[3]).read()
assert variants["clock"] == "simulated", variants["clock"]
for v, r in zip(variants["runs"], runs["runs"]):
    for key in ["time_to_target_s", "steps_to_target", "speedup"]:
        assert v[key] is not None and v[key] == r[key], (v["name"], key, v[key], r[key])
    assert 0 < v["time_to_target_s"] < v["time_s"], v
assert variants["runs"][0]["speedup"] == 1.0
assert variants["verdict"] == runs["verdict"], (variants["verdict"], runs["verdict"])
verdict, rows = variants["verdict"], variants["runs"]
reached = [r for r in rows if r["target_reached"]]
assert verdict["first_to_target"] == min(reached, key=lambda r: r["time_to_target_s"])["name"], verdict
assert verdict["bytes_tier"] == "inter" and verdict["least_bytes"] == "topk", verdict
topk = next(r for r in rows if r["name"] == "topk")
lowest = min(r["eval_loss"] for r in rows)
assert abs(verdict["least_bytes_loss_cost"] - (topk["eval_loss"] - lowest)) < 1e-12, verdict
assert "\n" + verdict["text"] + "\n" in report and verdict["text"].startswith("**Verdict**: "), verdict
assert len(variants["warnings"]) == 1 and variants["warnings"][0].startswith("powersgd was dense"), variants["warnings"]
assert "**Warning**: powersgd was dense for 20 of its 20 steps" in report
# The curves for the plots: on the simulated clock, with the inter-tier bytes of each record.
for r in rows:
    assert all(rec["time_s"] is not None and rec["bytes_inter"] is not None for rec in r["records"]), r["name"]
PY
[ $? -eq 0 ] || { echo "compare --recipe with [network]: no time to target, or another than --runs, or a wrong verdict"; exit 1; }
# The plots' axes: loss_vs_bytes on the inter-tier bytes when every run has them, else bytes sent;
# loss_vs_time logarithmic when the runs' total times differ by more than 10x.
python3 "$src/scripts/plot" --axes "$tmp/net" >"$tmp/axes.json"
python3 - "$tmp/axes.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert a["loss_vs_bytes.png"]["x"] == "bytes_inter" and "inter (slow) tier" in a["loss_vs_bytes.png"]["label"], a
assert a["loss_vs_time.png"]["x"] == "time_s" and a["loss_vs_time.png"]["label"].startswith("simulated"), a
PY
mkdir -p "$tmp/axes_fast" "$tmp/axes_close"
python3 - "$tmp" <<'PY'
import json, sys
def run(name, times, inter):
    return {"name": name, "dir": "/nonexistent", "records": [
        {"step": 10 * (k + 1), "loss": 2.0 - k / 4, "eval_loss": None, "bytes_sent": 100 * (k + 1),
         "bytes_inter": 10 * (k + 1) if inter else None, "time_s": t} for k, t in enumerate(times)]}
json.dump({"clock": "simulated", "target": 1.5, "runs": [run("a", [1, 2, 3], True), run("b", [10, 20, 31], True)]},
          open(sys.argv[1] + "/axes_fast/compare.json", "w"))  # 31 / 3 > 10
json.dump({"clock": "wall", "target": 1.5, "runs": [run("a", [1, 2, 3], True), run("b", [10, 20, 30], False)]},
          open(sys.argv[1] + "/axes_close/compare.json", "w"))  # 30 / 3 = 10: not more
PY
python3 "$src/scripts/plot" --axes "$tmp/axes_fast" >"$tmp/axes_fast.json"
python3 "$src/scripts/plot" --axes "$tmp/axes_close" >"$tmp/axes_close.json"
python3 - "$tmp/axes_fast.json" "$tmp/axes_close.json" <<'PY'
import json, sys
fast, close = (json.load(open(p)) for p in sys.argv[1:])
assert fast["loss_vs_time.png"]["log_x"] is True and fast["loss_vs_bytes.png"]["x"] == "bytes_inter", fast
assert close["loss_vs_time.png"]["log_x"] is False and close["loss_vs_bytes.png"]["x"] == "bytes_sent", close
assert close["loss_vs_time.png"]["label"].startswith("wall time"), close
PY
[ $? -eq 0 ] || { echo "scripts/plot chose the wrong axes"; exit 1; }
# --as-params N: the runs' traces replayed with bytes and compute x N / their parameters, as
# `trainer simulate --as-params` replays them; losses as measured. Refused without a [network].
params=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['parameters'])" "$tmp/net/topk/trace/meta.json")
n=$((100 * params))
"$trainer" compare --runs "$tmp/net/allreduce" "$tmp/net/topk" --as-params "$n" --out "$tmp/proj" --no-plots >/dev/null
"$trainer" simulate "$tmp/net/topk" --as-params "$n" --out "$tmp/sim_topk" >/dev/null
python3 - "$tmp/net_runs/compare.json" "$tmp/proj/compare.json" "$tmp/sim_topk/summary.json" "$tmp/proj/report.md" "$n" <<'PY'
import json, sys
own, proj, sim = (json.load(open(p)) for p in sys.argv[1:4])
report, n = open(sys.argv[4]).read(), int(sys.argv[5])
assert proj["as_params"] == n and proj["clock"] == "simulated", proj["as_params"]
for o, p in zip(own["runs"], proj["runs"]):
    assert p["projection"] == 100.0, p["projection"]
    assert p["bytes_sent"] == 100 * o["bytes_sent"] and p["eval_loss"] == o["eval_loss"], (o, p)
    assert o["time_s"] < p["time_s"] < 100 * o["time_s"], (o["time_s"], p["time_s"])  # latency is not scaled
topk = proj["runs"][1]
assert topk["time_s"] == sim["sim_time_s"] and topk["bytes_inter"] == sim["bytes_inter"], (topk, sim)
assert "- **Projection**: onto N = " in report, report
PY
[ $? -eq 0 ] || { echo "compare --as-params: not the projection simulate makes"; exit 1; }
expect_input_error as_params_no_network "compare: --as-params projects the simulated clock, and variant allreduce has no \[network\]" \
  --recipe "$recipe" --vary sync.strategy=allreduce,topk "${tiny[@]}" --as-params 7e9
expect_input_error as_params_bad "compare: --as-params: expected a whole number of parameters >= 1, got 0.5" \
  --runs "$tmp/net/topk" --as-params 0.5

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
# Against the baseline, seed by seed: the mean of the paired differences, and with 2 seeds no ordering.
other = [json.load(open(f"{d}/topk/seed{k}/summary.json"))["eval_loss"] for k in [0, 1]]
diff = sum(o - l for o, l in zip(other, losses)) / 2
assert f"| topk | 2 | {diff:+.4f} |" in report, (diff, report)
assert "no difference measured" in report or "too few seeds (2) to claim an ordering" in report, report
if os.path.exists(d + "/loss_vs_steps.png"):
    assert os.path.exists(d + "/pareto_bytes.png") and os.path.exists(d + "/pareto_time.png")
PY
[ $? -eq 0 ] || { echo "compare --seeds: wrong report"; exit 1; }

# --tune: every configuration of each variant's grid on the validation half, the best on the test
# half; run again, every finished run is reused; a run of another recipe in the way is refused.
tune=(--recipe "$recipe" --vary sync.strategy=allreduce,diloco --tune optimizer.lr=0.05,0.1
      --tune diloco:sync.diloco.outer_lr=0.5,0.9 --sync.diloco.period=5 "${tiny[@]}" --out "$tmp/tune" --no-plots)
(cd "$tmp" && "$trainer" compare "${tune[@]}") >"$tmp/tune.log" 2>&1 || { echo "compare --tune failed"; tail -5 "$tmp/tune.log"; exit 1; }
/usr/bin/python3 - "$tmp/tune" <<'PY'
import json, sys, tomllib
d = sys.argv[1]
def recipe(path):
    r = tomllib.load(open(f"{d}/{path}/recipe.resolved.toml", "rb"))
    return {"seed": r["run"]["seed"], "eval_split": r["data"]["eval_split"], "lr": r["optimizer"]["lr"],
            "outer_lr": r["sync"]["diloco"]["outer_lr"]}
grid = {"allreduce": ["lr=0.05", "lr=0.1"],
        "diloco": ["lr=0.05,outer_lr=0.5", "lr=0.05,outer_lr=0.9", "lr=0.1,outer_lr=0.5", "lr=0.1,outer_lr=0.9"]}
for v, configs in grid.items():
    # The choice, recomputed from the tuning runs' own summaries: the lowest validation loss.
    loss = {c: json.load(open(f"{d}/tune/{v}/{c}/seed0/summary.json"))["eval_loss"] for c in configs}
    best = min(configs, key=lambda c: loss[c])
    tuned, final = recipe(f"tune/{v}/{best}/seed0"), recipe(v)
    assert tuned["eval_split"] == "validation" and final["eval_split"] == "test", (tuned, final)
    assert int(tuned["seed"]) == int(final["seed"]) + 1000, (tuned, final)
    assert (tuned["lr"], tuned["outer_lr"]) == (final["lr"], final["outer_lr"]), (v, best, tuned, final)
    chosen = [c for c in json.load(open(d + "/tuning.json"))["variants"] if c["name"] == v][0]
    assert chosen["configs"][chosen["chosen"]]["name"] == best, (chosen, best)
report = open(d + "/report.md").read()
assert "## Tuning" in report and "**chosen**" in report and "Tuning cost: 6 runs" in report, report
PY
[ $? -eq 0 ] || { echo "compare --tune: wrong choice or report"; exit 1; }
(cd "$tmp" && "$trainer" compare "${tune[@]}") >"$tmp/tune2.log" 2>&1 || { echo "compare --tune again failed"; tail -5 "$tmp/tune2.log"; exit 1; }
[ "$(grep -c 'reused (finished)' "$tmp/tune2.log")" -eq 8 ] || { echo "compare --tune did not reuse its 8 runs"; cat "$tmp/tune2.log"; exit 1; }
sed -i 's/^lr = .*/lr = 0.3/' "$tmp/tune/tune/allreduce/lr=0.05/seed0/recipe.resolved.toml"
rc=0
(cd "$tmp" && "$trainer" compare "${tune[@]}") >"$tmp/tune3.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "holds a finished run of another recipe" "$tmp/tune3.log" ||
  { echo "compare --tune: a run of another recipe was not refused (rc $rc)"; cat "$tmp/tune3.log"; exit 1; }
# A configuration that diverges is a result of the tuning (never chosen), not the sweep's end.
(cd "$tmp" && "$trainer" compare --recipe "$recipe" --vary sync.strategy=allreduce --tune optimizer.lr=0.05,1e6 \
  "${tiny[@]}" --out "$tmp/tunefail" --no-plots) >"$tmp/tunefail.log" 2>&1 ||
  { echo "compare --tune stopped at a diverging configuration"; tail -5 "$tmp/tunefail.log"; exit 1; }
grep -q "^| lr=1e6 | failed: .*non-finite gradient" "$tmp/tunefail/report.md" &&
  grep -q "^| lr=0.05 | [0-9.]* | \*\*chosen\*\* |" "$tmp/tunefail/report.md" ||
  { echo "compare --tune: the diverged configuration is not reported as failed"; cat "$tmp/tunefail/report.md"; exit 1; }
# --warm-start: a data-parallel run first, every variant from its exported weights.
(cd "$tmp" && "$trainer" compare --recipe "$recipe" --vary sync.strategy=allreduce,diloco --warm-start 10 \
  --sync.diloco.period=5 "${tiny[@]}" --out "$tmp/warm" --no-plots) >"$tmp/warm.log" 2>&1 ||
  { echo "compare --warm-start failed"; tail -5 "$tmp/warm.log"; exit 1; }
/usr/bin/python3 - "$tmp/warm" <<'PY'
import json, os, sys, tomllib
d = sys.argv[1]
w = tomllib.load(open(d + "/warm_start/recipe.resolved.toml", "rb"))
assert w["sync"]["strategy"] == "allreduce" and json.load(open(d + "/warm_start/summary.json"))["steps"] == 10, w["sync"]
for v in ["allreduce", "diloco"]:
    r = tomllib.load(open(f"{d}/{v}/recipe.resolved.toml", "rb"))
    assert os.path.samefile(r["model"]["init_from"], d + "/warm_start/model.safetensors"), r["model"]
report = open(d + "/report.md").read()
assert "- **Start**: every variant from the same weights" in report and "- **Budget**: matched by examples" in report, report
PY
[ $? -eq 0 ] || { echo "compare --warm-start: wrong runs or report"; exit 1; }
expect_input_error tune_bad_key "--tune nope.key=1: unknown section" --recipe "$recipe" --vary sync.strategy=allreduce,diloco \
  --tune nope.key=1,2 "${tiny[@]}"
expect_input_error tune_unknown "no variant is named topk" --recipe "$recipe" --vary sync.strategy=allreduce,diloco \
  --tune topk:optimizer.lr=1,2 "${tiny[@]}"
echo "compare passed"
