#!/usr/bin/env bash
# Validates everything under deploy/: the Dockerfile, the Kubernetes and Argo
# manifests rendered per dataset (render.py), and the Airflow DAG.
#
#   bash deploy/validate.sh
#
# 1. Installs its tools, once, into
#    ${SILVERLINE_STACK_HOME:-$HOME/.cache/silverline-stack}/deploy-venv
#    (requirements.txt, pinned by constraints.txt; reinstalled only when
#    either file or the Python version changes).
# 2. Then works offline: where the machine allows it (root, unshare and ip),
#    in a network namespace of its own with only loopback up, so that no
#    check can reach the network.
#      - hadolint on deploy/Dockerfile, shellcheck on this script
#      - validate.py: every manifest in deploy/k8s against the Kubernetes JSON
#        schemas (kubernetes-validate, strict, per Kubernetes version) and the
#        Argo schemas (from hera's Argo models, strict), the exit-code
#        contract (3 and 5 retried), digest pins, NetworkPolicies, the
#        workbench, cross-references, deploy/k8s against a fresh render of
#        the shipped dataset values, the Dockerfile's stages; `silverline
#        check-config` on the ConfigMap if a silverline binary exists
#      - validate.py selftest: negative controls, each a broken copy of a
#        manifest (or values) that must be rejected; a second dataset's
#        values rendered and checked
#      - the same on the command line: a broken copy of deploy/k8s in a temp
#        folder must make validate.py exit non-zero
#      - pytest deploy/airflow/test_dag_import.py (Airflow's DagBag parses the
#        DAG; exit-code handling; alert to a loopback webhook)
# 3. Prints, last, `deploy: N passed, M failed` and exits 1 if M > 0.
#
# Environment: SILVERLINE_STACK_HOME (venv location), SILVERLINE_K8S_VERSIONS
# (default 1.31,1.37), SILVERLINE_BIN (a silverline binary for check-config),
# SILVERLINE_DEPLOY_ISOLATE=auto|1|0 (network namespace; default auto),
# PYTHON (interpreter for the venv, default python3).
set -uo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STACK_HOME="${SILVERLINE_STACK_HOME:-$HOME/.cache/silverline-stack}"
VENV="$STACK_HOME/deploy-venv"
PYTHON="${PYTHON:-python3}"
export PYTHONDONTWRITEBYTECODE=1
export SILVERLINE_DEPLOY_SCHEMA_CACHE="$VENV/schema-cache"

passed=0
failed=0
skipped=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
skip() { skipped=$((skipped + 1)); echo "SKIP $*"; }
finish() {
    [ "$skipped" -gt 0 ] && echo "($skipped skipped)"
    echo "deploy: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

# --- the internal phase: everything after the install, possibly isolated ----
if [ "${1:-}" = "--checks" ]; then
    shift
    WORK="$1"
    # shellcheck source=/dev/null
    . "$VENV/bin/activate"
    cd "$DEPLOY_DIR/.." || exit 1

    if command -v hadolint >/dev/null 2>&1; then
        if out="$(hadolint deploy/Dockerfile 2>&1)"; then
            pass "hadolint deploy/Dockerfile ($(hadolint --version | head -1))"
        else
            fail "hadolint deploy/Dockerfile: $(echo "$out" | tr '\n' ' ')"
        fi
    else
        skip "hadolint: no binary wheel for $(uname -m)"
    fi
    if out="$(shellcheck -x deploy/validate.sh 2>&1)"; then
        pass "shellcheck deploy/validate.sh (shellcheck $(shellcheck --version | sed -n 's/^version: //p'))"
    else
        fail "shellcheck deploy/validate.sh: $(echo "$out" | tr '\n' ' ')"
    fi

    if out="$(python deploy/render.py --check 2>&1)"; then
        pass "render.py --check: deploy/k8s is the render of deploy/datasets/credit_statements.yaml"
    else
        fail "render.py --check: $(echo "$out" | tr '\n' ' ')"
    fi

    for mode in check selftest; do
        python deploy/validate.py "$mode" --counts "$WORK/$mode.counts"
        if read -r p f s <"$WORK/$mode.counts" 2>/dev/null; then
            passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
        else
            fail "validate.py $mode did not finish"
        fi
    done

    # End to end: the command itself must exit non-zero on a broken manifest.
    broken="$WORK/broken-k8s"
    mkdir -p "$broken"
    cp deploy/k8s/*.yaml "$broken/"
    sed -i 's/restartPolicy: Never/restartPolicy: OnFailure/' "$broken/cronjob.yaml"
    sed -i 's/lastRetry.exitCode) == 3/lastRetry.exitCode) == 1/' "$broken/argo-workflow.yaml"
    if python deploy/validate.py --no-exec "$broken"/*.yaml >"$WORK/broken.log" 2>&1; then
        fail "validate.py accepted a broken copy of deploy/k8s (see $WORK/broken.log)"
    else
        pass "validate.py exits non-zero on a broken copy of deploy/k8s ($(grep -c '^FAIL' "$WORK/broken.log") failures, e.g. $(grep -m1 '^FAIL contract' "$WORK/broken.log" | cut -c1-150))"
    fi

    python -m pytest deploy/airflow/test_dag_import.py -q -p no:cacheprovider \
        --junitxml="$WORK/airflow.xml" 2>&1 | tail -n 25
    if [ -f "$WORK/airflow.xml" ]; then
        read -r p f s < <(python - "$WORK/airflow.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
total = sum(int(s.get("tests", 0)) for s in suites)
bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(total - bad - skipped, bad, skipped)
PY
)
        passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
        [ "$((p + f))" -gt 0 ] || fail "the Airflow DAG tests ran no test"
    else
        fail "pytest deploy/airflow/test_dag_import.py did not run"
    fi
    echo "$passed $failed $skipped" >"$WORK/checks.counts"
    exit 0
fi

# --- install (idempotent) ----------------------------------------------------
install_venv() {
    local stamp want
    want="$(cat "$DEPLOY_DIR/requirements.txt" "$DEPLOY_DIR/constraints.txt" | sha256sum | cut -c1-16) $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
    stamp="$VENV/.silverline-deploy-stamp"
    if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        echo "deploy-venv: up to date ($VENV)"
        return 0
    fi
    echo "deploy-venv: installing into $VENV (a few minutes, once)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV" || return 1
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$DEPLOY_DIR/requirements.txt" -c "$DEPLOY_DIR/constraints.txt" || return 1
    echo "$want" >"$stamp"
}

mkdir -p "$STACK_HOME"
exec 9>"$STACK_HOME/deploy-venv.lock"
flock 9 2>/dev/null || true # another validate.sh installing: wait for it
if ! install_venv; then
    fail "install of the validation tools into $VENV"
    finish
fi
flock -u 9 2>/dev/null || true

WORK="$(mktemp -d "${TMPDIR:-/tmp}/silverline-deploy.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

isolate="${SILVERLINE_DEPLOY_ISOLATE:-auto}"
use_netns=0
if [ "$isolate" != 0 ] && command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 &&
    unshare --net ip link set lo up >/dev/null 2>&1; then
    use_netns=1
elif [ "$isolate" = 1 ]; then
    fail "SILVERLINE_DEPLOY_ISOLATE=1 but no network namespace can be made here (needs root, unshare and ip)"
    finish
fi

if [ "$use_netns" = 1 ]; then
    echo "offline: checks run in a network namespace with only loopback (unshare --net)"
    # shellcheck disable=SC2016 # $0 and $1 are the inner bash's arguments
    unshare --net bash -c 'ip link set lo up && exec bash "$0" --checks "$1"' "$DEPLOY_DIR/validate.sh" "$WORK"
else
    echo "offline: no network namespace here; checks run without network isolation"
    bash "$DEPLOY_DIR/validate.sh" --checks "$WORK"
fi

if read -r p f s <"$WORK/checks.counts" 2>/dev/null; then
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
else
    fail "the checks did not finish"
fi
finish
