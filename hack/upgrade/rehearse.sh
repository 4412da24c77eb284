#!/usr/bin/env bash
# Rehearses the next Kubernetes and cel-go upgrade: in a scratch copy of the
# repository's tracked files, moves github.com/google/cel-go to its newest
# release and every k8s.io module pinned at admitfn's Kubernetes version to
# the newest version the module proxy serves (a pre-release included), then
# builds, vets and runs the tests that hold admitfn's CEL evaluation to
# upstream's: core/celeval (the fast paths, the price and size tables),
# core/validate and core/mutate (decisions compared with upstream's own
# validator and patchers) and core/engine. It prints what broke and leaves
# the repository as it was. `make upgrade-rehearsal`; not part of make test.
set -uo pipefail
GO=${GO:-go}
# The next Kubernetes may need a newer Go than this machine's: the module
# proxy serves Go toolchains too, and the go command fetches the one the
# upgraded go.mod asks for.
export GOTOOLCHAIN=auto
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && git ls-files -z | xargs -0 cp --parents -t "$tmp")
cd "$tmp"

k8s_now=$($GO list -m -f '{{.Version}}' k8s.io/apiserver)
cel_now=$($GO list -m -f '{{.Version}}' github.com/google/cel-go)
newest() { $GO list -m -versions "$1" | tr ' ' '\n' | tail -1; }
k8s_next=$(newest k8s.io/apiserver)
cel_next=$($GO list -m -versions github.com/google/cel-go | tr ' ' '\n' | grep -v -- '-' | tail -1)
echo "== cel-go $cel_now -> $cel_next, k8s.io modules $k8s_now -> $k8s_next ($($GO version))"

mods=$(awk -v v="$k8s_now" '$1 ~ /^k8s\.io\// && $2 == v {print $1 "@'"$k8s_next"'"}' go.mod | sort -u)
if ! $GO get "github.com/google/cel-go@$cel_next" $mods >get.log 2>&1; then
	echo "== go get failed"; tail -20 get.log; exit 1
fi
$GO mod tidy >tidy.log 2>&1 || { echo "== go mod tidy failed"; tail -20 tidy.log; exit 1; }
echo "== $(grep -E '^(go|toolchain) ' go.mod | tr '\n' ' ')-> $($GO version)"

status=0
echo "== go build ./..."
if ! $GO build ./... 2>build.log; then status=1; head -40 build.log; fi
echo "== go vet ./core/..."
if ! $GO vet ./core/... 2>vet.log; then status=1; head -40 vet.log; fi
echo "== go test ./core/celeval ./core/validate ./core/mutate ./core/engine"
if ! $GO test ./core/celeval ./core/validate ./core/mutate ./core/engine >test.log 2>&1; then
	status=1
	grep -E '^(---|FAIL|ok|panic)|_test.go:[0-9]+:' test.log | head -80
else
	grep -E '^ok' test.log
fi
if [ $status = 0 ]; then echo "== the upgrade builds and passes"; else echo "== the upgrade breaks what is above"; fi
exit $status
