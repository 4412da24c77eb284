#!/usr/bin/env bash
# Runs a command while `go test -race` of LOAD_PKG loops alongside it, as on
# a shared CI machine: `make test-under-load` runs make test this way. The
# loop is bounded: it stops when the command ends, or after LOAD_MAX runs.
set -uo pipefail
: "${GO:=go}" "${LOAD_PKG:=./core/validate}" "${LOAD_MAX:=200}"
export GO LOAD_PKG LOAD_MAX
setsid bash -c 'for ((i = 1; i <= LOAD_MAX; i++)); do "$GO" test -race -count=1 "$LOAD_PKG" >/dev/null 2>&1; done' &
load=$!
trap 'kill -- -"$load" 2>/dev/null; wait "$load" 2>/dev/null' EXIT
echo "underload: go test -race $LOAD_PKG loops alongside: $*"
"$@"
