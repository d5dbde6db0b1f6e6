#!/usr/bin/env bash
# sweep-array.sh -- one ktune sweep per Slurm array task, each into its own
# database on shared storage; merge-after.sh folds them together.
#
#   sbatch --array=0-$(( $(wc -l < shapes.txt) - 1 )) deploy/slurm/sweep-array.sh shapes.txt /shared/ktune
#
# shapes.txt: one problem per line, "FAMILY SHAPE" (e.g. "dense tokens=1024,in=4096,out=4096").
#SBATCH --job-name=ktune-sweep
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=16
#SBATCH --time=02:00:00
#SBATCH --output=ktune-%A_%a.log
set -euo pipefail
shapes=${1:?usage: sweep-array.sh SHAPES_FILE OUT_DIR}
outdir=${2:?usage: sweep-array.sh SHAPES_FILE OUT_DIR}
task=${SLURM_ARRAY_TASK_ID:?run this under sbatch --array}
ktune=${KTUNE:-ktune}
line=$(sed -n "$((task + 1))p" "$shapes")
[ -n "$line" ] || { echo "no line $((task + 1)) in $shapes" >&2; exit 2; }
read -r family shape <<<"$line"
mkdir -p "$outdir"
# One database per task: no two hosts ever write the same SQLite file.
exec "$ktune" sweep --family "$family" --shape "$shape" --db "$outdir/task-$task.db" --json \
	>"$outdir/task-$task.json"
