# Sourced by scripts/gpu-check.sh and scripts/gputrain-check.sh on the GPU host, after
# gpu-libs.sh: the whole test binary on the GPU, unfiltered, before anything that backs a
# claim. A failure stops the script with a verdict; nothing measured after a red suite counts.
# Needs: $here, $OUT and log() from the sourcing script. Writes $OUT/gpu-suite.log.
log ""; log "==== gpu suite: PLUMB_TEST_DEVICE=cuda build/plumb-tests (unfiltered)"
suite_t0=$SECONDS
PLUMB_TEST_DEVICE=cuda timeout 900 "$here/build/plumb-tests" >"$OUT/gpu-suite.log" 2>&1
suite_rc=$?
suite_tally=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/gpu-suite.log" | tail -n 1)
grep -E '^FAIL|failed:' "$OUT/gpu-suite.log" | head -n 40 | tee -a "$LOG"
log "==== gpu suite: exit $suite_rc, ${suite_tally:-no tally line} ($((SECONDS - suite_t0)) s)"
if [ "$suite_rc" -ne 0 ] || [ -z "$suite_tally" ]; then
  if [ "${GPU_SUITE_ON_RED:-stop}" = continue ]; then
    # debugging only (scripts/gpu-round.sh callers may ask): what runs below is not evidence
    log "VERDICT: FAIL - the GPU suite is red (${suite_tally:-no tally, exit $suite_rc}); NOTHING MEASURED BELOW COUNTS (GPU_SUITE_ON_RED=continue)"
  else
    log "VERDICT: FAIL - the GPU suite is red (${suite_tally:-no tally, exit $suite_rc}); stopping before any measurement"
    exit 1
  fi
fi
