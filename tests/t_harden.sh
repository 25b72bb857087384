# Hardening (README "Run folders", docs/TRAINING.md): nothing lost, no wrong
# exit code, no silent truncation. One block per defect; each test failed on
# the build before its fix.
. "$(dirname "$0")/lib.sh"
Q="--quiet --health-interval 0 --train-samples 500 --eval-samples 100"

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
  timeout 60 bash -c "ulimit -v $VMEM; exec \"\$0\" \"\$@\"" "$PLUMB" train ctr $Q --steps 2 --data /dev/zero --out "$TMP/z"

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

# ---- 3. negative values are exit 2 naming the option (never the default)
for ov in "--steps -1" "--lr -0.5" "--warmup -2" "--max-rows -2" "--eval-every -3" "--checkpoint-every -5"; do
  set -- $ov
  run "$ov: exit 2 naming $1" 2 "^plumb train: $1" "$PLUMB" train ctr $Q --steps 2 $ov --out "$TMP/neg"
done

# ---- 6. one run folder rule: append-only, per-run artifact folders, this command's exit code
"$PLUMB" train ctr $Q --steps 3 --out "$TMP/rf" >/dev/null 2>&1
n1=$(wc -l <"$TMP/rf/checks/train-ctr/metrics.jsonl" 2>/dev/null); h1=$(md5sum <"$TMP/rf/checks/train-ctr/metrics.jsonl" 2>/dev/null)
"$PLUMB" train ctr $Q --steps 5 --out "$TMP/rf" >/dev/null 2>&1
[ -n "$n1" ] && [ "$(md5sum <"$TMP/rf/checks/train-ctr/metrics.jsonl")" = "$h1" ] \
  && [ "$(grep -c '"type":"step"' "$TMP/rf/checks/train-ctr-run2/metrics.jsonl" 2>/dev/null)" = 5 ] \
  && [ "$(jq -r '[.checks[].artifacts[0]] | unique | length' "$TMP/rf/results.json")" = 2 ] \
  && [ "$(jq -r '[.runs[].run] | join(",")' "$TMP/rf/results.json")" = "1,2" ] \
  && ok "a second train --out D: the first metrics.jsonl kept, the second in checks/train-ctr-run2/, runs 1,2" \
  || fail "second train into one folder" "$(ls -R "$TMP/rf/checks" | head -c 300); $(jq -c '[.checks[].artifacts]' "$TMP/rf/results.json" 2>&1)"
"$PLUMB" rng --count 2000 --out "$TMP/rr" >/dev/null 2>&1
h1=$(cat "$TMP"/rr/checks/rng*/histograms.json 2>/dev/null | md5sum)
"$PLUMB" rng --count 3000 --out "$TMP/rr" >/dev/null 2>&1
[ "$(cat "$TMP"/rr/checks/rng/histograms.json | md5sum)" = "$h1" ] && [ -s "$TMP/rr/checks/rng-run2/histograms.json" ] \
  && [ "$(jq '.checks | length' "$TMP/rr/results.json")" = 2 ] \
  && ok "a second command's checks never overwrite the first's artifacts (checks/rng-run2/)" \
  || fail "artifacts overwritten" "$(ls "$TMP/rr/checks")"
# accept --quick twice into one folder: every artifact of the first kept byte for byte,
# the second's under checks/KEY-run2/, both runs in results.json, each exit 0
"$PLUMB" accept --quick --out "$TMP/aq" >/dev/null 2>&1; a1=$?
(cd "$TMP/aq" && find checks -type f | sort | xargs md5sum) >"$TMP/aq1.sum" 2>/dev/null
"$PLUMB" accept --quick --out "$TMP/aq" >/dev/null 2>&1; a2=$?
(cd "$TMP/aq" && md5sum -c --quiet "$TMP/aq1.sum") >"$TMP/aqc" 2>&1; same=$?
n1=$(wc -l <"$TMP/aq1.sum")
n2=$(cd "$TMP/aq" && find checks -path '*-run2/*' -type f | wc -l)
if [ $a1 = 0 ] && [ $a2 = 0 ] && [ $same = 0 ] && [ "$n1" -gt 0 ] && [ "$n2" = "$n1" ] \
   && [ "$(jq -r '[.runs[].run] | join(",")' "$TMP/aq/results.json")" = "1,2" ]; then
  ok "accept --quick twice into one folder: the first's $n1 artifacts unchanged, the second's under checks/*-run2/"
else fail "accept --quick twice" "rc $a1/$a2, changed: $(head -c 200 "$TMP/aqc"), $n1 vs $n2 files: $(ls "$TMP/aq/checks")"; fi
# an existing folder this user cannot write (root writes anywhere, so as nobody)
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  AS_NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
  mkdir -p "$TMP/ro/old" "$TMP/rw"; chmod 755 "$TMP" "$TMP/ro" "$TMP/ro/old"; chmod 777 "$TMP/rw"
  run "--out an existing folder this user cannot write: exit 2 naming --out" 2 "--out $TMP/ro/old: cannot write" \
    $AS_NOBODY "$PLUMB" train ctr $Q --steps 2 --out "$TMP/ro/old"
  run "--out a new folder in one this user cannot write: exit 2 naming --out" 2 "--out $TMP/ro/new: cannot create" \
    $AS_NOBODY "$PLUMB" train ctr $Q --steps 2 --out "$TMP/ro/new"
  run "--checkpoint-dir this user cannot write: exit 2 naming it" 2 "--checkpoint-dir $TMP/ro/old: not writable" \
    $AS_NOBODY "$PLUMB" train ctr $Q --steps 2 --out "$TMP/rw/run" --checkpoint-dir "$TMP/ro/old"
  [ -f "$TMP/rw/run/results.json" ] && jq -e '.checks[0].status == "fail" and .runs[0].verdict == "fail"' "$TMP/rw/run/results.json" >/dev/null \
    && ok "... and results.json records the check and the run as fail" || fail "unwritable checkpoint dir results" "$(ls "$TMP/rw/run" 2>&1)"
else skip "unwritable --out and --checkpoint-dir" "needs root and setpriv to run as another user"; fi
mkdir -p "$TMP/other"; echo "keep me" >"$TMP/other/report.html"
run "a non-empty folder that is not a run folder: exit 2" 2 "not a plumb run folder" "$PLUMB" train ctr $Q --steps 2 --out "$TMP/other"
[ "$(cat "$TMP/other/report.html")" = "keep me" ] && [ ! -e "$TMP/other/results.json" ] && ok "... and its files are untouched" \
  || fail "foreign folder touched" "$(ls "$TMP/other")"
mkdir -p "$TMP/ld"; echo '{"attempt":0}' >"$TMP/ld/launch.jsonl"
run "a folder holding only plumb launch's launch.jsonl is a run folder" 0 "" "$PLUMB" train ctr $Q --steps 2 --out "$TMP/ld"
env PLUMB_BACKEND_PATH=/nonexistent "$PLUMB" train ctr $Q --steps 2 --device cuda --out "$TMP/mixed" >/dev/null 2>&1
run "an old failed check, a new all-pass run: exit 0" 0 "" "$PLUMB" train ctr $Q --steps 2 --out "$TMP/mixed"
[ "$(jq -r '.verdict + " " + .runs[0].verdict + " " + .runs[1].verdict' "$TMP/mixed/results.json")" = "fail fail pass" ] \
  && ok "... the folder verdict (fail) is kept apart from each run's (fail, pass)" || fail "folder verdict" "$(jq -c '{verdict, runs}' "$TMP/mixed/results.json")"

# ---- 7. output paths checked before training; a failed train still writes results.json
mkdir -p "$TMP/pdir"
run "--predictions DIR: exit 2 before training" 2 "--predictions .*is a directory" "$PLUMB" train ctr $Q --steps 200 --predictions "$TMP/pdir" --out "$TMP/p1"
[ ! -s "$TMP/p1/checks/train-ctr/metrics.jsonl" ] && [ "$(jq -r '.checks[0].status' "$TMP/p1/results.json" 2>/dev/null)" = fail ] \
  && ok "... nothing trained, results.json says fail and why" || fail "predictions dir" "$(head -c 300 "$TMP/p1/results.json" 2>&1)"
run "--predictions in a missing folder: exit 2" 2 "--predictions .*does not exist" "$PLUMB" train ctr $Q --steps 2 --predictions "$TMP/nope/p.tsv" --out "$TMP/p2"
run "a diverging run: exit 1" 1 "non-finite" "$PLUMB" train ctr $Q --steps 6 --optimizer sgd --lr 1e30 --out "$TMP/nf"
[ "$(jq -r '.checks[0].status' "$TMP/nf/results.json" 2>/dev/null)" = fail ] && jq -r '.checks[0].reason' "$TMP/nf/results.json" | grep -q "non-finite" \
  && ok "... results.json written: status fail with the reason" || fail "failed train results" "$(head -c 300 "$TMP/nf/results.json" 2>&1)"

# ---- 8. a failed metrics write stops the run and is reported (a file size limit: EFBIG, like a full disk)
bash -c 'trap "" XFSZ; ulimit -f 24; exec "$0" "$@"' "$PLUMB" train ctr $Q --steps 400 --out "$TMP/full" >"$TMP/full.out" 2>&1; RC=$?
steps=$(grep -c '"type":"step"' "$TMP/full/checks/train-ctr/metrics.jsonl" 2>/dev/null)
[ "$RC" -eq 3 ] && grep -q "metrics.jsonl: write of a JSON line failed: File too large" "$TMP/full.out" && [ "${steps:-0}" -lt 400 ] \
  && [ "$(jq -r '.checks[0].status' "$TMP/full/results.json")" = fail ] \
  && jq -r '.checks[0].reason' "$TMP/full/results.json" | grep -q "not written" \
  && ok "metrics.jsonl write fails: the run stops (exit 3), results.json says fail with the error and the lines lost" \
  || fail "metrics write error" "exit $RC, $steps steps: $(tail -c 300 "$TMP/full.out")"

# ---- 9. a dead writer's checkpoint temp file is removed by the next resume
mkdir -p "$TMP/ck9"
"$PLUMB" train ctr $Q --steps 4 --checkpoint-dir "$TMP/ck9" --out "$TMP/r9" >/dev/null 2>&1
sh -c 'exit 0' & dpid=$!; wait $dpid
head -c 100000 /dev/urandom >"$TMP/ck9/ckpt-0000000099.plumb.tmp.$dpid"
"$PLUMB" train ctr $Q --steps 6 --checkpoint-dir "$TMP/ck9" --resume --out "$TMP/r9b" >"$TMP/r9.out" 2>&1
[ ! -e "$TMP/ck9/ckpt-0000000099.plumb.tmp.$dpid" ] && ! ls "$TMP/ck9" | grep -q '\.tmp\.' \
  && ok "--resume removes ckpt-*.tmp.PID of a dead writer" || fail "stale temp" "$(ls "$TMP/ck9")"

# ---- 10. --resume: require (default) or auto; all checkpoints corrupt is never a fresh start
mkdir -p "$TMP/ck10"
run "--resume with no checkpoint: exit 2" 2 "--resume: no checkpoint in" "$PLUMB" train ctr $Q --steps 2 --checkpoint-dir "$TMP/ck10" --resume --out "$TMP/r10a"
run "--resume auto with no checkpoint starts at step 0" 0 "" "$PLUMB" train ctr $Q --steps 2 --checkpoint-dir "$TMP/ck10" --resume auto --out "$TMP/r10b"
for f in "$TMP"/ck10/ckpt-*.plumb; do printf 'garbage' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null; done
n=$(ls "$TMP"/ck10/ckpt-*.plumb | wc -l)
run "--resume, every checkpoint corrupt: exit 2, N found, none usable" 2 "$n checkpoints? found, none usable" \
  "$PLUMB" train ctr $Q --steps 4 --checkpoint-dir "$TMP/ck10" --resume --out "$TMP/r10c"
run "--resume auto, every checkpoint corrupt: exit 2 too" 2 "none usable" \
  "$PLUMB" train ctr $Q --steps 4 --checkpoint-dir "$TMP/ck10" --resume auto --out "$TMP/r10d"

# ---- 11. plumb report: no hang on a FIFO, no link out of the folder, no javascript: links
"$PLUMB" train ctr $Q --steps 2 --out "$TMP/rep" >/dev/null 2>&1
echo "HOST-SECRET-$$" >"$TMP/secret.txt"
rm -f "$TMP/rep/checks/train-ctr/metrics.jsonl"; mkfifo "$TMP/rep/checks/train-ctr/metrics.jsonl"
mkdir -p "$TMP/rep/checks/x"; ln -s /dev/zero "$TMP/rep/checks/x/zero.jsonl"; ln -s "$TMP/secret.txt" "$TMP/rep/checks/x/histograms.json"
jq '.checks[0].artifacts += ["checks/x/zero.jsonl", "checks/x/histograms.json", "javascript:alert(1)"]' "$TMP/rep/results.json" >"$TMP/rj" && mv "$TMP/rj" "$TMP/rep/results.json"
run "report with a FIFO and links out: exit 0 in bounded time and memory" 0 "report.html" \
  timeout 30 bash -c "ulimit -v $VMEM; exec \"\$0\" \"\$@\"" "$PLUMB" report "$TMP/rep"
! grep -q "HOST-SECRET" "$TMP/rep/report.html" && ! grep -q 'href="javascript:' "$TMP/rep/report.html" \
  && grep -q "not a regular file" "$TMP/rep/report.html" \
  && ok "... no host bytes in the page, no javascript: link, the FIFO named as not read" || fail "report hostile artifacts" "$(grep -o 'unavailable[^<]*' "$TMP/rep/report.html" | head -3)"

# ---- 13. fp16 loss scaling: back-offs from a too-high initial scale are not bad steps
run "fp16 from --loss-scale-init 1e30: the scale backs off, the run finishes" 0 "check train-ctr: pass" \
  "$PLUMB" train ctr $Q --precision fp16 --loss-scale-init 1e30 --steps 120 --out "$TMP/ls13"
b=$(jq -r '.train.backoff_steps' "$TMP/ls13/results.json" 2>/dev/null)
[ "${b:-0}" -gt 3 ] && ok "... $b back-off steps recorded (more than --max-bad-steps 3)" || fail "backoff steps" "$b"
run "real non-finite steps at scale 1 still count: exit 1" 1 "more than --max-bad-steps" \
  "$PLUMB" train ctr $Q --steps 8 --inject nan@1,nan@2,nan@3,nan@4 --out "$TMP/bad13"

# ---- 14. checks that can fail
run "every step skipped: the train check fails (exit 1)" 1 "check train-ctr: fail: all 2 steps were skipped" \
  "$PLUMB" train ctr $Q --steps 2 --inject nan@0,nan@1 --out "$TMP/sk14"
run "ctr-tiny's full run on the synthetic data below its AUC floor fails" 1 "misses the ctr-tiny floor" \
  "$PLUMB" train ctr --quiet --health-interval 0 --train-samples 2000 --eval-samples 500 --steps 1500 --lr 1e-7 --out "$TMP/fl14"
run "gpt-tiny's preset steps on the synthetic chain above its val_loss ceiling fail" 1 "val_loss 5\.[0-9]+ misses the gpt-tiny floor \(<= 2 after 400 steps" \
  "$PLUMB" train gpt --quiet --health-interval 0 --batch 1 --lr 1e-7 --lr-min 0 --out "$TMP/fl14g"
run "resnet-tiny's preset steps on synthetic CIFAR below its top-1 floor fail" 1 "misses the resnet-tiny floor \(>= 0\.9 after 60 steps" \
  "$PLUMB" train resnet --quiet --health-interval 0 --batch 2 --lr 1e-7 --out "$TMP/fl14r"
run "gpt-tiny with its defaults clears the floor" 0 "val_loss within the gpt-tiny floor \(<= 2\)" \
  "$PLUMB" train gpt --quiet --health-interval 0 --batch 4 --out "$TMP/fl14g2"

# ---- 15. wrong codes, vague messages
touch "$TMP/afile"; ln -sf "$TMP/lp2" "$TMP/lp1"; ln -sf "$TMP/lp1" "$TMP/lp2"
run "--out /proc/self: exit 2 naming --out" 2 "^plumb train: --out /proc/self" "$PLUMB" train ctr $Q --steps 2 --out /proc/self
run "--out that cannot be created: exit 2" 2 "^plumb train: --out" "$PLUMB" train ctr $Q --steps 2 --out /proc/self/nope
run "--checkpoint-dir a file: exit 2" 2 "--checkpoint-dir .*not a directory" "$PLUMB" train ctr $Q --steps 2 --checkpoint-dir "$TMP/afile" --out "$TMP/c15a"
run "--checkpoint-dir a symlink loop: exit 2" 2 "--checkpoint-dir .*symlink loop" "$PLUMB" train ctr $Q --steps 2 --checkpoint-dir "$TMP/lp1" --out "$TMP/c15b"
run "report --html DIR: exit 2" 2 "--html .*is a directory" "$PLUMB" report "$TMP/rf" --html "$TMP/pdir"
run "synth-criteo --out DIR: exit 2" 2 "--out .*is a directory" "$PLUMB" data synth-criteo --rows 10 --out "$TMP/pdir"
run "--rows 100000000: exit 2 saying how much it needs" 2 "needs [0-9.]+ GB" "$PLUMB" train ctr $Q --steps 2 --rows 100000000 --optimizer sgd --out "$TMP/big"
"$PLUMB" train ctr $Q --steps 3 --batch 64 --checkpoint-dir "$TMP/ck15" --out "$TMP/m1" >/dev/null 2>&1
run "resume with another batch: exit 2 naming the field" 2 "batch is 64 in the checkpoint, 32 here" \
  "$PLUMB" train ctr $Q --steps 6 --batch 32 --checkpoint-dir "$TMP/ck15" --resume --out "$TMP/m2"
"$PLUMB" data synth-criteo --rows 1200 --out "$TMP/d15.tsv" >/dev/null 2>&1; ln -sf "$TMP/d15.tsv" "$TMP/d15link.tsv"
"$PLUMB" train ctr --quiet --health-interval 0 --steps 3 --data "$TMP/d15.tsv" --checkpoint-dir "$TMP/ck15d" --out "$TMP/m3" >/dev/null 2>&1
run "resume naming the same data file by another path: resumes" 0 "" \
  "$PLUMB" train ctr --quiet --health-interval 0 --steps 5 --data "$TMP/d15link.tsv" --checkpoint-dir "$TMP/ck15d" --resume --out "$TMP/m4"
run "--preset --out X: exit 2 (--out is not the preset)" 2 "--preset needs a value" "$PLUMB" train ctr --preset --out "$TMP/X" $Q --steps 2

# ---- 16. output paths of plumb data and plumb bench: a directory, a missing folder or a
# path that cannot be created is exit 2 naming the option, before any work (each was exit
# 3 from the final write: rename/create/mkdir failed, after a whole benchmark for --json)
mkdir -p "$TMP/odir"; touch "$TMP/ofile"
run "synth-tokens --out DIR: exit 2" 2 "--out .*is a directory" "$PLUMB" data synth-tokens --tokens 100 --out "$TMP/odir"
run "synth-tokens --out in a missing folder: exit 2" 2 "--out .*does not exist" "$PLUMB" data synth-tokens --tokens 100 --out "$TMP/nodir/t.bin"
run "synth-cifar --out an existing file: exit 2" 2 "--out .*ofile.*not a directory" "$PLUMB" data synth-cifar --train 10 --test 5 --out "$TMP/ofile"
run "synth-cifar --out that cannot be created: exit 2" 2 "--out /proc/nope.*cannot create" "$PLUMB" data synth-cifar --train 10 --test 5 --out /proc/nope
run "synth-cifar --out '': exit 2" 2 "--out" "$PLUMB" data synth-cifar --train 10 --test 5 --out ""
"$PLUMB" data synth-criteo --rows 50 --out "$TMP/c16.tsv" >/dev/null 2>&1
mkdir -p "$TMP/odir.plumbcache"
run "data cache --out DIR: exit 2" 2 "--out .*is a directory" "$PLUMB" data cache "$TMP/c16.tsv" --out "$TMP/odir.plumbcache"
run "data cache --out in a missing folder: exit 2" 2 "--out .*does not exist" "$PLUMB" data cache "$TMP/c16.tsv" --out "$TMP/nodir/c.plumbcache"
run "bench gpt --json DIR: exit 2 before the benchmark" 2 "^plumb bench gpt: --json .*is a directory" \
  "$PLUMB" bench gpt --preset gpt-tiny --steps 1 --warmup 0 --batch 2 --json "$TMP/odir"
grep -q "tokens/s" "$TMP/out" && fail "bench gpt --json DIR ran the benchmark first" "$(head -3 "$TMP/out")" || ok "bench gpt --json DIR: nothing measured"
run "bench resnet --json in a missing folder: exit 2" 2 "^plumb bench resnet: --json .*does not exist" \
  "$PLUMB" bench resnet --preset resnet-tiny --steps 1 --warmup 0 --leak-steps 0 --batch 4 --pool 16 --precision fp32 --json "$TMP/nodir/r.json"
run "bench ctr --json DIR: exit 2" 2 "^plumb bench ctr: --json .*is a directory" \
  "$PLUMB" bench ctr --device cpu --preset ctr-tiny --rows 1000 --steps 1 --warmup 0 --leak-steps 0 --batch 256 --precision fp32 --pool 1024 --json "$TMP/odir"

# ---- 17. option values no range table holds: plumb bench ctr --to-auc is 0 (skip) or an AUC
# in (0, 1) (1.5 and 1 ran --to-auc-max-steps to a target no model reaches; -1 was skipped
# silently)
TA="--device cpu --preset ctr-tiny --rows 1000 --no-throughput --auc-eval 1024 --to-auc-every 5 --to-auc-max-steps 10 --to-auc-batch 256"
for v in 1.5 1 -1 -0.2; do
  run "bench ctr --to-auc $v: exit 2 naming it and the range" 2 "^plumb bench ctr: --to-auc: $v .*expected 0 .* between 0 and 1" "$PLUMB" bench ctr $TA --to-auc "$v"
done
run "bench ctr --to-auc 0.5: runs" 0 "time to AUC 0.5000" "$PLUMB" bench ctr $TA --to-auc 0.5
# plumb bench gpt / resnet: every list entry and option checked before anything runs, each
# message naming its own option once (a bad --precision entry ran the entries before it and
# said "fp64: bench gpt: --precision"; --golden-preset was named --preset; a negative
# --peak-tflops was taken as 0; "bench resnet: bench resnet: --lr")
BG="--preset gpt-tiny --steps 1 --warmup 0 --batch 2"
run "bench gpt --precision fp32,fp64: exit 2 before measuring fp32" 2 "^plumb bench gpt: --precision: 'fp64' is not one of fp32\|bf16\|fp16$" "$PLUMB" bench gpt $BG --precision fp32,fp64
grep -q "tokens/s" "$TMP/out" && fail "bench gpt --precision fp32,fp64 measured fp32 first" "$(head -3 "$TMP/out")" || ok "bench gpt --precision fp32,fp64: nothing measured"
run "bench gpt --peak-tflops -1: exit 2" 2 "^plumb bench gpt: --peak-tflops: -1 " "$PLUMB" bench gpt $BG --peak-tflops -1
BR="--preset resnet-tiny --steps 1 --warmup 0 --leak-steps 0 --batch 4 --pool 16 --precision fp32"
run "bench resnet --golden-preset bogus: exit 2 naming --golden-preset" 2 "^plumb bench resnet: --golden-preset: .*'bogus'" "$PLUMB" bench resnet $BR --golden-steps 1 --golden-preset bogus
run "bench resnet --lr -1: exit 2, named once" 2 "^plumb bench resnet: --lr: -1 is out of range" "$PLUMB" bench resnet $BR --lr -1
run "bench ctr --batch 4000000: exit 2 naming --batch (not the --micro-shard it sets)" 2 "^plumb bench ctr: --batch: '4000000' is not a batch size in 1\.\.1000000" \
  "$PLUMB" bench ctr --device cpu --preset ctr-tiny --rows 1000 --steps 1 --warmup 0 --leak-steps 0 --precision fp32 --batch 4000000 --pool 4000000
# --first past the generators' index range: synth-tokens' chain has 2^42 positions (a later
# one repeated position 0 on: silently the same tokens), synth-criteo's index is a long
# (first + rows overflowed it)
run "synth-tokens --first 4398046511099 --tokens 10: exit 2 naming both" 2 "^plumb data: --first 4398046511099 and --tokens 10: .*2\^42" \
  "$PLUMB" data synth-tokens --first 4398046511099 --tokens 10 --vocab 256 --out "$TMP/f17.bin"
run "synth-tokens at the chain's last positions: runs" 0 "wrote 10 synthetic tokens" "$PLUMB" data synth-tokens --first 4398046511094 --tokens 10 --vocab 256 --out "$TMP/f17.bin"
run "synth-criteo --first 9223372036854775800 --rows 10: exit 2 naming both" 2 "^plumb data: --first 9223372036854775800 and --rows 10: " \
  "$PLUMB" data synth-criteo --first 9223372036854775800 --rows 10 --out "$TMP/f17.tsv"
run "bench ctr --lr -1: exit 2, named once" 2 "^plumb bench ctr: --lr: -1 is out of range" "$PLUMB" bench ctr --device cpu --preset ctr-tiny --rows 1000 --steps 1 --warmup 0 --leak-steps 0 --batch 256 --precision fp32 --pool 1024 --lr -1

# ---- 18. plumb data's generators: a count whose buffers need more memory than this host has
# available is exit 2 saying what it needs (was exit 3 "cannot hold ...", or the OOM killer),
# before any file is written (synth-criteo left FILE.tmp behind). Each case is run only where
# MemAvailable is below what it needs.
avail=$(awk '/^MemAvailable:/{printf "%.0f", $2 * 1024}' /proc/meminfo)
big() { awk -v a="$avail" -v n="$1" 'BEGIN{exit !(a > 0 && a < n)}'; }
if big 32000000000; then
  run "synth-criteo --rows 4000000000: exit 2 saying what it needs" 2 "^plumb data: synth-criteo: --rows 4000000000 needs [0-9.]+ GB" \
    "$PLUMB" data synth-criteo --rows 4000000000 --out "$TMP/big18.tsv"
  [ ! -e "$TMP/big18.tsv.tmp" ] && ok "synth-criteo: no temporary file left" || fail "synth-criteo left big18.tsv.tmp" ""
else skip "synth-criteo --rows 4000000000" "this host has $avail bytes available"; fi
if big 30800000000; then
  run "synth-cifar --train/--test 5000000: exit 2 saying what it needs" 2 "^plumb data: synth-cifar: --train 5000000 and --test 5000000 need [0-9.]+ GB" \
    "$PLUMB" data synth-cifar --train 5000000 --test 5000000 --out "$TMP/big18c"
else skip "synth-cifar 10 M images" "this host has $avail bytes available"; fi
if big 12884901882; then
  run "synth-tokens --tokens 2147483647: exit 2 saying what it needs" 2 "^plumb data: synth-tokens: --tokens 2147483647 needs [0-9.]+ GB" \
    "$PLUMB" data synth-tokens --tokens 2147483647 --out "$TMP/big18.bin"
else skip "synth-tokens --tokens 2147483647" "this host has $avail bytes available"; fi

# a model whose buffers for --batch (or --eval-batch) samples do not fit is exit 2 naming the
# option (was exit 3 "gpt: allocating N bytes: cpu: out of memory"; gpt2-124m --batch 64 needs
# 41.5 GB on the cpu); under a 4 GB address-space limit, so on any host (not under ASan)
if [ "${PLUMB_ASAN:-0}" != 1 ]; then
  run "resnet18 --batch 4096 beyond memory: exit 2 naming --batch" 2 "^plumb train: --batch 4096: .*do not fit" \
    bash -c 'ulimit -v 4000000; exec "$0" "$@"' "$PLUMB" train resnet --preset resnet18 --batch 4096 --steps 1 --health-interval 0 --quiet --out "$TMP/m18a"
  run "resnet-tiny --eval-batch 1000000 beyond memory: exit 2 naming --eval-batch" 2 "^plumb train: --eval-batch 1000000: .*do not fit" \
    bash -c 'ulimit -v 4000000; exec "$0" "$@"' "$PLUMB" train resnet --preset resnet-tiny --batch 4 --eval-batch 1000000 --steps 1 --health-interval 0 --quiet --out "$TMP/m18b"
else skip "model buffers beyond memory" "PLUMB_ASAN=1: no address-space limit"; fi

# ---- 19. messages that quote what was given: an empty --data as '' (it read
# "--data : not a directory"), one byte of text as "1 byte" (it read "1 bytes")
run "resnet --data '': exit 2 quoting the empty value" 2 "--data '': not a directory" "$PLUMB" train resnet --data '' --steps 1 --out "$TMP/e19a"
printf 'a' >"$TMP/one.txt"
run "gpt text: of 1 byte: exit 2, '1 byte of text'" 2 "one.txt: 1 byte of text" "$PLUMB" train gpt --preset gpt-tiny --data "text:$TMP/one.txt" --steps 1 --out "$TMP/e19b"

# ---- 20. the cpu's buffers past the host's memory, piece by piece: each allocation fits,
# their sum does not; the OOM killer ended such a run (plumb bench resnet's defaults were
# SIGKILLed on a 24 GB host while another job held memory). The cpu device now takes at most
# 90% of MemAvailable, or PLUMB_CPU_MEM_LIMIT_MB, and the run is exit 2 naming --batch. Here
# with a 1 GB limit, so the test needs no full machine (resnet18 at batch 2048: about 3 GB).
run "resnet18 --batch 2048 under PLUMB_CPU_MEM_LIMIT_MB=1000: exit 2 naming --batch" 2 \
  "^plumb train: --batch 2048: .*do not fit on cpu.*past the 1.05 GB it may take \(PLUMB_CPU_MEM_LIMIT_MB\)" \
  env PLUMB_CPU_MEM_LIMIT_MB=1000 "$PLUMB" train resnet --preset resnet18 --batch 2048 --steps 1 --health-interval 0 --quiet --out "$TMP/m20"
run "resnet-tiny under PLUMB_CPU_MEM_LIMIT_MB=1000 trains" 0 "" \
  env PLUMB_CPU_MEM_LIMIT_MB=1000 "$PLUMB" train resnet --steps 2 --health-interval 0 --quiet --out "$TMP/m20b"
run "PLUMB_CPU_MEM_LIMIT_MB=lots: exit 2 naming it" 2 "PLUMB_CPU_MEM_LIMIT_MB=lots: expected a positive number" \
  env PLUMB_CPU_MEM_LIMIT_MB=lots "$PLUMB" train resnet --steps 1 --quiet --out "$TMP/m20c"

finish
