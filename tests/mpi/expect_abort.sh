#!/usr/bin/env bash
# Usage: expect_abort.sh MAX_SECONDS PATTERN COMMAND...
# Passes when COMMAND exits non-zero within MAX_SECONDS and its output contains PATTERN (an
# empty PATTERN matches anything): a job with a silent or dead rank must end, not hang.
max=$1 pattern=$2
shift 2
start=$(date +%s)
out=$("$@" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
printf '%s\n' "$out"
if [ "$rc" -eq 0 ]; then echo "FAIL: exit status 0, expected non-zero"; exit 1; fi
if [ "$elapsed" -gt "$max" ]; then echo "FAIL: took ${elapsed}s, limit ${max}s"; exit 1; fi
if [ -n "$pattern" ] && ! grep -q -- "$pattern" <<<"$out"; then echo "FAIL: no '$pattern' in the output"; exit 1; fi
echo "PASS: exit status $rc after ${elapsed}s"
