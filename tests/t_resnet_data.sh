#!/usr/bin/env bash
# plumb data synth-cifar: writes a CIFAR-10 binary directory whose files have
# the format's sizes and the in-memory generator's images (the same data seed
# gives the same bytes), and its bad arguments exit 2 naming the option.
. "$(dirname "$0")/lib.sh"

D="$TMP/cifar"
"$PLUMB" data synth-cifar --out "$D" --train 50 --test 12 --data-seed 9 >"$TMP/o" 2>&1
if [ $? -eq 0 ] && grep -q "wrote 50 training images" "$TMP/o"; then ok "synth-cifar writes a directory"; else fail "synth-cifar" "$(cat "$TMP/o")"; fi
sizes=""
for b in 1 2 3 4 5; do sizes="$sizes $(stat -c %s "$D/data_batch_$b.bin" 2>/dev/null)"; done
[ "$sizes" = " 30730 30730 30730 30730 30730" ] && [ "$(stat -c %s "$D/test_batch.bin")" = 36876 ] \
  && ok "file sizes are whole 3073-byte records (10 per training file, 12 test)" || fail "sizes" "$sizes / $(stat -c %s "$D/test_batch.bin")"
[ "$(wc -l < "$D/batches.meta.txt")" = 10 ] && ok "batches.meta.txt names 10 classes" || fail "meta" "$(cat "$D/batches.meta.txt")"
# labels are the first byte of each record, all in 0..9
lab=$(od -An -tu1 -w3073 -v "$D/test_batch.bin" | awk '{print $1}' | sort -u | tr '\n' ' ')
bad=$(od -An -tu1 -w3073 -v "$D/test_batch.bin" | awk '$1 > 9' | wc -l)
[ "$bad" = 0 ] && ok "labels in 0..9 ($lab)" || fail "labels" "$lab"
# same seed: same bytes; another seed: other images
"$PLUMB" data synth-cifar --out "$TMP/c2" --train 50 --test 12 --data-seed 9 >/dev/null 2>&1
"$PLUMB" data synth-cifar --out "$TMP/c3" --train 50 --test 12 --data-seed 10 >/dev/null 2>&1
cmp -s "$D/data_batch_3.bin" "$TMP/c2/data_batch_3.bin" && ! cmp -s "$D/data_batch_3.bin" "$TMP/c3/data_batch_3.bin" \
  && ok "a pure function of the data seed" || fail "seed" "same seed differs or another seed matches"
# the directory trains as DIR and as cifar:DIR, to the same parameters
G="--numerics golden --steps 2 --batch 8 --train-samples 40 --eval-samples 10 --eval-batch 10 --quiet --param-digest --health-interval 0 --threads 1"
"$PLUMB" train resnet --preset resnet-tiny $G --data "$D" --out "$TMP/r1" >"$TMP/r1.out" 2>&1; r1=$?
"$PLUMB" train resnet --preset resnet-tiny $G --data "cifar:$D" --out "$TMP/r2" >"$TMP/r2.out" 2>&1; r2=$?
d1=$(awk '/^param_digest/{print $2}' "$TMP/r1.out"); d2=$(awk '/^param_digest/{print $2}' "$TMP/r2.out")
[ $r1 = 0 ] && [ $r2 = 0 ] && [ -n "$d1" ] && [ "$d1" = "$d2" ] && ok "--data DIR and --data cifar:DIR train alike ($d1)" \
  || fail "cifar:DIR" "rc $r1/$r2 digests '$d1' '$d2': $(tail -2 "$TMP/r2.out")"
expect_exit "--data cifar:MISSING: exit 2" 2 "$PLUMB" train resnet --preset resnet-tiny --data "cifar:$TMP/none" --steps 1 --out "$TMP/r3"
grep -q "$TMP/none: not a directory" "$TMP/err" && ok "names the directory" || fail "cifar:MISSING message" "$(cat "$TMP/err")"
expect_exit "synth-cifar without --out: exit 2" 2 "$PLUMB" data synth-cifar --train 10
grep -q "\-\-out DIR is required" "$TMP/err" && ok "names --out" || fail "--out message" "$(cat "$TMP/err")"
expect_exit "synth-cifar --train 0: exit 2" 2 "$PLUMB" data synth-cifar --out "$TMP/c4" --train 0
grep -q "\-\-train" "$TMP/err" && ok "names --train" || fail "--train message" "$(cat "$TMP/err")"
expect_exit "synth-cifar --help: exit 0" 0 "$PLUMB" data synth-cifar --help
grep -q "data_batch_1.bin" "$TMP/out" && grep -q "\-\-data-seed" "$TMP/out" && ok "help lists the files and options" || fail "help" "$(head -5 "$TMP/out")"
finish
