#!/usr/bin/env bash
# The torch GPT of train.py on Debian's fortunes, across two simulated datacenters, three ways:
# tokenize, train with allreduce, diloco (int8 pseudo-gradients) and streaming_diloco over 4
# processes, then one `trainer compare` report. About 10 minutes on 2 cores.
#
#   examples/torch_gpt/run.sh [OUT] [train.py arguments...]     (OUT: runs/torch_gpt)
#
# Environment: TRAINER (build/trainer), STEPS (the recipe's train.steps), TINY=1 (a model and run
# of seconds: the CI smoke test), LAUNCH = mpi | gloo | single (mpi when mpirun is on PATH, else
# gloo: 4 processes with LACONIC_RANK / LACONIC_WORLD_SIZE / LACONIC_STORE; single: 1 process,
# one group), PYTHON (/usr/bin/python3), FORTUNES (/usr/share/games/fortunes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-runs/torch_gpt}
shift || true
trainer=${TRAINER:-build/trainer}
python=${PYTHON:-/usr/bin/python3}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
launch=${LAUNCH:-$(command -v mpirun > /dev/null && echo mpi || echo gloo)}
vocab=2048
[ -x "$trainer" ] || { echo "run.sh: $trainer: no trainer there (build it, or set TRAINER)" >&2; exit 2; }
[ -d "$fortunes" ] || { echo "run.sh: $fortunes: no text there (apt-get install fortunes; FORTUNES=DIR)" >&2; exit 2; }
# The package built beside the trainer comes first on the path.
package=$(dirname "$trainer")/python
if [ -d "$package/laconic" ]; then export PYTHONPATH="$package${PYTHONPATH:+:$PYTHONPATH}"; fi

args=(--vocab "$vocab")
if [ -n "${STEPS:-}" ]; then args+=(--set "train.steps=$STEPS"); fi
if [ "${TINY:-0}" = 1 ]; then
  args+=(--dim 32 --layers 1 --heads 2 --seq-len 32 --eval-sequences 16 --warmup 2
         --set "train.steps=${STEPS:-12}" --set train.micro_batch=4 --set train.eval_every=6 --set train.log_every=3
         --set sync.diloco.period=4 --set sync.streaming_diloco.period=4)
fi
case $launch in
  mpi|gloo) np=4 ;;
  single) np=1; args+=(--set distributed.world_size=1 --set network.groups=1) ;;
  *) echo "run.sh: LAUNCH=$launch: expected mpi, gloo or single" >&2; exit 2 ;;
esac
args+=("$@")

mkdir -p "$out"
"$trainer" tokenize --input "$fortunes" --extensions "" --vocab-size $vocab --out "$out/data" > "$out/tokenize.log"
tail -2 "$out/tokenize.log"

# One run of the recipe with the strategy given; its run directory is fresh.
train() {
  local name=$1 run=$out/$1
  shift
  rm -rf "$run" "$run.store"
  echo "== $name ($launch, $np processes)"
  local cmd=("$python" "$here/train.py" --data "$out/data" --recipe "$here/gpt.toml" --out "$run" "${args[@]}"
             "$@")
  case $launch in
    mpi) mpirun --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none -np $np "${cmd[@]}" ;;
    single) "${cmd[@]}" ;;
    gloo)
      local pids=() r
      for ((r = 0; r < np; r++)); do
        LACONIC_RANK=$r LACONIC_WORLD_SIZE=$np LACONIC_STORE=file:$run.store "${cmd[@]}" &
        pids+=($!)
      done
      for r in "${pids[@]}"; do wait "$r"; done
      rm -rf "$run.store" ;;
  esac
}
train allreduce
train diloco --set sync.strategy=diloco --set sync.intra=allreduce
train streaming_diloco --set sync.strategy=streaming_diloco --set sync.intra=allreduce

"$trainer" compare --runs "$out/allreduce" "$out/diloco" "$out/streaming_diloco" --out "$out/report" \
  > "$out/compare.log"
sed -n '/^## Results/,/^- \*sent/p' "$out/report/report.md" | grep '^|'
echo "report: $out/report/report.md"
