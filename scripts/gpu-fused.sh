#!/usr/bin/env bash
# The fused sparse SGD's exact semantics on the GPU host (from the folder
# scripts/gpu-prep.sh fills; the suite runs before it): plumb train ctr on
# cuda with injected non-finite steps (skipped: the fused rows put back), the
# fused backward (default) against --fuse-sparse-sgd no, and --graph off
# (--inject turns graphs off in any case: graphed_steps 0): every digest must
# be equal, and results.json counts the fused steps. Writes $OUT/fused/.
set -u
. "$(dirname "$0")/gpu-topic.sh" fused
K="--preset dlrm-kaggle --device cuda --train-samples 1048576 --eval-samples 65536 --health-interval 0 --param-digest --optimizer sgd"
dg() { awk '/^param_digest/{print $2}' "$1" 2>/dev/null; }
fails=0
for cfg in bf16:32768:120 fp32:2048:400; do
  IFS=: read -r pr bs n <<<"$cfg"
  inj="nan@$((n / 2)),nan@$((n / 2 + 1))"
  for v in fused:auto:on unfused:no:on fused-off:auto:off; do
    IFS=: read -r name f g <<<"$v"
    timeout 60 $P train ctr $K --precision "$pr" --batch "$bs" --steps "$n" --inject "$inj" --fuse-sparse-sgd "$f" \
      --graph "$g" --out "$D/$pr-$name" >"$D/$pr-$name.out" 2>&1
    echo "$pr $name (--fuse-sparse-sgd $f --graph $g --inject $inj): exit $? digest $(dg "$D/$pr-$name.out")" \
      "skipped $(jq -r '.train.skipped_steps' "$D/$pr-$name/results.json" 2>/dev/null)" \
      "fused_steps $(jq -r '.train.fused_steps' "$D/$pr-$name/results.json" 2>/dev/null)" \
      "graphed_steps $(jq -r '.train.graphed_steps' "$D/$pr-$name/results.json" 2>/dev/null)"
  done
  a=$(dg "$D/$pr-fused.out"); b=$(dg "$D/$pr-unfused.out"); c=$(dg "$D/$pr-fused-off.out")
  if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then echo "ok   $pr: fused = unfused = graph off, with 2 skipped steps"
  else echo "FAIL $pr: fused $a unfused $b graph-off $c"; fails=$((fails + 1)); fi
done
echo "gpu-fused: $fails failed"
[ "$fails" = 0 ]
