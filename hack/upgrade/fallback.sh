#!/usr/bin/env bash
# Shows what a cel-go upgrade that renames a private name admitfn reads
# does: in a scratch copy of the repository, cel-go is replaced by a copy
# whose program field evalOpts is renamed; then the fast-path tests must
# fail by name, and the server built against it must answer reviews as
# before, log the fallback and export it in its metrics. `make
# fallback-rehearsal`; not part of make test.
set -uo pipefail
GO=${GO:-go}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'kill "${pid:-0}" 2>/dev/null; rm -rf "$tmp"' EXIT
(cd "$root" && git ls-files -z | xargs -0 cp --parents -t "$tmp/")
cel=$(cd "$root" && $GO list -m -f '{{.Dir}}' github.com/google/cel-go)
cp -r "$cel" "$tmp/cel-go" && chmod -R u+w "$tmp/cel-go"
sed -i 's/\bevalOpts\b/evalOptions/g' "$tmp"/cel-go/cel/*.go
cd "$tmp"
$GO mod edit -replace "github.com/google/cel-go=$tmp/cel-go"

fail() { echo "FAIL: $*"; exit 1; }
echo "== the names test, on a cel-go whose program has evalOptions for evalOpts"
if out=$($GO test ./core/celeval/internal/celgo ./core/celeval/internal/cost ./core/celeval -run 'TestNames|TestCelGoPrivateNames|TestFastPathsInUse' 2>&1); then
	fail "the tests passed on a renamed field"
fi
grep -q 'has no evalOpts of type cel.EvalOption' <<<"$out" || fail "no failure names evalOpts:
$out"
echo "$out" | grep -E 'evalOpts' | head -3

echo "== the server built against it, and as the repository builds it"
$GO build -o server ./functions/server || fail "the server does not build"
(cd "$root" && $GO build -o "$tmp/server-pinned" ./functions/server) || fail "the pinned server does not build"
port=18097
# serve BINARY LOG: start it on the example bundle, answer the golden
# review into answer, the metrics into metrics, stop it.
serve() {
	"$1" --addr 127.0.0.1:$port --policies policies/examples --refresh-interval 0 >"$2" 2>&1 &
	pid=$!
	for _ in $(seq 100); do curl -fs -o /dev/null http://127.0.0.1:$port/healthz && break; sleep 0.1; done
	answer=$(curl -fs -H 'Content-Type: application/json' --data @policies/reviews/deployment-production.json http://127.0.0.1:$port/validate) || fail "$1: no answer"
	metrics=$(curl -fs http://127.0.0.1:$port/metrics)
	kill "$pid"; wait "$pid" 2>/dev/null
}
serve ./server-pinned pinned.log
want=$answer
serve ./server server.log
[ "$answer" = "$want" ] || fail "the review's answer changed:
$answer
want
$want"
grep -q '"message":"CEL fast path not in use' server.log || fail "no fallback logged:
$(cat server.log)"
grep '"message":"CEL fast path not in use' server.log | head -3
for path in untracked linear; do
	grep -q "admitfn_cel_fast_path_in_use{path=\"$path\"} 0" <<<"$metrics" || fail "the metrics do not show $path off"
done
grep -E '^admitfn_cel_(fast_path_in_use|fallback_programs_total)' <<<"$metrics"
echo "== the fallback is reported: the tests fail by name, the server answers as before, logs and counts it"
