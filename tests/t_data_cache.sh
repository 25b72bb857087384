# plumb data cache: a Criteo file parsed once into a binary cache that plumb
# train maps; training from the cache (beside the file, or named directly)
# gives the digest of training from the TSV; a stale or corrupt cache is
# refused naming the file.
. "$(dirname "$0")/lib.sh"
export OPENBLAS_CORETYPE=Haswell
"$PLUMB" data synth-criteo --rows 40000 --out "$TMP/day.tsv" >/dev/null 2>&1 || fail "synth-criteo" "no file"
A="train ctr --preset ctr-tiny --rows 1000 --steps 12 --batch 256 --threads 1 --quiet --param-digest --health-interval 0"
dg() { awk '/^param_digest/{print $2}' "$1"; }
"$PLUMB" $A --data "$TMP/day.tsv" --out "$TMP/r0" >"$TMP/r0.out" 2>&1
out=$("$PLUMB" data cache "$TMP/day.tsv" 2>&1) && [ -f "$TMP/day.tsv.plumbcache" ] && ok "data cache: $out" || fail "data cache" "$out"
[ "$(stat -c %s "$TMP/day.tsv.plumbcache")" = $((256 + 40000 * 160)) ] && ok "cache size: header + 40000 x 160 bytes" \
  || fail "cache size" "$(stat -c %s "$TMP/day.tsv.plumbcache")"
"$PLUMB" ${A/--quiet/} --data "$TMP/day.tsv" --out "$TMP/r1" >"$TMP/r1.out" 2>&1
"$PLUMB" $A --data "$TMP/day.tsv.plumbcache" --out "$TMP/r2" >"$TMP/r2.out" 2>&1
PLUMB_TRAIN_DEVFEED=1 "$PLUMB" $A --data "$TMP/day.tsv.plumbcache" --out "$TMP/r3" >"$TMP/r3.out" 2>&1
PLUMB_TRAIN_DEVFEED=1 "$PLUMB" $A --data "$TMP/day.tsv" --out "$TMP/r4" >"$TMP/r4.out" 2>&1
grep -q "from the cache" "$TMP/r1.out" && ok "--data FILE maps FILE.plumbcache" || fail "cache not used" "$(head -5 "$TMP/r1.out")"
a=$(dg "$TMP/r0.out")
for r in r1 r2; do
  [ -n "$a" ] && [ "$(dg "$TMP/$r.out")" = "$a" ] && ok "$r: training from the cache = from the TSV ($a)" \
    || fail "$r digest" "tsv '$a' cache '$(dg "$TMP/$r.out")' $(tail -2 "$TMP/$r.out")"
done
[ -n "$(dg "$TMP/r3.out")" ] && [ "$(dg "$TMP/r3.out")" = "$(dg "$TMP/r4.out")" ] && ok "device feed: cache = TSV" \
  || fail "feed digest" "$(dg "$TMP/r3.out") vs $(dg "$TMP/r4.out")"
# gzip source, eval file from a cache too
gzip -c "$TMP/day.tsv" >"$TMP/day.tsv.gz"
"$PLUMB" data synth-criteo --rows 3000 --split eval --out "$TMP/ev.tsv" >/dev/null 2>&1
"$PLUMB" $A --data "$TMP/day.tsv.gz" --eval-data "$TMP/ev.tsv" --out "$TMP/g0" >"$TMP/g0.out" 2>&1
"$PLUMB" data cache "$TMP/day.tsv.gz" >/dev/null 2>&1 && "$PLUMB" data cache "$TMP/ev.tsv" --out "$TMP/ev.plumbcache" >/dev/null 2>&1
"$PLUMB" $A --data "$TMP/day.tsv.gz" --eval-data "$TMP/ev.plumbcache" --out "$TMP/g1" >"$TMP/g1.out" 2>&1
[ -n "$(dg "$TMP/g0.out")" ] && [ "$(dg "$TMP/g0.out")" = "$(dg "$TMP/g1.out")" ] && \
  [ "$(jq .metrics.auc "$TMP/g0/results.json")" = "$(jq .metrics.auc "$TMP/g1/results.json")" ] \
  && ok "gzip source + eval file: cache = TSV, the same AUC" || fail "gz/eval cache" "$(tail -2 "$TMP/g1.out")"
# stale: the source changes after the cache was written
touch -d '2001-01-01' "$TMP/day.tsv"
out=$("$PLUMB" $A --data "$TMP/day.tsv" --out "$TMP/s" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "day.tsv.plumbcache: stale cache" && ok "stale cache refused: $(echo "$out" | tail -1 | cut -c1-100)" \
  || fail "stale cache" "rc $rc: $out"
# corrupt: a flipped byte in the samples, a cut file
"$PLUMB" data cache "$TMP/day.tsv" >/dev/null 2>&1
cp "$TMP/day.tsv.plumbcache" "$TMP/x.plumbcache"
printf '\x55' | dd of="$TMP/x.plumbcache" bs=1 seek=100000 conv=notrunc 2>/dev/null
out=$("$PLUMB" $A --data "$TMP/x.plumbcache" --out "$TMP/c" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "x.plumbcache: corrupt cache" && ok "corrupt cache refused, exit 2 (samples' checksum)" || fail "corrupt" "rc $rc: $out"
head -c 1000000 "$TMP/day.tsv.plumbcache" >"$TMP/y.plumbcache"
out=$("$PLUMB" $A --data "$TMP/y.plumbcache" --out "$TMP/c" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "y.plumbcache: corrupt cache" && ok "cut cache refused, exit 2" || fail "cut" "rc $rc: $out"
# a cache that is a directory or a FIFO: exit 2 naming it (was exit 3 "cannot map the cache:
# No such device", and a FIFO blocked in open() for ever)
mkdir -p "$TMP/d.plumbcache"; mkfifo "$TMP/f.plumbcache"
for c in d f; do
  out=$(timeout 30 "$PLUMB" $A --data "$TMP/$c.plumbcache" --out "$TMP/c$c" 2>&1); rc=$?
  [ $rc -eq 2 ] && echo "$out" | grep -q "$c.plumbcache: not a regular file" && ok "a cache that is a $([ $c = d ] && echo directory || echo FIFO): exit 2" \
    || fail "cache $c" "rc $rc: $out"
done
out=$("$PLUMB" data cache "$TMP/nonexistent.tsv" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "nonexistent.tsv" && ok "data cache of a missing file: exit 2 naming it" || fail "missing" "rc $rc: $out"
# plumb data cache's own inputs: --out must end in .plumbcache (plumb train --data knows a
# cache by that name and parsed any other as TSV: "label 'PLUMBCRC...' is not 0 or 1"); a
# cache as the source is named as one; a source without a sample writes no cache
out=$("$PLUMB" data cache "$TMP/ev.tsv" --out "$TMP/ev.cache" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q -- "--out .*ev.cache: .*\.plumbcache" && [ ! -e "$TMP/ev.cache" ] && ok "data cache --out without .plumbcache: exit 2" \
  || fail "--out suffix" "rc $rc: $out"
out=$("$PLUMB" data cache "$TMP/ev.plumbcache" --out "$TMP/ev2.plumbcache" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "ev.plumbcache: .*a plumb cache already" && ok "data cache of a cache: exit 2 naming it" \
  || fail "cache of a cache" "rc $rc: $out"
: >"$TMP/empty.tsv"; printf 'x\ty\n' >"$TMP/junk.tsv"
out=$("$PLUMB" data cache "$TMP/empty.tsv" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "empty.tsv: no samples" && [ ! -e "$TMP/empty.tsv.plumbcache" ] && ok "data cache of an empty file: exit 2, no cache" \
  || fail "empty source" "rc $rc: $out"
out=$("$PLUMB" data cache "$TMP/junk.tsv" --bad-lines skip 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "junk.tsv: no samples (1 malformed line skipped" && ok "data cache of only malformed lines (skip): exit 2" \
  || fail "all skipped" "rc $rc: $out"
finish
