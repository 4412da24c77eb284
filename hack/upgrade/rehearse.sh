#!/usr/bin/env bash
# Rehearses the next Kubernetes and cel-go upgrade, twice, each in a scratch
# copy of the repository's tracked files: cel-go alone moved to its newest
# release still published as github.com/google/cel-go, then that with every
# k8s.io module pinned at admitfn's Kubernetes version moved to the newest
# version the module proxy serves (a pre-release included). Each builds,
# vets and runs the tests that hold admitfn's CEL evaluation to upstream's:
# core/celeval and its internal packages (the fast paths, the private names
# they read, the price and size tables, the typed object values),
# core/validate and core/mutate (decisions compared with upstream's own
# validator and patchers) and core/engine. It prints what
# broke and leaves the repository as it was. `make upgrade-rehearsal`; not
# part of make test.
set -uo pipefail
GO=${GO:-go}
# The next Kubernetes may need a newer Go than this machine's: the module
# proxy serves Go toolchains too, and the go command fetches the one the
# upgraded go.mod asks for.
export GOTOOLCHAIN=auto
root=$(git rev-parse --show-toplevel)
k8s_now=$(cd "$root" && $GO list -m -f '{{.Version}}' k8s.io/apiserver)
cel_now=$(cd "$root" && $GO list -m -f '{{.Version}}' github.com/google/cel-go)
k8s_next=$(cd "$root" && $GO list -m -versions k8s.io/apiserver | tr ' ' '\n' | tail -1)

# rehearse LABEL K8S: in a scratch copy, the newest cel-go of its module
# path, and the k8s.io modules at K8S ("" leaves them).
rehearse() {
	local label=$1 k8s=$2 tmp status=0
	tmp=$(mktemp -d)
	(cd "$root" && git ls-files -z | xargs -0 cp --parents -t "$tmp")
	(
		cd "$tmp" || exit 1
		echo "==== $label"
		if [ -n "$k8s" ]; then
			mods=$(awk -v v="$k8s_now" '$1 ~ /^k8s\.io\// && $2 == v {print $1 "@'"$k8s"'"}' go.mod | sort -u)
			if ! $GO get $mods >get.log 2>&1; then
				echo "== go get of the k8s.io modules at $k8s failed:"; grep -v '^go: downloading' get.log | tail -8; exit 1
			fi
		fi
		# A release under another module path is a move admitfn's imports
		# would have to follow: said, not tried.
		for v in $($GO list -m -versions github.com/google/cel-go | tr ' ' '\n' | grep -v -- '-' | sort -rV); do
			[ "$v" = "$cel_now" ] && break
			if $GO get "github.com/google/cel-go@$v" >cel.log 2>&1; then break; fi
			echo "== cel-go $v: $(grep -m1 -E 'declares its path|requires go|error|fail' cel.log | sed 's/^[[:space:]]*//')"
		done
		if ! $GO mod tidy >tidy.log 2>&1; then
			echo "== go mod tidy failed:"; grep -v '^go: downloading' tidy.log | tail -8; exit 1
		fi
		echo "== cel-go $cel_now -> $($GO list -m -f '{{.Version}}' github.com/google/cel-go), k8s.io/apiserver $k8s_now -> $($GO list -m -f '{{.Version}}' k8s.io/apiserver), $($GO version)"
		s=0
		if ! $GO build ./... 2>build.log; then s=1; echo "== go build ./... failed:"; head -40 build.log; fi
		if ! $GO vet ./core/... 2>vet.log; then s=1; echo "== go vet ./core/... failed:"; head -40 vet.log; fi
		if ! $GO test ./core/celeval/... ./core/validate ./core/mutate ./core/engine >test.log 2>&1; then
			s=1
			echo "== tests failed:"; grep -E '^(---|FAIL|ok|panic)|_test.go:[0-9]+:' test.log | head -80
		else
			grep -E '^ok' test.log
		fi
		if [ $s = 0 ]; then echo "== passes"; fi
		exit $s
	) || status=1
	rm -rf "$tmp"
	return $status
}

status=0
rehearse "cel-go alone" "" || status=1
rehearse "Kubernetes $k8s_next and cel-go" "$k8s_next" || status=1
exit $status
