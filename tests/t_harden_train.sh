# Hardening of plumb train, plumb launch and plumb data (the sweep after
# tests/t_harden.sh): inputs and cases no other test named. One block per
# defect; each block's tests of the defect failed on the build before its fix
# (its "still works" cases passed before too).
. "$(dirname "$0")/lib.sh"
Q="--quiet --health-interval 0"

# ---- 1. plumb --help: each command's line names what the command does (train said
# "(ctr)" though it trains gpt, resnet and toy; data named synth-criteo only; bench
# named the device ceilings only)
"$PLUMB" --help >"$TMP/top" 2>&1
line() { grep -E "^  $1 " "$TMP/top"; }
for w in $("$PLUMB" train --help | awk '/^  [a-z]/{print $1}'); do
  line train | grep -qw "$w" && ok "plumb --help: the train line names $w" || fail "plumb --help train line lacks $w" "$(line train)"
done
for s in $("$PLUMB" data --help | awk '/^subcommands:/{f=1;next} f&&/^  [a-z]/{print $1}'); do
  line data | grep -qw -- "$s" && ok "plumb --help: the data line names $s" || fail "plumb --help data line lacks $s" "$(line data)"
done
for w in $("$PLUMB" bench --help | awk '/^workloads:/{f=1;next} f&&/^  [a-z]/{print $1}'); do
  line bench | grep -qw -- "$w" && ok "plumb --help: the bench line names $w" || fail "plumb --help bench line lacks $w" "$(line bench)"
done

# ---- 2. a generic option the workload does not read is exit 2 naming it (each was
# ignored silently: gpt --predictions FILE wrote no file and exited 0; --max-rows and
# --bad-lines apply to ctr's Criteo lines, --eval-fraction to data files split by it)
run "gpt --predictions FILE: exit 2 naming --predictions" 2 "^plumb train: --predictions: the gpt workload does not read it" \
  "$PLUMB" train gpt $Q --steps 1 --predictions "$TMP/p2.tsv" --out "$TMP/u2a"
[ ! -e "$TMP/u2a/results.json" ] && ok "... nothing trained" || fail "gpt --predictions trained" "$(ls "$TMP/u2a")"
run "toy --predictions FILE: exit 2" 2 "^plumb train: --predictions: the toy workload" "$PLUMB" train toy $Q --steps 1 --predictions "$TMP/p2.tsv" --out "$TMP/u2b"
for w in gpt resnet toy; do
  for ov in "--max-rows 5" "--bad-lines skip"; do
    run "$w $ov: exit 2 naming ${ov% *}" 2 "^plumb train: ${ov% *}: the $w workload does not read it" "$PLUMB" train $w $Q --steps 1 $ov --out "$TMP/u2c"
  done
done
run "resnet --eval-fraction 0.2: exit 2" 2 "^plumb train: --eval-fraction: the resnet workload" "$PLUMB" train resnet $Q --steps 1 --eval-fraction 0.2 --out "$TMP/u2d"
run "toy --eval-fraction 0.2: exit 2" 2 "^plumb train: --eval-fraction: the toy workload" "$PLUMB" train toy $Q --steps 1 --eval-fraction 0.2 --out "$TMP/u2d"
"$PLUMB" train gpt --help | grep -q -- "--max-rows N .*not read by gpt" && ok "gpt --help says --max-rows is not read" \
  || fail "gpt --help --max-rows" "$("$PLUMB" train gpt --help | grep -- --max-rows)"
run "ctr still takes --max-rows and --predictions" 0 "" "$PLUMB" train ctr $Q --steps 1 --train-samples 500 --eval-samples 100 \
  --max-rows 5 --predictions "$TMP/p2c.tsv" --out "$TMP/u2e"
[ -s "$TMP/p2c.tsv" ] && ok "... and writes the predictions" || fail "ctr predictions" ""

# ---- 3. empty values that were taken as "not given": --out '' trained into a new
# runs/<UTC>-<host>-<id> (an unset variable in a script), --stop-at '' ran with no
# target and printed "did not reach val_loss  in N steps"
mkdir -p "$TMP/cwd3"
run "--out '': exit 2 naming --out" 2 "^plumb train: --out: expected a folder name" \
  bash -c 'cd "$0" && exec "$@"' "$TMP/cwd3" "$PLUMB" train toy $Q --steps 1 --out ''
[ ! -e "$TMP/cwd3/runs" ] && ok "... and no runs/ folder made" || fail "--out '' made a run folder" "$(ls -R "$TMP/cwd3" | head -5)"
run "rng --out '': exit 2 too (one run-folder rule)" 2 "^plumb rng: --out: expected a folder name" \
  bash -c 'cd "$0" && exec "$@"' "$TMP/cwd3" "$PLUMB" rng --count 1000 --out ''
run "--stop-at '': exit 2 naming --stop-at" 2 "^plumb train: --stop-at: '' \(expected a number\)" \
  "$PLUMB" train gpt $Q --steps 1 --stop-at '' --out "$TMP/s3a"
[ ! -e "$TMP/s3a/results.json" ] && ok "... before anything trains" || fail "--stop-at '' trained" ""

# ---- 4. --resume with --steps at or below the checkpoint's step: below it trained nothing
# and reported the checkpoint's model (step 3) as a run of --steps 2, exit 0, "trained ctr
# ctr-tiny: 3 steps, 0 samples/s, loss nan -> nan"; at it, the same nan line
C="--train-samples 500 --eval-samples 100"
"$PLUMB" train ctr $Q $C --steps 3 --checkpoint-dir "$TMP/ck4" --out "$TMP/r4a" >/dev/null 2>&1
run "--resume --steps 2 from a step-3 checkpoint: exit 2 naming --steps and the step" 2 \
  "^plumb train: --steps 2: the newest checkpoint in .*ck4 is at step 3, past it" \
  "$PLUMB" train ctr $Q $C --steps 2 --checkpoint-dir "$TMP/ck4" --resume --out "$TMP/r4b"
[ "$(jq -r '.checks[0].status' "$TMP/r4b/results.json" 2>/dev/null)" = fail ] && ok "... results.json records the check as fail" \
  || fail "resume past --steps results" "$(head -c 300 "$TMP/r4b/results.json" 2>&1)"
run "--resume auto --steps 2 from a step-3 checkpoint: exit 2 too" 2 "^plumb train: --steps 2: " \
  "$PLUMB" train ctr $Q $C --steps 2 --checkpoint-dir "$TMP/ck4" --resume auto --out "$TMP/r4c"
run "--resume --steps 3 from a step-3 checkpoint: exit 0, evaluation only, no nan loss" 0 \
  "trained ctr ctr-tiny: 0 steps \(resumed at step 3 of 3: evaluation only\)" \
  "$PLUMB" train ctr $Q $C --steps 3 --checkpoint-dir "$TMP/ck4" --resume --out "$TMP/r4d"
# whole words only, the run folder's line apart: mktemp's random letters may spell "nan"
grep -v "^run folder: " "$TMP/out" | grep -qw "nan" && fail "resumed at --steps prints a nan loss" "$(head -2 "$TMP/out")" || ok "... no 'nan' in the summary"

# ---- 5. files read whole (file_read_all): a FIFO with no writer hung the run (gpt --data
# text:FIFO; a FIFO named like a checkpoint hung --resume), a device was read until memory
# ran out (text:/dev/zero, --health-thresholds and --init-from /dev/zero: exit 3 "out of
# memory" under a 4 GB limit, the OOM killer without one); --health-thresholds was named
# --thresholds (plumb health's option)
mkfifo "$TMP/fifo5"
lim() { timeout 60 bash -c "ulimit -v $VMEM; exec \"\$0\" \"\$@\"" "$@"; }
run "gpt --data text:FIFO with no writer: exit 2, no hang" 2 "fifo5: 0 bytes of text" lim "$PLUMB" train gpt $Q --steps 1 --data "text:$TMP/fifo5" --out "$TMP/f5a"
run "gpt --data text:/dev/zero: exit 2, a device" 2 "^plumb train: /dev/zero: is a device, not a regular file" \
  lim "$PLUMB" train gpt $Q --steps 1 --data text:/dev/zero --out "$TMP/f5b"
run "--health-thresholds /dev/zero: exit 2 naming --health-thresholds" 2 "^plumb train: --health-thresholds: /dev/zero: not a regular file" \
  lim "$PLUMB" train toy $Q --steps 1 --health-thresholds /dev/zero --out "$TMP/f5c"
run "gpt --init-from /dev/zero: exit 2" 2 "^plumb train: --init-from: /dev/zero: is a device" \
  lim "$PLUMB" train gpt $Q --steps 1 --init-from /dev/zero --out "$TMP/f5d"
run "health --thresholds /dev/zero: exit 2 naming --thresholds" 2 "^plumb health: --thresholds: /dev/zero: not a regular file" \
  lim "$PLUMB" health --thresholds /dev/zero
printf 'hello plumb, a text read through a pipe\n%.0s' $(seq 20) >"$TMP/t5.txt"
run "gpt --data text:<(pipe) still trains" 0 "trained gpt" \
  bash -c '"$0" train gpt --quiet --health-interval 0 --steps 1 --data "text:/dev/fd/3" --out "$1" 3< <(cat "$2")' "$PLUMB" "$TMP/f5e" "$TMP/t5.txt"
C="--train-samples 500 --eval-samples 100"
"$PLUMB" train ctr $Q $C --steps 2 --checkpoint-dir "$TMP/ck5" --out "$TMP/f5f" >/dev/null 2>&1
mkfifo "$TMP/ck5/ckpt-0000000009.plumb"; ln -s /dev/zero "$TMP/ck5/ckpt-0000000008.plumb"
run "--resume past a FIFO and a /dev/zero link named like checkpoints: resumes from the real one" 0 "trained ctr ctr-tiny: 4 steps" \
  lim "$PLUMB" train ctr --health-interval 0 $C --steps 4 --checkpoint-dir "$TMP/ck5" --resume --out "$TMP/f5g"
grep -q "ckpt-0000000008.plumb: is a device" "$TMP/err" && ok "... the /dev/zero one reported as a device" || fail "device checkpoint message" "$(grep unusable "$TMP/err")"

# ---- 6. plumb launch: --run-dir '', a file or a folder that cannot be made was exit 3
# ("mkdir : No such file or directory"), an input error; a negative --stop-grace was taken
# as 0 (never SIGKILL); "plumb launch: launch: cannot run" named itself twice
touch "$TMP/file6"
run "launch --run-dir '': exit 2 naming --run-dir" 2 "^plumb launch: --run-dir: expected a folder name" "$PLUMB" launch --run-dir '' -- true
run "launch --run-dir FILE: exit 2" 2 "^plumb launch: --run-dir .*file6: exists and is not a directory" "$PLUMB" launch --run-dir "$TMP/file6" -- true
run "launch --run-dir that cannot be made: exit 2" 2 "^plumb launch: --run-dir /proc/nope: cannot create it" "$PLUMB" launch --run-dir /proc/nope -- true
run "launch --stop-grace -5: exit 2 naming it" 2 "^plumb launch: --stop-grace: -5" "$PLUMB" launch --run-dir "$TMP/l6a" --stop-grace -5 -- true
[ ! -e "$TMP/l6a/launch.jsonl" ] && ok "... nothing launched" || fail "--stop-grace -5 launched" "$(cat "$TMP/l6a/launch.jsonl")"
run "launch of a missing command: named once" 2 "^plumb launch: cannot run '/nonexistent/cmd'" "$PLUMB" launch --run-dir "$TMP/l6b" -- /nonexistent/cmd
mkdir -p "$TMP/cwd6"
run "launch with no --run-dir still makes runs/launch-<UTC>" 0 "" bash -c 'cd "$0" && exec "$@"' "$TMP/cwd6" "$PLUMB" launch -- true
ls "$TMP"/cwd6/runs/launch-*/launch.jsonl >/dev/null 2>&1 && ok "... with its launch.jsonl" || fail "default run dir" "$(ls -R "$TMP/cwd6")"

# ---- 7. a NaN loss in fixed point: gpt --lr 1e30 diverged, yet its eval read val_loss 0,
# perplexity 1 and the check passed (each position's NaN loss became INT64_MIN, 16384 of
# them summed to 0), and the skipped steps' loss read -134217728 (llrint of NaN)
run "gpt --lr 1e30: the check fails on the non-finite val_loss (exit 1)" 1 "check train-gpt: fail: eval val_loss is not finite" \
  "$PLUMB" train gpt $Q --lr 1e30 --steps 3 --out "$TMP/n7"
[ "$(jq -r '.val_loss' "$TMP/n7/results.json" 2>/dev/null)" = null ] && ok "... results.json: val_loss null" \
  || fail "gpt diverged val_loss" "$(jq -c '{val_loss, perplexity}' "$TMP/n7/results.json" 2>&1)"
[ "$(grep '"type":"step"' "$TMP/n7/checks/train-gpt/metrics.jsonl" | jq -r '.loss | type' | tr '\n' ' ')" = "number null null " ] \
  && ok "... the diverged steps' loss is null in metrics.jsonl (not -134217728)" \
  || fail "diverged step losses" "$(grep '"type":"step"' "$TMP/n7/checks/train-gpt/metrics.jsonl" | jq -c '[.step, .loss]' | tr '\n' ' ')"

# ---- 8. --health-interval 1e300: the health sampler's deadline ((time_t)1e300) came out in
# the past, so it sampled without pause holding its lock, and step 0 waited on that lock
# until the watchdog ended the run (exit 124 after --watchdog-timeout; SIGTERM did not help)
run "train --health-interval 1e300: trains (the sampler waits, not spins)" 0 "check train-toy: pass" \
  timeout 120 "$PLUMB" train toy --quiet --health-interval 1e300 --watchdog-timeout 30 --steps 2 --out "$TMP/h8"

# ---- 9. a huge --steps (run until --stop-at or SIGTERM): the summary's loss ring held
# steps / 10 doubles, so --steps 99999999999 was exit 3 "out of memory for 9999999999
# losses" before step 0 (and --steps 1e9 took 800 MB); now at most 10000
run "ctr --steps 99999999999 --stop-at 0 --eval-every 2: trains and stops at step 2" 0 "reached auc 0 at step 2" \
  bash -c "ulimit -v $VMEM; exec \"\$0\" \"\$@\"" "$PLUMB" train ctr $Q --train-samples 500 --eval-samples 100 \
  --steps 99999999999 --stop-at 0 --eval-every 2 --out "$TMP/b9"

# ---- 10. an output path that is a device or a FIFO: every output is written to a
# temporary file renamed over the path, so it was replaced by a regular file (as root,
# plumb data synth-criteo --out /dev/null left /dev/null a regular file). Here on a
# device node and a FIFO of our own (the null device's numbers 1,3; mknod needs root)
mkfifo "$TMP/fifo10"
run "synth-tokens --out FIFO: exit 2, the FIFO kept" 2 "^plumb data: --out .*fifo10: a FIFO, not a regular file" \
  "$PLUMB" data synth-tokens --tokens 10 --out "$TMP/fifo10"
[ -p "$TMP/fifo10" ] && ok "... still a FIFO" || fail "synth-tokens replaced the FIFO" "$(ls -l "$TMP/fifo10")"
if [ "$(id -u)" = 0 ] && mknod -m 666 "$TMP/null10" c 1 3 2>/dev/null; then
  ln -s "$TMP/null10" "$TMP/nlink10"
  run "synth-criteo --out DEVICE: exit 2" 2 "^plumb data: --out .*null10: a character device" "$PLUMB" data synth-criteo --rows 10 --out "$TMP/null10"
  run "synth-criteo --out a link to a device: exit 2" 2 "^plumb data: --out .*nlink10: a character device" "$PLUMB" data synth-criteo --rows 10 --out "$TMP/nlink10"
  run "train --predictions DEVICE: exit 2 before training" 2 "^plumb train: --predictions .*null10: a character device" \
    "$PLUMB" train ctr $Q --steps 1 --train-samples 500 --eval-samples 100 --predictions "$TMP/null10" --out "$TMP/p10"
  [ -c "$TMP/null10" ] && [ -L "$TMP/nlink10" ] && ok "... the device node and the link kept" || fail "device replaced" "$(ls -l "$TMP/null10" "$TMP/nlink10")"
else skip "outputs over a device node" "needs root for mknod"; fi

# ---- 11. ctr --eval-data FILE with synthetic --data: the file was ignored and the eval
# ran on the teacher's split (gpt, resnet and toy refuse it)
"$PLUMB" data synth-criteo --rows 600 --out "$TMP/e11.tsv" >/dev/null 2>&1
run "ctr --eval-data FILE on synthetic data: exit 2 naming --eval-data" 2 "^plumb train: --eval-data .*e11.tsv: synthetic data has its own eval split" \
  "$PLUMB" train ctr $Q --steps 1 --train-samples 500 --eval-samples 100 --eval-data "$TMP/e11.tsv" --out "$TMP/e11a"
run "ctr --data FILE --eval-data FILE still trains" 0 "\(600 samples\)" \
  "$PLUMB" train ctr $Q --steps 1 --data "$TMP/e11.tsv" --eval-data "$TMP/e11.tsv" --out "$TMP/e11b"

# ---- 12. a token file of one byte: "1 byte", not "1 bytes" (as section 19 of
# tests/t_harden.sh made text: say)
printf 'x' >"$TMP/one12.bin"
run "gpt --data of a 1-byte token file: '1 byte'" 2 "one12.bin: truncated token file: 1 byte \(expected" \
  "$PLUMB" train gpt $Q --steps 1 --data "$TMP/one12.bin" --out "$TMP/o12"

# ---- 13. a resume with other training data windows or augmentation: resnet --augment and
# gpt --windows were not part of the configuration a checkpoint records, so a checkpoint
# of resnet-tiny (no augmentation) resumed with --augment yes, gpt-tiny (shifted windows)
# with --windows fixed: a run that is neither (golden digests no longer reproducible)
"$PLUMB" train resnet $Q --steps 1 --checkpoint-dir "$TMP/ck13r" --out "$TMP/a13" >/dev/null 2>&1
run "resnet-tiny resumed with --augment yes: exit 2 naming it" 2 "another configuration: model is .*augmented \(--augment yes\) here" \
  "$PLUMB" train resnet $Q --steps 2 --augment yes --checkpoint-dir "$TMP/ck13r" --resume --out "$TMP/a13b"
run "... with its own --augment no: resumes" 0 "trained resnet resnet-tiny: 2 steps" \
  "$PLUMB" train resnet $Q --steps 2 --augment no --checkpoint-dir "$TMP/ck13r" --resume --out "$TMP/a13c"
"$PLUMB" train gpt $Q --steps 1 --checkpoint-dir "$TMP/ck13g" --out "$TMP/a13d" >/dev/null 2>&1
run "gpt-tiny resumed with --windows fixed: exit 2 naming it" 2 "another configuration: model is .*fixed windows \(--windows fixed\) here" \
  "$PLUMB" train gpt $Q --steps 2 --windows fixed --checkpoint-dir "$TMP/ck13g" --resume --out "$TMP/a13e"

# ---- 14. --help: every option's default once (--allow-cpu-fallback read "(default: exit 2)
# (default: off)", --allow-tf32 "(default: strict fp32) (default: off)")
for w in ctr gpt resnet toy; do
  d=$("$PLUMB" train $w --help | grep -E "\(default: [^)]*\) \(default:")
  [ -z "$d" ] && ok "train $w --help: no option with two defaults" || fail "train $w --help: two defaults" "$d"
done

# ---- 15. a mapped data file cut short while plumb train reads it: gpt's token files and
# ctr's Criteo cache are memory-mapped, and a read of a page past the new end raised
# SIGBUS: the run died with "Bus error" (exit 135) and nothing naming the file. Now the
# read is guarded (src/core/mapguard.h): exit 3 naming the file, through the trainer's
# error path (the host loader's thread, or the device feed's build threads), and the
# checkpoints written before stay and resume.
# cut15 OUT FILE SIZE CMD...: runs CMD --out OUT in the background until its first step is
# in metrics.jsonl and a checkpoint (when CMD writes them to OUT.ck) is on disk, cuts FILE
# to SIZE bytes in place, and waits; the exit status in rc15, the output in OUT.log
cut15() {
  local out=$1 file=$2 size=$3; shift 3
  timeout 300 "$@" --out "$out" >"$out.log" 2>&1 & local pid=$! i
  for i in $(seq 3000); do
    kill -0 $pid 2>/dev/null || break
    grep -qs '"type":"step"' "$out"/checks/train-*/metrics.jsonl \
      && { [ ! -d "$out.ck" ] || ls "$out.ck"/ckpt-*.plumb >/dev/null 2>&1; } && break
    sleep 0.05
  done
  truncate -s "$size" "$file"
  wait $pid; rc15=$?
}
"$PLUMB" data synth-tokens --tokens 2000000 --vocab 256 --out "$TMP/t15.bin" >/dev/null 2>&1 || fail "synth-tokens for 15" ""
G15="train gpt --preset gpt-tiny $Q --steps 100000"
cp "$TMP/t15.bin" "$TMP/g15.bin"; mkdir -p "$TMP/g15.ck"
cut15 "$TMP/g15" "$TMP/g15.bin" 4096 "$PLUMB" $G15 --data "tokens:$TMP/g15.bin" --checkpoint-dir "$TMP/g15.ck" --checkpoint-every 2
[ $rc15 -eq 3 ] && grep -q "^plumb train: data loader: $TMP/g15.bin: token file shrank while being read (4001024 bytes when opened, 4096 bytes now" "$TMP/g15.log" \
  && ok "gpt: token file cut mid-run: exit 3 naming it ($(cut -c1-90 "$TMP/g15.log" | tail -1)...)" \
  || fail "gpt token file cut mid-run" "exit $rc15 (135: SIGBUS): $(tail -c 400 "$TMP/g15.log")"
last=$(ls "$TMP/g15.ck" | sed -nE 's/^ckpt-0*([0-9]+)\.plumb$/\1/p' | sort -n | tail -1)
cp "$TMP/t15.bin" "$TMP/g15.bin"
run "... the checkpoints before the cut stay: resumed at step ${last:-none} with the file restored" 0 "trained gpt gpt-tiny: $((${last:-0} + 1)) steps" \
  "$PLUMB" train gpt --preset gpt-tiny $Q --steps $((${last:-0} + 1)) --data "tokens:$TMP/g15.bin" --checkpoint-dir "$TMP/g15.ck" --resume --out "$TMP/g15r"
cp "$TMP/t15.bin" "$TMP/g15f.bin"
PLUMB_TRAIN_DEVFEED=1 cut15 "$TMP/g15f" "$TMP/g15f.bin" 4096 "$PLUMB" $G15 --data "tokens:$TMP/g15f.bin"
[ $rc15 -eq 3 ] && grep -q "^plumb train: $TMP/g15f.bin: token file shrank while being read" "$TMP/g15f.log" \
  && ok "gpt, device feed (PLUMB_TRAIN_DEVFEED=1): exit 3 naming the file" \
  || fail "gpt device feed cut" "exit $rc15: $(tail -c 400 "$TMP/g15f.log")"
"$PLUMB" data synth-criteo --rows 40000 --out "$TMP/d15.tsv" >/dev/null 2>&1 && "$PLUMB" data cache "$TMP/d15.tsv" --out "$TMP/d15.plumbcache" >/dev/null 2>&1 \
  || fail "a cache for 15" ""
C15="train ctr --preset ctr-tiny $Q --threads 2 --batch 256 --steps 100000"
for feed in 0 1; do
  cp "$TMP/d15.plumbcache" "$TMP/c15$feed.plumbcache"
  PLUMB_TRAIN_DEVFEED=$feed cut15 "$TMP/c15$feed" "$TMP/c15$feed.plumbcache" 100000 "$PLUMB" $C15 --data "$TMP/c15$feed.plumbcache"
  [ $rc15 -eq 3 ] && grep -q "^plumb train: .*$TMP/c15$feed.plumbcache: Criteo cache shrank while being read (6400256 bytes when opened, 100000 bytes now" "$TMP/c15$feed.log" \
    && ok "ctr: cache cut mid-run ($([ $feed = 1 ] && echo device feed || echo host loader)): exit 3 naming it" \
    || fail "ctr cache cut mid-run (feed $feed)" "exit $rc15 (135: SIGBUS): $(tail -c 400 "$TMP/c15$feed.log")"
done

# ---- 16. options that shape another option, given without it: --checkpoint-every 1 with no
# --checkpoint-dir trained without writing a checkpoint (exit 0: a run believed resumable),
# --lr-min with the constant schedule never decayed, --lr-step-every/--lr-step-gamma without
# --schedule step the same. Now exit 2 naming the option and what it needs.
for ov in "--checkpoint-every 1:--checkpoint-dir DIR" "--checkpoint-keep 2:--checkpoint-dir DIR" \
          "--lr-min 0.01:--schedule cosine; the schedule here is constant" "--lr-step-every 10:--schedule step; the schedule here is constant" \
          "--lr-step-gamma 0.5 --schedule cosine:--schedule step; the schedule here is cosine"; do
  o=${ov%%:*}; need=${ov#*:}
  run "toy $o: exit 2, applies only with ${need%%;*}" 2 "^plumb train: ${o%% *} applies only with $need" \
    "$PLUMB" train toy $Q --steps 1 $o --out "$TMP/o16"
done
[ ! -e "$TMP/o16/results.json" ] && ok "... before anything trains" || fail "an option without its partner trained" "$(ls "$TMP/o16")"
run "--checkpoint-every 1 with --checkpoint-dir: checkpoints" 0 "" "$PLUMB" train toy $Q --steps 2 --checkpoint-every 1 --checkpoint-dir "$TMP/ck16" --out "$TMP/o16b"
ls "$TMP"/ck16/ckpt-*.plumb >/dev/null 2>&1 && ok "... and the checkpoint is written" || fail "no checkpoint in ck16" "$(ls "$TMP/ck16" 2>&1)"
run "gpt's preset --lr-min (cosine) given again: trains" 0 "trained gpt" "$PLUMB" train gpt $Q --steps 1 --lr-min 0.001 --out "$TMP/o16c"

# ---- 17. a --checkpoint-dir so long that its checkpoint files' names do not fit a path
# (PATH_MAX): accepted, the whole run trained, then its first checkpoint write failed (exit 3,
# "writing checkpoint ...: create ..." cut short). Now exit 2 naming --checkpoint-dir before
# anything is created or trained.
long17=$(python3 -c "
import sys
s = sys.argv[1] + '/L17'
while len(s) < 4068: s += '/' + 'p' * min(200, max(1, 4068 - len(s) - 1))
print(s)" "$TMP")
run "--checkpoint-dir of ${#long17} bytes: exit 2, its checkpoint names would not fit" 2 \
  "^plumb train: --checkpoint-dir: path .* is too long: its checkpoint files' names \([0-9]+ bytes\) would not fit a path" \
  "$PLUMB" train toy $Q --steps 1 --checkpoint-dir "$long17" --out "$TMP/o17"
[ ! -e "$TMP/L17" ] && [ "$(jq -r '.checks[0].status' "$TMP/o17/results.json" 2>/dev/null)" = fail ] \
  && ok "... nothing created under it, results.json records the failed check" || fail "long --checkpoint-dir" "$(ls "$TMP" | head; jq -c '.checks' "$TMP/o17/results.json" 2>&1 | head -c 200)"

# ---- 18. plumb data synth-criteo's temporary file had one name for every writer (F.tmp): two
# runs writing --out F at once wrote into one file, the first rename moved it while the other
# still wrote; the run that printed "wrote 30000 rows" exit 0 left F with 40000 lines of both
# seeds. A failed write said "writing F failed" with no reason. Now each writer its own
# F.tmp.<pid> (the final F is one whole file), and the error names the reason.
"$PLUMB" data synth-criteo --rows 40000 --data-seed 1 --out "$TMP/s18a.tsv" >/dev/null 2>&1
"$PLUMB" data synth-criteo --rows 30000 --data-seed 2 --out "$TMP/s18b.tsv" >/dev/null 2>&1
"$PLUMB" data synth-criteo --rows 40000 --data-seed 1 --out "$TMP/s18.tsv" >"$TMP/s18_1.out" 2>&1 & p1=$!
"$PLUMB" data synth-criteo --rows 30000 --data-seed 2 --out "$TMP/s18.tsv" >"$TMP/s18_2.out" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
h=$(md5sum <"$TMP/s18.tsv" 2>/dev/null)
[ $r1 = 0 ] && [ $r2 = 0 ] && { [ "$h" = "$(md5sum <"$TMP/s18a.tsv")" ] || [ "$h" = "$(md5sum <"$TMP/s18b.tsv")" ]; } \
  && [ -z "$(ls "$TMP" | grep '^s18\.tsv\.tmp')" ] \
  && ok "two synth-criteo --out F at once: both exit 0, F is one writer's whole file, no temp left" \
  || fail "concurrent synth-criteo" "exit $r1/$r2, $(wc -l <"$TMP/s18.tsv") lines, $(ls "$TMP" | grep '^s18'): $(cat "$TMP/s18_1.out" "$TMP/s18_2.out" | head -c 300)"
run "synth-criteo past a file size limit: exit 3 with the reason" 3 "^plumb data: synth-criteo: writing .*f18.tsv failed: File too large" \
  bash -c 'trap "" XFSZ; ulimit -f 100; exec "$0" "$@"' "$PLUMB" data synth-criteo --rows 10000 --out "$TMP/f18.tsv"
[ -z "$(ls "$TMP" | grep '^f18')" ] && ok "... nothing left behind" || fail "synth-criteo left files" "$(ls "$TMP" | grep '^f18')"
# SIGTERM in the middle of the write left F.tmp.<pid> behind: now it is removed, F is not
# written, and the process ends by the signal (exit 143 in the shell)
"$PLUMB" data synth-criteo --rows 20000000 --out "$TMP/k18.tsv" >/dev/null 2>"$TMP/e_k18.txt" & pk=$!
for _ in $(seq 50); do [ -n "$(ls "$TMP" | grep '^k18\.tsv\.tmp')" ] && break; sleep 0.1; done
sleep 0.3; kill -TERM $pk; wait $pk; rk=$?
[ $rk = 143 ] && [ -z "$(ls "$TMP" | grep '^k18')" ] && grep -q "SIGTERM: stopped, .*k18.tsv not written" "$TMP/e_k18.txt" \
  && ok "synth-criteo killed by SIGTERM: no temp file, no F, ended by the signal" \
  || fail "synth-criteo and SIGTERM" "exit $rk, left: $(ls "$TMP" | grep '^k18'): $(head -c 300 "$TMP/e_k18.txt")"

# a run SIGKILLed mid-training could not finish its runs[] entry: the next command in the
# folder marks it "killed" (its pid is gone on this host) and names itself as the run that
# noticed; a live run's entry is left "running"
"$PLUMB" train toy --steps 4000000 --quiet --health-interval 0 --out "$TMP/kr" >"$TMP/kr1.txt" 2>&1 &
kp=$!
for _ in $(seq 1 100); do [ -f "$TMP/kr/results.json" ] && break; sleep 0.1; done
"$PLUMB" train toy --steps 3 --quiet --health-interval 0 --out "$TMP/kr" >"$TMP/kr2.txt" 2>&1; r2=$?
kill -KILL $kp 2>/dev/null; wait $kp 2>/dev/null
"$PLUMB" train toy --steps 3 --quiet --health-interval 0 --out "$TMP/kr" >"$TMP/kr3.txt" 2>&1; r3=$?
python3 - "$TMP/kr/results.json" "$kp" >"$TMP/kr.py" 2>&1 <<'PY'
import json, sys
runs = {r["run"]: r for r in json.load(open(sys.argv[1]))["runs"]}
assert runs[1]["pid"] == int(sys.argv[2]), runs[1]
assert runs[1]["status"] == "killed" and runs[1]["noted_by_run"] == 3, runs[1]
assert runs[2]["status"] == "finished" and runs[3]["status"] == "finished", runs
assert all(r["host"] for r in runs.values()), runs
PY
[ $? -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ] \
  && ok "a SIGKILLed run's entry: left running while it lived, marked killed by the next command" \
  || fail "killed run entry" "exit $r2/$r3: $(cat "$TMP/kr.py")"

finish
