#!/bin/sh
# run-fuzz.sh BIN CORPUS WORKDIR SECONDS - runs the libFuzzer target BIN
# (tests/fuzz/fuzz_api.c or fuzz_model.c) for SECONDS (0: until stopped)
# over its committed corpus CORPUS, which it only reads: new inputs go to
# WORKDIR/corpus, a failing input to WORKDIR/artifacts/, the output to
# WORKDIR/fuzz.log. Exits 1 on any failure, with the end of the log.
# Rerun one input: BIN WORKDIR/artifacts/crash-... (docs/testing.md).
set -u
bin=$1
seeds=$2
work=$3
seconds=$4
name=$(basename "$bin")
mkdir -p "$work/corpus" "$work/artifacts"
log=$work/fuzz.log
limit=""
[ "$seconds" -gt 0 ] && limit="-max_total_time=$seconds"
echo "== $name (${seconds}s from $seeds; log: $log)"
# shellcheck disable=SC2086 # $limit is empty or one word
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  "$bin" $limit -timeout=25 -rss_limit_mb=2560 -max_len=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$log" 2>&1
code=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
time=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
if [ "$code" != 0 ]; then
  tail -n 60 "$log"
  echo "$name: FAIL (exit status $code) after ${runs:-?} runs; the input: $(ls -t "$work/artifacts" | head -n 1)"
  exit 1
fi
echo "$name: passed: ${runs:-?} runs in ${time:-?} s, no failure"
