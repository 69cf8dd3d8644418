#!/usr/bin/env bash
# The outer-loop family across two simulated datacenters at the bench's SIZE=ci
# (tests/bench/outer_convergence.sh prints the table; its default size is the one the docs quote):
# the same 8 workers, 300 steps and strategies on the MLP cut to hidden layers of 176, 256 and 352
# (half the FLOPs, two fragments of whole layers still near halves, the device slowed to match).
# DiLoCo int8, streaming DiLoCo, SparseLoCo, DeMo, NoLoCo and SPARTA within 2% of all-reduce's
# held-out loss, eager DiLoCo within 8%, DES-LOC within 12% of AdamW all-reduce's, asynchronous
# DiLoCo within 4% (and with DyLU 1.5x faster than flat DiLoCo waiting for a replica 2x slower);
# int8 >= 3.9x and SparseLoCo >= 20x fewer inter-datacenter bytes than fp32 DiLoCo, eager the same
# bytes; streaming DiLoCo's peak inter-datacenter rate >= 1.67x lower. Fewer steps (100, 150) or a
# smaller batch miss several of these bars; at this size they hold with the full size's margins
# (e.g. DES-LOC +7.5%, asynchronous DiLoCo with DyLU +2.9%, streaming 1.83x).   usage: TRAINER SOURCE_DIR
set -euo pipefail
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
TRAINER="$1" OUT="$out" CHECK=1 SIZE=ci bash "$2/tests/bench/outer_convergence.sh"
