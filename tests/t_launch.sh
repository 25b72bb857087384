# plumb launch: restarts on failure, gives up after K restarts in the window,
# logs every attempt as JSON lines, forwards SIGINT/SIGTERM without restarting,
# cleans up an attempt's leftover processes, refuses a command it cannot run.
. "$(dirname "$0")/lib.sh"
L() { "$PLUMB" launch --backoff 0.05 "$@"; }
jcount() { grep -c "\"event\":\"$2\"" "$1/launch.jsonl" 2>/dev/null || echo 0; }

# 1. fails twice (exit 3, then SIGKILL of itself), succeeds on the third attempt
d=$TMP/a; mkdir -p "$d"
cat >"$d/job.sh" <<'SH'
n=$(cat "$1/count" 2>/dev/null || echo 0); echo $((n+1)) >"$1/count"
echo "attempt=$PLUMB_LAUNCH_ATTEMPT" >>"$1/attempts"
[ "$n" -eq 0 ] && exit 3
[ "$n" -eq 1 ] && kill -KILL $$
exit 0
SH
expect_exit "fail twice then succeed: exit 0" 0 L --max-restarts 3 --run-dir "$d/run" -- sh "$d/job.sh" "$d"
[ "$(cat "$d/count")" = 3 ] && ok "ran 3 attempts" || fail "ran 3 attempts" "count=$(cat "$d/count")"
[ "$(tr '\n' ' ' <"$d/attempts")" = "attempt=0 attempt=1 attempt=2 " ] && ok "PLUMB_LAUNCH_ATTEMPT counts 0,1,2" \
  || fail "PLUMB_LAUNCH_ATTEMPT" "$(cat "$d/attempts")"
[ "$(jcount "$d/run" failure)" = 2 ] && ok "2 failures logged" || fail "2 failures logged" "$(cat "$d/run/launch.jsonl")"
grep '"event":"failure"' "$d/run/launch.jsonl" | head -1 | grep -q '"exit_code":3' && ok "failure 1 logs exit code 3" \
  || fail "failure 1 logs exit code 3" "$(cat "$d/run/launch.jsonl")"
grep '"event":"failure"' "$d/run/launch.jsonl" | sed -n 2p | grep -q '"signal_name":"SIGKILL"' \
  && ok "failure 2 logs SIGKILL" || fail "failure 2 logs SIGKILL" "$(cat "$d/run/launch.jsonl")"
grep '"event":"failure"' "$d/run/launch.jsonl" | sed -n 2p | grep -q '"restarts":1' && ok "failure 2 logs restart count 1" \
  || fail "restart count logged"
python3 -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$d/run/launch.jsonl" \
  && ok "launch.jsonl is JSON lines" || fail "launch.jsonl is JSON lines"

# 2. always fails: gives up after K=2 restarts, exit status of the last attempt, clear message
d=$TMP/b; mkdir -p "$d"
expect_exit "always failing: gives up with the job's status 5" 5 L --max-restarts 2 --run-dir "$d/run" -- sh -c 'echo x >>"$0/n"; exit 5' "$d"
grep -q "gave up after 2 restarts" "$TMP/err" && ok "give-up message" || fail "give-up message" "$(cat "$TMP/err")"
[ "$(wc -l <"$d/n")" -eq 3 ] && ok "3 attempts (1 + 2 restarts)" || fail "3 attempts" "$(wc -l <"$d/n")"
[ "$(jcount "$d/run" give_up)" = 1 ] && ok "give_up logged" || fail "give_up logged"
# K=0: no restart at all
expect_exit "--max-restarts 0 does not restart" 5 L --max-restarts 0 --run-dir "$d/run0" -- sh -c 'echo x >>"$0/m"; exit 5' "$d"
[ "$(wc -l <"$d/m")" -eq 1 ] && ok "1 attempt with K=0" || fail "1 attempt with K=0"
# exit 2 (plumb's usage or input error) is not restarted: the same input fails the same way
expect_exit "a command exiting 2 is not restarted: exit 2 after one attempt" 2 L --max-restarts 3 --run-dir "$d/run2" -- \
  sh -c 'echo x >>"$0/u"; exit 2' "$d"
[ "$(wc -l <"$d/u")" -eq 1 ] && ok "1 attempt for exit 2" || fail "1 attempt for exit 2" "$(wc -l <"$d/u")"
grep -q "not restarting: the command ended with exit status 2" "$TMP/err" && ok "says why it did not restart" \
  || fail "not-restarted message" "$(cat "$TMP/err")"
[ "$(jcount "$d/run2" not_restarted)" = 1 ] && ok "not_restarted logged" || fail "not_restarted logged"
expect_exit "--no-restart none: exit 2 is restarted like any failure" 2 L --max-restarts 2 --no-restart none \
  --run-dir "$d/run3" -- sh -c 'echo x >>"$0/v"; exit 2' "$d"
[ "$(wc -l <"$d/v")" -eq 3 ] && ok "3 attempts with --no-restart none" || fail "3 attempts with none" "$(wc -l <"$d/v")"
expect_exit "--no-restart 5,7: exit 7 is final" 7 L --max-restarts 2 --no-restart 5,7 --run-dir "$d/run4" -- \
  sh -c 'echo x >>"$0/w7"; exit 7' "$d"
[ "$(wc -l <"$d/w7")" -eq 1 ] && ok "1 attempt for a listed status" || fail "1 attempt for 7" "$(wc -l <"$d/w7")"
for bad in "" 0 256 "2," "x" "3,,4"; do
  expect_exit "--no-restart '$bad': exit 2 naming it" 2 L --no-restart "$bad" --run-dir "$d/run5" -- true
  grep -q -- "--no-restart '$bad'" "$TMP/err" || fail "--no-restart '$bad' named" "$(cat "$TMP/err")"
done
[ ! -e "$d/run5" ] && ok "... and no run folder made" || fail "a bad --no-restart made the run folder" "$(ls "$d")"
# the window forgets old failures: each attempt fails after 0.4 s, window 0.2 s
expect_exit "failures outside the window are forgotten" 0 L --max-restarts 1 --restart-window 0.2 --run-dir "$d/run1" -- \
  sh -c 'n=$(cat "$0/w" 2>/dev/null || echo 0); echo $((n+1)) >"$0/w"; sleep 0.4; [ "$n" -ge 3 ]' "$d"
[ "$(cat "$d/w")" = 4 ] && ok "4 attempts with K=1 and a short window" || fail "window" "$(cat "$d/w")"

# 3. SIGINT is forwarded to the job, which checkpoints and exits 0; not restarted
d=$TMP/c; mkdir -p "$d"
"$PLUMB" launch --backoff 0.05 --max-restarts 3 --run-dir "$d/run" -- sh -c 'trap "echo got-int >\"$0/sig\"; exit 0" INT; touch "$0/ready"; while :; do sleep 0.05; done' "$d" \
  >"$d/out" 2>&1 &
lp=$!; (sleep 20; kill -KILL $lp) >/dev/null 2>&1 & guard=$!
for i in $(seq 100); do [ -e "$d/ready" ] && break; sleep 0.05; done
kill -INT $lp; wait $lp; rc=$?; kill $guard 2>/dev/null; wait $guard 2>/dev/null
[ "$rc" = 0 ] && ok "SIGINT: exits with the job's status 0" || fail "SIGINT exit" "rc=$rc $(cat "$d/out")"
[ "$(cat "$d/sig" 2>/dev/null)" = got-int ] && ok "SIGINT reached the job" || fail "SIGINT reached the job"
[ "$(jcount "$d/run" start)" = 1 ] && ok "SIGINT: not restarted" || fail "SIGINT: not restarted" "$(cat "$d/run/launch.jsonl")"
grep -q '"forwarded_signal":2' "$d/run/launch.jsonl" && ok "forwarded SIGINT logged" || fail "forwarded SIGINT logged"

# 4. SIGTERM to a job that dies of it: not restarted, exit 128+15
d=$TMP/d; mkdir -p "$d"
"$PLUMB" launch --backoff 0.05 --max-restarts 3 --run-dir "$d/run" -- sh -c 'touch "$0/ready"; exec sleep 30' "$d" >"$d/out" 2>&1 &
lp=$!; (sleep 20; kill -KILL $lp) >/dev/null 2>&1 & guard=$!
for i in $(seq 100); do [ -e "$d/ready" ] && break; sleep 0.05; done
sleep 0.1; kill -TERM $lp; wait $lp; rc=$?; kill $guard 2>/dev/null; wait $guard 2>/dev/null
[ "$rc" = 143 ] && ok "SIGTERM: exit 143, not restarted" || fail "SIGTERM exit" "rc=$rc $(cat "$d/out")"
[ "$(jcount "$d/run" start)" = 1 ] && ok "SIGTERM: 1 attempt" || fail "SIGTERM: 1 attempt"

# 5. leftovers of a failed attempt (a background child that outlives the job) are ended before the restart
d=$TMP/e; mkdir -p "$d"
expect_exit "leftover processes cleared" 0 L --max-restarts 2 --run-dir "$d/run" -- \
  sh -c 'if [ ! -e "$0/once" ]; then touch "$0/once"; (sleep 30; echo leaked >"$0/leak") & echo $! >"$0/bgpid"; exit 1; fi; exit 0' "$d"
bg=$(cat "$d/bgpid"); if kill -0 "$bg" 2>/dev/null; then fail "leftover killed" "pid $bg alive"; kill "$bg"; else ok "leftover killed"; fi

# 6. a command that cannot run: exit 2 naming it, no restarts
d=$TMP/f
expect_exit "missing command: exit 2" 2 L --run-dir "$d/run" -- /nonexistent/cmd
grep -q "/nonexistent/cmd" "$TMP/err" && ok "missing command is named" || fail "missing command is named" "$(cat "$TMP/err")"
expect_exit "no command: exit 2" 2 "$PLUMB" launch --run-dir "$d/run"
expect_exit "bad --max-restarts: exit 2" 2 "$PLUMB" launch --max-restarts -1 -- true
grep -q -- "--max-restarts" "$TMP/err" && ok "bad option named" || fail "bad option named" "$(cat "$TMP/err")"
# 7. under mpirun (real ranks, each in a process group of its own): SIGTERM
#    reaches the ranks, which exit 0, and mpirun then ends cleanly: status 0
if command -v mpirun >/dev/null; then
  d=$TMP/g; mkdir -p "$d"
  "$PLUMB" launch --backoff 0.05 --run-dir "$d/run" -- mpirun --oversubscribe -np 2 sh -c \
    'trap "echo term >\"$0/term.$OMPI_COMM_WORLD_RANK\"; exit 0" TERM; touch "$0/ready.$OMPI_COMM_WORLD_RANK"; while :; do sleep 0.05; done' "$d" \
    >"$d/out" 2>&1 &
  lp=$!; (sleep 30; kill -KILL $lp) >/dev/null 2>&1 & guard=$!
  for i in $(seq 200); do [ -e "$d/ready.0" ] && [ -e "$d/ready.1" ] && break; sleep 0.05; done
  kill -TERM $lp; wait $lp; rc=$?; kill $guard 2>/dev/null; wait $guard 2>/dev/null
  [ "$rc" = 0 ] && ok "mpirun job: SIGTERM -> ranks exit 0 -> status 0" || fail "mpirun SIGTERM" "rc=$rc $(tail -5 "$d/out")"
  [ -e "$d/term.0" ] && [ -e "$d/term.1" ] && ok "both ranks got SIGTERM" || fail "both ranks got SIGTERM"
  [ "$(jcount "$d/run" start)" = 1 ] && ok "mpirun SIGTERM: not restarted" || fail "mpirun SIGTERM: not restarted"

  # a rank SIGKILLed from outside: mpirun fails the job, the launcher restarts it
  d=$TMP/h; mkdir -p "$d"
  "$PLUMB" launch --backoff 0.05 --max-restarts 2 --run-dir "$d/run" -- mpirun --oversubscribe -np 2 sh -c \
    'if [ "$PLUMB_LAUNCH_ATTEMPT" = 0 ]; then echo $$ >"$0/pid.$OMPI_COMM_WORLD_RANK"; exec sleep 30; fi; exit 0' "$d" \
    >"$d/out" 2>&1 &
  lp=$!; (sleep 40; kill -KILL $lp) >/dev/null 2>&1 & guard=$!
  for i in $(seq 200); do [ -e "$d/pid.1" ] && break; sleep 0.05; done
  sleep 0.2; kill -KILL "$(cat "$d/pid.1")"; wait $lp; rc=$?; kill $guard 2>/dev/null; wait $guard 2>/dev/null
  [ "$rc" = 0 ] && ok "rank killed: restarted and succeeded" || fail "rank killed" "rc=$rc $(tail -5 "$d/out")"
  [ "$(jcount "$d/run" failure)" = 1 ] && [ "$(jcount "$d/run" start)" = 2 ] && ok "1 failure, 2 attempts" \
    || fail "1 failure, 2 attempts" "$(cat "$d/run/launch.jsonl")"
else
  skip "mpirun tests" "no mpirun"
fi
finish
