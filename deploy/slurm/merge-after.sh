#!/usr/bin/env bash
# merge-after.sh -- folds the per-task databases of a sweep array into one.
#
#   jid=$(sbatch --parsable --array=0-N deploy/slurm/sweep-array.sh shapes.txt /shared/ktune)
#   sbatch --dependency=afterany:$jid deploy/slurm/merge-after.sh /shared/ktune /shared/ktune/all.db
#SBATCH --job-name=ktune-merge
#SBATCH --time=00:20:00
set -euo pipefail
outdir=${1:?usage: merge-after.sh OUT_DIR MERGED_DB}
merged=${2:?usage: merge-after.sh OUT_DIR MERGED_DB}
ktune=${KTUNE:-ktune}
shopt -s nullglob
dbs=("$outdir"/task-*.db)
[ ${#dbs[@]} -gt 0 ] || { echo "no task databases in $outdir" >&2; exit 1; }
"$ktune" merge "${dbs[@]}" -o "$merged"
