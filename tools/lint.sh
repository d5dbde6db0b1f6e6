#!/usr/bin/env bash
# lint.sh -- checks the scripts and manifests that no test runs: shell scripts
# with shellcheck, the Kubernetes manifests as YAML with the fields a Job needs.
set -euo pipefail
cd "$(dirname "$0")/.."
shellcheck -S warning deploy/slurm/*.sh bench/*.sh tools/*.sh .ci/run
# Debian's python3-yaml serves /usr/bin/python3; another python3 first on
# PATH may not have it.
py=python3
python3 -c 'import yaml' 2>/dev/null || py=/usr/bin/python3
"$py" - <<'PY'
import sys, yaml
ok = True
for f in ["deploy/k8s/sweep-job.yaml", "deploy/k8s/merge-job.yaml"]:
    for d in yaml.safe_load_all(open(f)):
        if d["kind"] == "Job":
            c = d["spec"]["template"]["spec"]["containers"][0]
            if "ktune" not in " ".join(c.get("command", []) + c.get("args", [])):
                print(f"{f}: the Job does not run ktune"); ok = False
print("lint: manifests ok" if ok else "lint: manifests FAILED")
sys.exit(0 if ok else 1)
PY
echo "lint: scripts ok"
