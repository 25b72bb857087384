# The include graph keeps the layers of docs/HACKING.md ("Layers"): each
# directory of src/ includes only the directories below it. Read from the
# `#include "dir/..."` lines of every source file; a violation names the file,
# the line and what the directory may include. The checker is first run on a
# small tree with known violations, so it cannot pass by finding nothing.
. "$(dirname "$0")/lib.sh"

# dir: the directories its files may include (itself implied). Directories not
# listed (accept, cli) may include any but cli/. train/ never includes a
# workload (models/ implements train/model.h, not the other way round).
ALLOWED="core:
dev:core
gpu:core dev
comm:core dev
health:core dev
report:core dev health
train:core dev comm health
models:core dev train
faults:core dev train"

# check_tree SRC: prints one line per violation
check_tree() {
  local src=$1
  grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$src" --include='*.c' --include='*.h' \
      --include='*.cu' --include='*.cuh' 2>/dev/null |
  while IFS= read -r hit; do
    local file rest line text rel dir inc rule
    file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; text=${rest#*:}
    rel=${file#"$src"/}; dir=${rel%%/*}
    inc=$(echo "$text" | sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([a-z_]+)\/.*/\1/')
    [ "$inc" = "$dir" ] && continue
    rule=$(echo "$ALLOWED" | awk -F: -v d="$dir" '$1 == d {print $2 "|"}')
    if [ -n "$rule" ]; then
      rule=${rule%|}
      case " $rule " in *" $inc "*) ;; *) echo "src/$rel:$line: $dir/ includes $inc/ (${dir}/ may include: ${rule:-nothing but itself})";; esac
    elif [ "$inc" = cli ] && [ "$dir" != cli ]; then
      echo "src/$rel:$line: $dir/ includes cli/ (only cli/ may)"
    fi
  done
}

# the checker finds what it must: a fixture with four violations and four allowed includes
F="$TMP/fixture"; mkdir -p "$F/comm" "$F/report" "$F/train" "$F/core"
printf '#include "core/err.h"\n#include "train/watchdog.h"\n' >"$F/comm/a.c"
printf '#include "accept/check.h"\n' >"$F/report/b.h"
printf '#include "comm/m.h"\n  #  include "cli/args.h"\n' >"$F/train/c.c"
printf '#include "core/log.h"\n#include <stdio.h>\n' >"$F/core/d.c"
printf '#include "train/model.h"\n#include "models/ctr/ctr.h"\n' >"$F/train/e.h"
got=$(check_tree "$F" | sort)
want=$(printf '%s\n' "src/comm/a.c:2: comm/ includes train/ (comm/ may include: core dev)" \
  "src/report/b.h:1: report/ includes accept/ (report/ may include: core dev health)" \
  "src/train/c.c:2: train/ includes cli/ (train/ may include: core dev comm health)" \
  "src/train/e.h:2: train/ includes models/ (train/ may include: core dev comm health)" | sort)
[ "$got" = "$want" ] && ok "the include checker flags a fixture's four violations (train/ including a workload too) and nothing else" \
  || fail "include checker on the fixture" "got: $got"

v=$(check_tree "$PLUMB_ROOT/src")
[ -z "$v" ] && ok "src/: core, dev, gpu, comm, health, report, train, models and faults include only the layers below them (train/ no workload); only cli/ includes cli/" \
  || fail "layering" "$v"
finish
