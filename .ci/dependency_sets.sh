#!/usr/bin/env bash
# The store, tracing and reliability tests against two dependency sets besides the lock
# (constraints.txt), each in a fresh virtual environment:
#
#   .ci/dependency_sets.sh newest   # torch==2.13.0 pinned, everything else the newest release the
#                                   # index offers: what a user who ignores the lock gets today
#   .ci/dependency_sets.sh lowest   # the lowest versions pyproject.toml allows for the direct
#                                   # dependencies (uv --resolution lowest-direct), without the
#                                   # train/report/docs extras: are the lower bounds true?
#
# The tests: SUBSET below, file globs relative to the repository root. A listed file that does not
# exist (yet) is reported and left out, so the list may name tests before they land; a run with no
# file at all fails. AGENT_RL_FAIL_ON_SKIP=1 applies here too (tests/ci_skip_policy.py): a skip
# that is not allow-listed fails the set.
#
# Environments go to $AGENT_RL_DEPSETS_DIR/<set> (default: ${TMPDIR:-/tmp}/agent-rl-dependency-sets),
# recreated on every run; PYTHON picks the interpreter (default python3). The newest set also
# prints how it differs from the lock (information, not a failure).
set -euo pipefail
cd "$(dirname "$0")/.."

SUBSET=(
    tests/test_tracing.py
    tests/test_store_*.py
    tests/test_merge_row_groups.py
    tests/test_reliability_*.py
    tests/test_exit_paths.py
    tests/test_multiprocess_store.py
    # agent-rl serve against the OTLP exporters these sets install: the exporter of OpenTelemetry
    # 1.34 retries 408 and 5xx only, so back-pressure must be a 503 for it to lose nothing.
    tests/test_receiver.py
    tests/test_receiver_multiprocess.py
    tests/test_receiver_workers.py
    # Spans built from a template checked against the SDK's own (lean_spans), the batch queue's
    # direct emit and the export path's reads of ReadableSpan fields: all lean on SDK internals
    # that differ between 1.34 and the newest release.
    tests/test_lean_spans.py
    tests/test_backpressure.py
    tests/test_export_speed.py
    # Piped tables are drawn without rich's console, byte-identical to rich: compared with the
    # rich these sets install.
    tests/test_plain_table.py
)

set_name=${1:-}
case "$set_name" in
    newest|lowest) ;;
    *) echo "usage: $0 newest|lowest" >&2; exit 2 ;;
esac

python=${PYTHON:-python3}
venv=${AGENT_RL_DEPSETS_DIR:-${TMPDIR:-/tmp}/agent-rl-dependency-sets}/$set_name
started=$SECONDS

files=()
shopt -s nullglob
for pattern in "${SUBSET[@]}"; do
    matched=($pattern)
    if [ ${#matched[@]} -eq 0 ] || { [ ${#matched[@]} -eq 1 ] && [ ! -e "${matched[0]}" ]; }; then
        echo "dependency set $set_name: $pattern does not exist (yet), left out"
        continue
    fi
    files+=("${matched[@]}")
done
shopt -u nullglob
if [ ${#files[@]} -eq 0 ]; then
    echo "dependency set $set_name: no test file matched SUBSET" >&2
    exit 1
fi

echo "== dependency set: $set_name (venv $venv)"
rm -rf "$venv"
"$python" -m venv "$venv"
vpy=$venv/bin/python

if [ "$set_name" = newest ]; then
    # pip sees this machine's find-links (the torch 2.13.0 CPU build); no constraints.txt.
    "$vpy" -m pip install --quiet "torch==2.13.0" -e ".[dev]"
else
    # uv does not look at /opt/wheels, so no torch here: the subset does not need the train extra.
    # pytest comes with the bound the dev extra gives it (also taken at its lowest).
    "$vpy" -m pip install --quiet uv
    pytest_req=$(python3 - <<'EOF'
import re, tomllib
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
print(next(r for r in dev if re.match(r"pytest\b", r)))
EOF
)
    "$venv/bin/uv" pip install --quiet --python "$vpy" --resolution lowest-direct -e . "$pytest_req"
fi
install_s=$((SECONDS - started))

echo "-- $set_name: installed in ${install_s} s; key versions:"
"$vpy" - <<'EOF'
import importlib.metadata as m
for name in ("duckdb", "opentelemetry-sdk", "opentelemetry-exporter-otlp", "pyarrow", "numpy", "pydantic",
             "pluggy", "typer", "rich", "pyyaml", "pytest", "torch"):
    try:
        print(f"   {name}=={m.version(name)}")
    except m.PackageNotFoundError:
        print(f"   {name}: not installed")
EOF
if [ "$set_name" = newest ]; then
    echo "-- newest vs constraints.txt (packages whose newest release is not the locked one):"
    "$vpy" - <<'EOF'
import importlib.metadata as m, re
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
lock = {}
for line in open("constraints.txt"):
    line = line.split("#", 1)[0].strip()
    if "==" in line:
        name, version = line.split("==", 1)
        lock[norm(name)] = version.strip()
same = 0
for dist in sorted(m.distributions(), key=lambda d: norm(d.metadata["Name"])):
    name, version = norm(dist.metadata["Name"]), dist.version.split("+")[0]
    if name in ("pip", "agent-rl-plugin"):
        continue
    if lock.get(name) == version:
        same += 1
    else:
        print(f"   {name}: {lock.get(name, 'not locked')} -> {version}")
print(f"   ({same} packages as locked)")
EOF
fi

echo "-- $set_name: python -m pytest -q ${files[*]}"
test_started=$SECONDS
status=0
AGENT_RL_FAIL_ON_SKIP=1 "$vpy" -m pytest -q -p no:cacheprovider "${files[@]}" || status=$?
echo "-- dependency set $set_name: pytest exit $status; install ${install_s} s, tests $((SECONDS - test_started)) s, total $((SECONDS - started)) s"
exit $status
