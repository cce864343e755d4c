#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-live: end-to-end checks of what reaches the agent's slot choice
# through the driver (docs/live-vs-sim.md). The simulator runs moecached's
# own slot choice (agent/slots.c; the unit test
# sim/basic_victims_are_the_agents_choice fails if it stops), so the
# choice itself cannot differ; what these rows check is the live path that
# feeds it: the driver's access[] counters and clocks scanned in order, the
# request queue read in the client's order, ACQUIRE_RELEASE with WAIT, the
# agent's rounds and window. One client with WAIT, no prefetch, policy lru,
# on a trace whose per-layer expert lists are in id order (OLMoE) gives
# exactly the simulator's hits and misses; so does the default policy at
# 25% and 50%. So does a batched client (moecache-decode --batch B: one
# acquire per layer of B tokens' union) against sim --batch B, lru. Then
# moecache-decode's --cold cpu and --cold plan, end to end. Runs in the test VM (tools/vm/run moecache-live). Prints one
# "ok N - name # description" line per test and "live: P passed, F failed, S skipped".
set -u

passed=0
failed=0
n=0
work=$(mktemp -d "${TMPDIR:-/tmp}/moecache-live-test.XXXXXX")
tokens=${MOECACHE_LIVE_TOKENS:-32}

# exact_at NAME CAPACITY DESCRIPTION [POLICY [BATCH]]: one row (lru unless POLICY), live
# against sim; with BATCH, moecache-decode --batch BATCH against sim --batch BATCH.
exact_at()
{
	n=$((n + 1))
	if moecache-live-vs-sim --traces olmoe --policies "${4:-lru}" --capacities "$2" \
		--tokens "$tokens" --batch "${5:-1}" \
		--no-concurrent --out "$work/$1.json" >"$work/$1.out" 2>&1 &&
		grep -q '"exact":true' "$work/$1.json" && ! grep -q '"exact":false' "$work/$1.json" &&
		grep -q "\"batch\":${5:-1}," "$work/$1.json"; then
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
exact_at basic_default_exact_at_25pct 0.25 \
	"the default (duel), 25% of the OLMoE experts, one WAIT client: live equals the simulator" \
	default
exact_at basic_default_exact_at_50pct 0.50 \
	"the default (duel), 50% of the OLMoE experts, one WAIT client: live equals the simulator" \
	default

# A batched client: one acquire per layer of the B tokens' union, against sim --batch B.
exact_at basic_batch4_lru_exact_at_50pct 0.50 \
	"moecache-decode --batch 4, lru, 50%: live hits and misses of the unions equal sim --batch 4" \
	lru 4
exact_at basic_batch4_lru_exact_at_25pct 0.25 \
	"moecache-decode --batch 4, lru, 25%: a batched step needs more experts than the bank holds, live equals sim --batch 4" \
	lru 4
exact_at basic_batch16_lru_exact_at_50pct 0.50 \
	"moecache-decode --batch 16, lru, 50%: live hits and misses of the unions equal sim --batch 16" \
	lru 16

# bad_batch NAME DESCRIPTION EXIT OPTIONS...: moecache-decode exits with EXIT naming
# --batch, before it attaches to a pool.
bad_batch()
{
	n=$((n + 1))
	name=$1 desc=$2 want=$3
	shift 3
	head -n "$tokens" "${MOECACHE_TRACES:-/traces}/olmoe-1b-7b.decode.jsonl" >"$work/bad.jsonl"
	moecache-decode --pool no-such-pool --trace "$work/bad.jsonl" "$@" >"$work/bad.out" 2>&1
	rc=$?
	if [ "$rc" -eq "$want" ] && grep -q -- "--batch" "$work/bad.out" &&
		! grep -q "attach to pool" "$work/bad.out"; then
		passed=$((passed + 1))
		echo "ok $n - $name # $desc"
	else
		failed=$((failed + 1))
		echo "not ok $n - $name # $desc (exit $rc)"
		sed 's/^/#   /' "$work/bad.out"
	fi
}

bad_batch bad_input_decode_batch_zero "moecache-decode --batch 0 is a usage error (exit 2)" \
	2 --batch 0
bad_batch bad_input_decode_batch_over_tokens "moecache-decode --batch with more sequences \
than selected tokens fails (exit 3) naming --batch, before attaching" 3 --batch $((tokens + 1))

# --cold cpu: misses are computed from the host pages while the agent copies
# them in; --cold plan: as the plan of a layer says (some waited for, some
# on the CPU). The client still checks every layer's output bit for bit.
cold_shape="--d-model 32 --d-ff 32 --dtype f32"
cold_pool=live-cold
cold_slots="--slots 256" # or --bank options

# cold_run "CLIENT OPTIONS" CHECK...: the run, then each CHECK (a grep -E
# pattern that must match the JSON report).
cold_run()
{
	cold_opts=$1
	shift
	head -n "$tokens" "${MOECACHE_TRACES:-/traces}/olmoe-1b-7b.decode.jsonl" >"$work/cold.jsonl"
	# shellcheck disable=SC2086 # the shape is several options
	cold_bytes=$(moecache-decode --print-expert-bytes $cold_shape) || return 1
	# shellcheck disable=SC2086 # the slots or banks are several options
	moecachectl pool create "$cold_pool" --layers 16 --experts 64 $cold_slots \
		--expert-bytes "$cold_bytes" >/dev/null || return 1
	# shellcheck disable=SC2086
	moecache-decode --pool "$cold_pool" --fill $cold_shape >/dev/null || return 1
	: >"$work/cold-agent.log" # before the agent opens it: the wait below greps it
	moecached --pool "$cold_pool" --foreground 2>"$work/cold-agent.log" &
	cold_agent=$!
	i=0
	until grep -q 'serving:' "$work/cold-agent.log"; do
		i=$((i + 1))
		[ $i -lt 600 ] || return 1
		sleep 0.1
	done
	# shellcheck disable=SC2086
	moecache-decode --pool "$cold_pool" --trace "$work/cold.jsonl" $cold_shape $cold_opts \
		--json >"$work/cold.json" 2>"$work/cold.err" || return 1
	grep -q '"verified":"ok"' "$work/cold.json" && grep -q '"mismatches":0' "$work/cold.json" ||
		return 1
	for check in "$@"; do
		grep -Eq "$check" "$work/cold.json" || return 1
	done
}

# cold_verifies NAME DESCRIPTION "CLIENT OPTIONS" CHECK...
cold_verifies()
{
	n=$((n + 1))
	cold_name=$1
	cold_desc=$2
	shift 2
	cold_agent=
	if cold_run "$@"; then ok=1; else ok=0; fi
	if [ -n "$cold_agent" ]; then
		kill -TERM "$cold_agent"
		wait "$cold_agent"
	fi
	moecachectl pool destroy "$cold_pool" >/dev/null 2>&1
	if [ "$ok" = 1 ]; then
		passed=$((passed + 1))
		echo "ok $n - $cold_name # $cold_desc"
		sed 's/^/#   /' "$work/cold.json"
	else
		failed=$((failed + 1))
		echo "not ok $n - $cold_name # $cold_desc"
		cat "$work/cold.json" "$work/cold.err" "$work/cold-agent.log" 2>/dev/null |
			sed 's/^/#   /'
	fi
}

cold_verifies basic_cold_cpu_verifies "moecache-decode --cold cpu at 25%: misses computed \
from the host pages, every output equal bit for bit, some experts computed on the CPU" \
	"--cold cpu" '"cpu_experts":[1-9]'
cold_verifies basic_batch_cold_plan_verifies "moecache-decode --batch 4 --cold plan \
--layer-us 0 at 25%: each layer acquires the four tokens' union as the plan says (some misses \
waited for, others on the CPU), every sequence's output equal bit for bit" \
	"--batch 4 --cold plan --layer-us 0" '"batch":4' '"cpu_experts":[1-9]' '"plan_waited":[1-9]'
cold_verifies basic_cold_plan_verifies "moecache-decode --cold plan --layer-us 0 at 25%: the \
plan waits for some misses and computes others on the CPU, every output equal bit for bit" \
	"--cold plan --layer-us 0" '"cpu_experts":[1-9]' '"plan_waited":[1-9]'

# Three CPU banks (tiers 0, 1, 2): each bank's worker thread runs its experts of the
# union for every sequence, the cold ones run on the calling thread meanwhile.
cold_slots="--bank 0:cpu:0:64 --bank 1:cpu:1:64 --bank 2:cpu:2:128"
cold_verifies basic_batch_verifies_on_three_banks "moecache-decode --batch 4 --cold plan \
--layer-us 0 on a pool of three CPU banks: every bank runs experts of the unions, some run \
on the CPU, every sequence's output equal bit for bit" \
	"--batch 4 --cold plan --layer-us 0" '"batch":4' '"cpu_experts":[1-9]' \
	'"experts":[1-9][^]]*"experts":[1-9][^]]*"experts":[1-9]'
cold_slots="--slots 256"

rm -rf "$work"
echo "live: $passed passed, $failed failed, 0 skipped"
[ "$failed" = 0 ]
