#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-live-plan: the plan of a layer (moecache_acquire_plan) in the
# real system. Where the plan does not depend on time (a layer longer than
# every copy: each miss is waited for), the live run with the plan equals
# the simulator's timed run hit for hit; where it does, the suite checks
# that the plan is carried out (some misses on the CPU, every output equal
# bit for bit) and that an engine's hint passes the plan's gate
# (moecache_prefetch_plan), and that the plan follows the copy queue's depth
# the driver publishes (moecache-plan-queue, against an agent whose copies
# are slowed). docs/live-vs-sim.md says what differs and why.
# Runs in the test VM (tools/vm/run moecache-live-plan). Prints one
# "ok N - name # description" line per test and "live-plan: P passed, F failed, S skipped".
# Usage: moecache-live-plan [FILTER]: only the tests whose name contains FILTER.
set -u

filter=${1:-}
show= # a file to print after a passing test's line

passed=0
failed=0
n=0
work=$(mktemp -d "${TMPDIR:-/tmp}/moecache-live-plan.XXXXXX")
tokens=${MOECACHE_LIVE_TOKENS:-32}
long_layer=1000000 # us: longer than any layer's copies, so the plan waits for every miss

# wanted NAME: true if the filter selects the test.
wanted()
{
	case $1 in *"$filter"*) return 0 ;; esac
	return 1
}

report()
{
	if [ "$1" = 1 ]; then
		passed=$((passed + 1))
		echo "ok $n - $2 # $3"
		[ -z "$show" ] || sed 's/^/#   /' "$show"
	else
		failed=$((failed + 1))
		echo "not ok $n - $2 # $3"
		sed 's/^/#   /' "$4" 2>/dev/null
	fi
}

# plan_exact NAME CAPACITY POLICY DESCRIPTION [BATCH]: live with --cold plan against sim
# --timing; with BATCH, moecache-decode --batch BATCH against sim --batch BATCH.
plan_exact()
{
	wanted "$1" || return 0
	n=$((n + 1))
	ok=0
	if moecache-live-vs-sim --traces olmoe --policies "$3" --capacities "$2" \
		--tokens "$tokens" --no-concurrent --batch "${5:-1}" \
		--client-flags "--cold plan --layer-us $long_layer" \
		--sim-flags "--timing --layer-us $long_layer" \
		--out "$work/$1.json" >"$work/$1.out" 2>&1 &&
		grep -q '"exact":true' "$work/$1.json" && ! grep -q '"exact":false' "$work/$1.json"; then
		ok=1
	fi
	report "$ok" "$1" "$4" "$work/$1.out"
}

plan_exact basic_plan_waiting_exact_lru_at_25pct 0.25 lru \
	"lru, 25%, moecache-decode --cold plan with a layer longer than its copies: live equals sim --timing"
plan_exact basic_plan_waiting_exact_default_at_50pct 0.50 default \
	"the default, 50%, --cold plan with a layer longer than its copies: live equals sim --timing"
plan_exact basic_plan_waiting_exact_lru_batch4_at_50pct 0.50 lru \
	"lru, 50%, moecache-decode --batch 4 --cold plan with a layer longer than its copies: live equals sim --batch 4 --timing" \
	4

# One pool, one agent, one client run; CHECKs are grep -E patterns on its JSON report.
shape="--d-model 32 --d-ff 32 --dtype f32"
pool=live-plan
agent_opts= # moecached's options beyond the pool
client=     # a program run with the pool's name instead of moecache-decode
decode_run()
{
	opts=$1
	shift
	head -n "$tokens" "${MOECACHE_TRACES:-/traces}/olmoe-1b-7b.decode.jsonl" >"$work/t.jsonl"
	# shellcheck disable=SC2086 # the shape is several options
	bytes=$(moecache-decode --print-expert-bytes $shape) || return 1
	moecachectl pool create "$pool" --layers 16 --experts 64 --slots 256 \
		--expert-bytes "$bytes" >/dev/null || return 1
	# shellcheck disable=SC2086
	moecache-decode --pool "$pool" --fill $shape >/dev/null || return 1
	: >"$work/agent.log" # before the agent opens it: the wait below greps it
	# shellcheck disable=SC2086 # the options are several words
	moecached --pool "$pool" --foreground $agent_opts 2>"$work/agent.log" &
	agent=$!
	i=0
	until grep -q 'serving:' "$work/agent.log"; do
		i=$((i + 1))
		[ $i -lt 600 ] || return 1
		sleep 0.1
	done
	[ -z "$client" ] || {
		"$client" "$pool" >"$work/run.json" 2>"$work/run.err"
		return
	}
	# shellcheck disable=SC2086
	moecache-decode --pool "$pool" --trace "$work/t.jsonl" $shape $opts --json \
		>"$work/run.json" 2>"$work/run.err" || return 1
	grep -q '"verified":"ok"' "$work/run.json" && grep -q '"mismatches":0' "$work/run.json" ||
		return 1
	for check in "$@"; do
		grep -Eq "$check" "$work/run.json" || return 1
	done
}

# decode_check NAME DESCRIPTION "CLIENT OPTIONS" CHECK...
decode_check()
{
	wanted "$1" || return 0
	n=$((n + 1))
	name=$1
	desc=$2
	shift 2
	agent=
	if decode_run "$@"; then ok=1; else ok=0; fi
	if [ -n "$agent" ]; then
		kill -TERM "$agent"
		wait "$agent"
	fi
	moecachectl pool destroy "$pool" >/dev/null 2>&1
	cat "$work/run.json" "$work/run.err" "$work/agent.log" >"$work/$name.out" 2>/dev/null
	report "$ok" "$name" "$desc" "$work/$name.out"
}

decode_check basic_plan_gate_passes_hints_that_fit "moecache-decode --cold plan --prefetch: \
the next layer's hints fit the link before it (tiny experts) and are queued" \
	"--cold plan --prefetch" '"prefetched":[1-9]'
decode_check basic_plan_gate_stops_hints_that_do_not_fit "moecache-decode --cold plan \
--prefetch --layer-us 0: no copy fits before the next layer, no hint is queued" \
	"--cold plan --prefetch --layer-us 0" '"prefetched":0[,}]' '"cpu_experts":[1-9]'

decode_check basic_plan_with_fast_pins_verifies "moecache-decode --cold plan --fast-pins \
--layer-us 0: the plan's acquires pin hits without a system call, some misses waited for, \
others on the CPU, every output equal bit for bit" \
	"--cold plan --fast-pins --layer-us 0" '"plan_waited":[1-9]' '"cpu_experts":[1-9]'

# The plan follows the live queue: with the agent's copies slowed and
# another client's misses queued, a miss the plan waits for on an idle link
# goes to the CPU, and is waited for again once the queue drains
# (tests/vm-live/plan/queue.c). Fails if the plan ignores the map's depth.
agent_opts="--copy-delay-us 250000"
client=moecache-plan-queue
show=$work/run.json # what the plan did at each step, also on a pass
decode_check basic_plan_follows_live_queue_depth "moecache_acquire_plan with the agent's \
copies slowed: a miss waited for on an idle queue goes to the CPU while another client's \
misses are queued, and is waited for again once the map's queue reads 0" ""
agent_opts=
client=
show=

rm -rf "$work"
echo "live-plan: $passed passed, $failed failed, 0 skipped"
[ "$failed" = 0 ]
