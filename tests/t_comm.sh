# Collectives and exact eval on real MPI ranks (mpirun --oversubscribe).
. "$(dirname "$0")/lib.sh"
if ! command -v mpirun >/dev/null; then skip "mpi collectives" "mpirun not installed"; finish; exit; fi
for np in 2 3; do
  if mpirun --oversubscribe -np $np "$PLUMB_BUILD/plumb-tests" mpi_collectives >"$TMP/o" 2>&1; then
    n=$(grep -c "collectives and exact eval ok" "$TMP/o")
    if [ "$n" -eq "$np" ] && ! grep -q "failed:" "$TMP/o"; then ok "mpi collectives -np $np"
    else fail "mpi collectives -np $np" "$(tail -5 "$TMP/o")"; fi
  else fail "mpi collectives -np $np" "$(tail -5 "$TMP/o")"; fi
done
finish
