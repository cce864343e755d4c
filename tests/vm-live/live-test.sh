#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-live: the agreement between the real system and the simulator
# that moecache guarantees (docs/live-vs-sim.md): one client acquiring with
# WAIT, no prefetch, policy lru, on a trace whose per-layer expert lists are
# in id order (OLMoE) gives exactly the simulator's hits and misses. Runs in
# the test VM (tools/vm/run moecache-live). Prints one
# "ok N - name # description" line per test and "live: P passed, F failed".
set -u

passed=0
failed=0
n=0
work=$(mktemp -d "${TMPDIR:-/tmp}/moecache-live-test.XXXXXX")
tokens=${MOECACHE_LIVE_TOKENS:-32}

# exact_at NAME CAPACITY DESCRIPTION: one lru row, live against sim.
exact_at()
{
	n=$((n + 1))
	if moecache-live-vs-sim --traces olmoe --policies lru --capacities "$2" --tokens "$tokens" \
		--no-concurrent --out "$work/$1.json" >"$work/$1.out" 2>&1 &&
		grep -q '"exact":true' "$work/$1.json" && ! grep -q '"exact":false' "$work/$1.json"; then
		passed=$((passed + 1))
		echo "ok $n - $1 # $3"
	else
		failed=$((failed + 1))
		echo "not ok $n - $1 # $3"
		sed 's/^/#   /' "$work/$1.out"
	fi
}

exact_at basic_lru_exact_at_10pct 0.10 \
	"lru, 10% of the OLMoE experts, one WAIT client: live hits and misses equal the simulator's"
exact_at basic_lru_exact_at_25pct 0.25 \
	"lru, 25% of the OLMoE experts, one WAIT client: live hits and misses equal the simulator's"
exact_at basic_lru_exact_at_50pct 0.50 \
	"lru, 50% of the OLMoE experts, one WAIT client: live hits and misses equal the simulator's"

rm -rf "$work"
echo "live: $passed passed, $failed failed"
[ "$failed" = 0 ]
