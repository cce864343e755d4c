#!/bin/sh
# SPDX-License-Identifier: MIT
# The moecache demo, run where /dev/moecache exists and the project's
# programs are on PATH (inside the test VM, or on a host as root):
# one pool with the OLMoE geometry whose bank holds a quarter of the
# experts, its weights loaded once, moecached serving it, and four
# verifying decode clients on different parts of the routing trace at
# once (every second one pins its hits without a system call, with fast
# pins). Ends with the line
#   demo: clients=4 steps=N hit_rate=X verified=ok host_bytes=B private_bytes=P
# where steps counts every client's steps, host_bytes is the one shared
# copy of the experts and private_bytes what four private copies would take.
#
# Environment: MOECACHE_TRACES (folder of the traces, default /traces),
# DEMO_STEPS (steps per client, default 16), DEMO_CLIENTS (default 4).
set -u

traces=${MOECACHE_TRACES:-/traces}
trace=$traces/olmoe-1b-7b.decode.jsonl
steps=${DEMO_STEPS:-16}
clients=${DEMO_CLIENTS:-4}
pool=demo-olmoe
layers=16
experts=64
slots=$((layers * experts / 4))
shape="--d-model 128 --d-ff 256 --dtype f32"
work=$(mktemp -d "${TMPDIR:-/tmp}/moecache-demo.XXXXXX")
agent_pid=

die()
{
	echo "demo: FAILED: $*" >&2
	[ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null
	moecachectl pool destroy "$pool" >/dev/null 2>&1
	exit 1
}

# A key=value field of a one-line report.
field()
{
	sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" "$2" | tail -n 1
}

# The first integer field "key": value of a JSON file (moecachectl --json:
# the pool's totals come before the per-layer figures).
jfield()
{
	sed -n "s/.*\"$1\" *: *\\([0-9]*\\).*/\\1/p" "$2" | head -n 1
}

[ -r "$trace" ] || die "no trace at $trace (set MOECACHE_TRACES)"
[ -e /dev/moecache ] || die "no /dev/moecache: load the module first"

expert_bytes=$(moecache-decode --print-expert-bytes $shape) || die "moecache-decode"
echo "demo: pool $pool: $layers layers x $experts experts of $expert_bytes bytes," \
	"bank of $slots slots (25%)"
moecachectl pool create "$pool" --layers $layers --experts $experts --slots $slots \
	--expert-bytes "$expert_bytes" >/dev/null || die "cannot create the pool"
moecache-decode --pool "$pool" --fill $shape || die "cannot load the weights"

moecached --pool "$pool" --foreground --profile "$work/profile.json" 2>"$work/agent.log" &
agent_pid=$!

# Four clients, each on its own stretch of the trace, all at once; the odd
# ones with fast pins, sharing the same residency as the others.
i=0
pids=
while [ $i -lt "$clients" ]; do
	start=$((i * 70))
	pin=
	[ $((i % 2)) = 1 ] && pin=--fast-pins
	moecache-decode --pool "$pool" --trace "$trace" --start-token $start --steps "$steps" \
		$shape --no-check-weights $pin --label "client$i" >"$work/client$i.out" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
failed=0
for pid in $pids; do
	wait "$pid" || failed=$((failed + 1))
done
cat "$work"/client*.out

moecachectl stats "$pool" --json >"$work/stats.json" || die "stats"
moecachectl pool info "$pool" --json >"$work/pool.json" || die "pool info"
kill -TERM "$agent_pid"
wait "$agent_pid"
agent_rc=$?
agent_pid=
sed 's/^/    /' "$work/agent.log"
[ "$agent_rc" = 0 ] || failed=$((failed + 1))

total_steps=0
verified=ok
for f in "$work"/client*.out; do
	n=$(field steps "$f")
	total_steps=$((total_steps + ${n:-0}))
	[ "$(field verified "$f")" = ok ] || verified=FAILED
done
[ "$failed" = 0 ] || verified=FAILED
hits=$(jfield hits "$work/stats.json")
misses=$(jfield misses "$work/stats.json")
host_bytes=$(jfield host_bytes "$work/pool.json")
echo "demo: pool stats: hits=$hits misses=$misses evictions=$(jfield evictions "$work/stats.json")" \
	"bytes_copied=$(jfield bytes_copied "$work/stats.json") host_bytes=$host_bytes"
moecachectl pool destroy "$pool" >/dev/null || verified=FAILED
rm -rf "$work"

hit_rate=$(awk -v h="$hits" -v m="$misses" 'BEGIN { printf "%.3f", (h + m) ? h / (h + m) : 0 }')
echo "demo: clients=$clients steps=$total_steps hit_rate=$hit_rate verified=$verified" \
	"host_bytes=$host_bytes private_bytes=$((clients * host_bytes))"
[ "$verified" = ok ]
