#!/usr/bin/env bash
# The outer-loop family across two simulated datacenters, CI-sized (tests/bench/outer_convergence.sh
# prints the table): DiLoCo int8, eager DiLoCo, streaming DiLoCo, SparseLoCo and DeMo within 2% of all-reduce's
# held-out loss; int8 >= 3.9x and SparseLoCo >= 20x fewer inter-datacenter bytes than fp32 DiLoCo;
# streaming DiLoCo's peak inter-datacenter rate >= 1.67x lower.   usage: TRAINER SOURCE_DIR
set -euo pipefail
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
TRAINER="$1" OUT="$out" CHECK=1 bash "$2/tests/bench/outer_convergence.sh"
