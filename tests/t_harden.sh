# Hardening (README "Run folders", docs/TRAINING.md): nothing lost, no wrong
# exit code, no silent truncation. One block per defect; each test failed on
# the build before its fix.
. "$(dirname "$0")/lib.sh"
Q="--quiet --health-interval 0 --train-samples 500 --eval-samples 100"
# run NAME WANT_RC GREP CMD...: exit WANT_RC and stderr+stdout matching GREP (an ERE; "" = anything)
run() {
  local name=$1 want=$2 pat=$3; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ "$rc" -eq "$want" ] && { [ -z "$pat" ] || cat "$TMP/out" "$TMP/err" | grep -Eq -- "$pat"; }; then ok "$name"
  else fail "$name" "exit $rc (want $want): $(cat "$TMP/err" "$TMP/out" | head -c 400)"; fi
}

# ---- 1. a truncated .gz is an error naming the file, never fewer rows
"$PLUMB" data synth-criteo --rows 2000 --out "$TMP/d.tsv.gz" >/dev/null 2>&1
python3 - "$TMP" <<'PY'
import gzip, sys, zlib
d = sys.argv[1]
lines = gzip.open(d + "/d.tsv.gz", "rb").read().split(b"\n")
co = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip framing, flushed after 500 lines, no trailer
open(d + "/cut_line.gz", "wb").write(co.compress(b"\n".join(lines[:500]) + b"\n") + co.flush(zlib.Z_SYNC_FLUSH))
raw = open(d + "/d.tsv.gz", "rb").read()
open(d + "/cut_mid.gz", "wb").write(raw[: len(raw) // 3])
PY
run "gz cut at a line boundary: exit 2, file named, truncated gzip stream" 2 "cut_line.gz: truncated gzip stream" \
  "$PLUMB" train ctr $Q --steps 2 --data "$TMP/cut_line.gz" --out "$TMP/g1"
run "gz cut mid-line: exit 2, truncated gzip stream (not a warning)" 2 "cut_mid.gz: truncated gzip stream" \
  "$PLUMB" train ctr $Q --steps 2 --data "$TMP/cut_mid.gz" --bad-lines skip --out "$TMP/g2"
run "the whole .gz still trains" 0 "" "$PLUMB" train ctr $Q --steps 2 --data "$TMP/d.tsv.gz" --out "$TMP/g3"

# ---- 12. a line-length cap: /dev/zero is exit 2 with file and line, in bounded memory
run "--data /dev/zero: exit 2 naming the file and line 1" 2 "/dev/zero: line 1 is longer than 1048576 bytes" \
  timeout 60 bash -c "ulimit -v 4000000; exec \"\$0\" \"\$@\"" "$PLUMB" train ctr $Q --steps 2 --data /dev/zero --out "$TMP/z"

# ---- 2. the exporter never shares a busy port; PORT and :PORT mean 127.0.0.1; port 0 prints the real port
"$PLUMB" health --serve 127.0.0.1:0 --port-file "$TMP/port" --watch 0.5 >"$TMP/s1.out" 2>"$TMP/s1.err" &
SPID=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
PORT=$(cat "$TMP/port" 2>/dev/null)
if [ -n "$PORT" ]; then
  grep -q "serving http://127.0.0.1:$PORT/metrics" "$TMP/s1.out" && ok "port 0: the URL printed carries the real port ($PORT)" \
    || fail "port 0 URL" "$(cat "$TMP/s1.out")"
  # a second exporter on the same port while scrapes arrive: it must fail, and every scrape reach the first
  "$PLUMB" health --serve "127.0.0.1:$PORT" --duration 3 >"$TMP/s2.out" 2>"$TMP/s2.err" &
  S2=$!
  sleep 1
  for _ in $(seq 20); do curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null; done
  wait "$S2"; rc2=$?
  [ "$rc2" -eq 2 ] && grep -q "address in use" "$TMP/s2.err" && ok "a second exporter on a busy port: exit 2, address in use" \
    || fail "second exporter on a busy port" "exit $rc2: $(cat "$TMP/s2.err" "$TMP/s2.out" | head -c 300)"
  run "the same busy port as PORT: exit 2, address in use" 2 "address in use" "$PLUMB" health --serve "$PORT" --duration 2
else fail "exporter on port 0" "$(cat "$TMP/s1.err")"; fi
kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null
grep -Eq "answered (2[0-9]|[3-9][0-9]) /metrics requests" "$TMP/s1.err" && ok "the first exporter answered all 20 scrapes" \
  || fail "scrapes split between exporters" "$(grep answered "$TMP/s1.err")"
P2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
run "--serve PORT binds 127.0.0.1:PORT" 0 "serving http://127.0.0.1:$P2/metrics" "$PLUMB" health --serve "$P2" --duration 0.5
run "--serve :PORT binds 127.0.0.1:PORT" 0 "serving http://127.0.0.1:$P2/metrics" "$PLUMB" health --serve ":$P2" --duration 0.5
run "--serve x: exit 2 naming --serve" 2 "--serve" "$PLUMB" health --serve x --duration 0.5

# ---- 4. a GPU run that is not on a GPU: exit 2 as accept does; the cpu only when asked for
run "--device cuda with no usable GPU: exit 2 naming --device" 2 "--device cuda: no usable device here" \
  env PLUMB_BACKEND_PATH=/nonexistent "$PLUMB" train ctr $Q --steps 2 --device cuda --out "$TMP/dev1"
[ "$(jq -r '.checks[0].status + " " + .runs[0].error' "$TMP/dev1/results.json" 2>/dev/null | grep -c "^fail --device cuda")" = 1 ] \
  && ok "--device cuda refused: results.json records the failed check and why" || fail "dev1 results" "$(cat "$TMP/dev1/results.json" 2>&1 | head -c 300)"
run "--device cuda:99: exit 2" 2 "--device cuda:99: no usable device" \
  env PLUMB_BACKEND_PATH=/nonexistent "$PLUMB" train ctr $Q --steps 2 --device cuda:99 --out "$TMP/dev2"
run "--allow-cpu-fallback trains on the cpu" 0 "falling back to the cpu" \
  env PLUMB_BACKEND_PATH=/nonexistent "$PLUMB" train ctr $Q --steps 2 --device cuda --allow-cpu-fallback --out "$TMP/dev3"
[ "$(jq -r '.checks[0].device' "$TMP/dev3/results.json" 2>/dev/null)" = cpu ] \
  && [ "$(jq -r '.checks[0].details.device_requested' "$TMP/dev3/results.json")" = cuda ] \
  && ok "the fallback run is recorded on the cpu (device requested: cuda)" || fail "fallback device" "$(jq -c '.checks[0]|{device,details}' "$TMP/dev3/results.json" 2>&1 | head -c 300)"

# ---- 5. SIGTERM: say what happened; a run stopped before its steps is not a pass
sigterm_run() { # DIR [args]: starts a long run, SIGTERMs it after 20 steps, sets RC
  local d=$1; shift
  "$PLUMB" train ctr --steps 100000 $Q --train-samples 20000 "$@" --out "$d" >"$d.out" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do [ "$(cat "$d"/checks/train-ctr/metrics.jsonl 2>/dev/null | grep -c '"type":"step"')" -ge 20 ] && break; sleep 0.1; done
  kill -TERM $pid; wait $pid; RC=$?
}
sigterm_run "$TMP/st1"
st=$(jq -r '.checks[0].status' "$TMP/st1/results.json" 2>/dev/null); rs=$(jq -r '.checks[0].reason' "$TMP/st1/results.json" 2>/dev/null)
[ "$RC" -eq 1 ] && [ "$st" = fail ] && echo "$rs" | grep -q "stopped by SIGTERM at step [0-9]* of 100000 (not finished) with no checkpoint" \
  && ! echo "$rs" | grep -q "checkpoint written" && ok "SIGTERM without --checkpoint-dir: exit 1, fail, 'no checkpoint' (not 'checkpoint written')" \
  || fail "SIGTERM without a checkpoint dir" "exit $RC, $st: $rs"
sigterm_run "$TMP/st2" --checkpoint-dir "$TMP/st2ck"
st=$(jq -r '.checks[0].status' "$TMP/st2/results.json" 2>/dev/null); rs=$(jq -r '.checks[0].reason' "$TMP/st2/results.json" 2>/dev/null)
[ "$RC" -eq 0 ] && [ "$st" = skip ] && echo "$rs" | grep -q "stopped by SIGTERM at step [0-9]* of 100000 (not finished): checkpoint ckpt-.*written" \
  && [ "$(jq -r .verdict "$TMP/st2/results.json")" != fail ] \
  && ok "SIGTERM with --checkpoint-dir: exit 0, skip (not pass), the checkpoint named" || fail "SIGTERM with a checkpoint" "exit $RC, $st: $rs"

finish
