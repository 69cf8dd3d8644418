#!/usr/bin/env bash
# 8 workers on Fashion-MNIST for the recipes' 5 epochs, same seeds and data: PowerSGD (rank 4),
# top-k 1% and 1-bit, each with error feedback, end within 1 point of all-reduce's test accuracy
# while sending at least 30x, 10x and 25x fewer bytes per rank than ring all-reduce (the issue's
# bar; tests/bench/compression_convergence.sh prints the table).   usage: TRAINER SOURCE_DIR
set -euo pipefail
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
TRAINER="$1" OUT="$out" CHECK=1 bash "$2/tests/bench/compression_convergence.sh"
