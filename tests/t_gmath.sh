# Golden arithmetic gives the same bits whatever the compiler and flags
# (docs/numerics.md): gcc and clang (both in the test package set,
# scripts/deps.sh: a missing one is a failure, not a skip), -O2, -O3
# -march=native and -O0, all with -ffp-contract=off (the project's flag; nvcc
# uses --fmad=false); and the digest is the recorded one, so a change in the
# golden arithmetic itself is caught even when every build agrees.
. "$(dirname "$0")/lib.sh"
# The FNV-1a digest of tests/tools/gmath_digest.c's golden results (gmath.h,
# philox.h), recorded with gcc 12 and clang 14 on x86-64. A change to a golden
# definition changes it: re-record it only with the change that redefines the
# arithmetic, and say so in that commit.
GMATH_DIGEST=af288d01a4948528
src="$PLUMB_ROOT/tests/tools/gmath_digest.c"
for cc in gcc clang; do
  if ! command -v $cc >/dev/null; then fail "$cc digest" "$cc not installed (scripts/deps.sh test installs it)"; continue; fi
  for opt in "-O2" "-O3 -march=native" "-O0"; do
    name="$cc $opt"
    if ! $cc -std=c11 $opt -ffp-contract=off -I"$PLUMB_ROOT/src" "$src" -o "$TMP/d" -lm 2>"$TMP/err"; then
      fail "$name builds" "$(head -c 300 "$TMP/err")"; continue
    fi
    d=$("$TMP/d")
    echo "  $name: $d"
    if [ "$d" = "$GMATH_DIGEST" ]; then ok "$name digest = the recorded $GMATH_DIGEST"
    else fail "$name digest" "$d != the recorded $GMATH_DIGEST"; fi
  done
done
finish
