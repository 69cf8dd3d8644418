#!/usr/bin/env bash
# tests/bench/projection.sh with its checks on: one 8-rank run projected to 8, 64 and 1024 ranks
# reproduces `trainer plan`'s ring all-reduce of 7e9 bf16 gradients within 5% (the seeds' table),
# and the same run replays as 64, 1024 and 10,000 ranks within 300 s and 4 GB each.
# usage: projection.sh TRAINER SOURCE_DIR
set -euo pipefail
build="$(cd "$(dirname "$1")" && pwd)"
WORLDS="64 1024 10000" EXACT=0 CHECK=1 bash "$2/tests/bench/projection.sh" "$build" "$2"
