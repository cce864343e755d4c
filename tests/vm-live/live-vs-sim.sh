#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-live-vs-sim: replays routing traces through the real system
# (the driver, moecached, moecache-decode clients) and compares the hit
# rate with `moecache-trace sim` for the same trace, policy and slots. Runs
# where /dev/moecache exists and the project's programs are on PATH (the
# test VM: tools/vm/run moecache-live-vs-sim).
#
# Usage: moecache-live-vs-sim [--tokens N] [--policies "lru default"]
#                             [--capacities "0.10 0.25 0.50"] [--no-concurrent]
#                             [--traces "olmoe granite"] [--out FILE]
#                             [--client-flags "--fast-pins"]
#                             [--sim-flags "--hint-accuracy 1"] [--batch B]
#
# Rows: the OLMoE trace (its first N decode tokens, default 64) and the
# granite prompt english_prose (prefill then decode), one client with
# WAIT and no prefetch; then, unless --no-concurrent, four clients at once
# (four stretches of the OLMoE prefix; granite's three prompts and the
# first prompt's decode again). --client-flags are given to every decode
# client (--fast-pins: hits pinned without a system call, reported in
# batches); --sim-flags are given to the single-client rows' simulator
# runs (--client-flags --prefetch, the trace's next layer hinted, is
# --sim-flags "--hint-accuracy 1" there). --batch B: the client decodes
# B stretches of the trace at once (moecache-decode --batch B, one acquire
# per layer of their union) and the simulator replays the same unions
# (moecache-trace sim --batch B); single-client rows only. Prints a table
# and, with --out, writes it as JSON. Ends with "live-vs-sim: R rows, E exact".
#
# Environment: MOECACHE_TRACES (folder of the traces, default /traces).
set -u

traces=${MOECACHE_TRACES:-/traces}
tokens=64
policies="lru default"
capacities="0.10 0.25 0.50"
which_traces="olmoe granite"
concurrent=1
client_flags=
sim_flags=
batch=1
out=
shape="--d-model 32 --d-ff 32 --dtype f32"
pool=live-vs-sim
work=$(mktemp -d "${TMPDIR:-/tmp}/moecache-live.XXXXXX")
agent_pid=
rows=0
exact=0

die()
{
	echo "live-vs-sim: FAILED: $*" >&2
	[ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null
	moecachectl pool destroy "$pool" >/dev/null 2>&1
	exit 1
}

while [ $# -gt 0 ]; do
	case $1 in
	--tokens) tokens=$2; shift ;;
	--policies) policies=$2; shift ;;
	--capacities) capacities=$2; shift ;;
	--traces) which_traces=$2; shift ;;
	--no-concurrent) concurrent=0 ;;
	--client-flags) client_flags=$2; shift ;;
	--sim-flags) sim_flags=$2; shift ;;
	--batch) batch=$2; shift ;;
	--out) out=$2; shift ;;
	*) sed -n '9,13s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
case $batch in
'' | *[!0-9]* | 0) echo "live-vs-sim: --batch: a count of sequences" >&2; exit 2 ;;
esac
# A batched client is compared with sim --batch alone: the four-client half is not run.
[ "$batch" = 1 ] || concurrent=0

olmoe=$traces/olmoe-1b-7b.decode.jsonl
granite=$traces/granite-3.0-1b-a400m.prefill-decode.json
[ -r "$olmoe" ] && [ -r "$granite" ] || die "no traces in $traces (set MOECACHE_TRACES)"
[ -e /dev/moecache ] || die "no /dev/moecache: load the module first"

# One integer field of a flat JSON object ("key": value), from a file.
jfield()
{
	sed -n "s/.*\"$1\" *: *\\([0-9.eE+-]*\\).*/\\1/p" "$2" | head -n 1
}

rate()
{
	awk -v h="$1" -v m="$2" 'BEGIN { printf "%.4f", (h + m) ? h / (h + m) : 0 }'
}

# The OLMoE prefix: the simulator and the clients read the very same file.
olmoe_prefix=$work/olmoe-prefix.jsonl
head -n "$tokens" "$olmoe" >"$olmoe_prefix"

# The single-client rows run the agent and the client on one CPU: their
# exactness rests on the two taking turns (the client sleeps in WAIT while
# the agent scans and fills); on two CPUs the agent's scan can overlap the
# client's next acquires and see them a round early (docs/live-vs-sim.md).
one_cpu=
if [ "$(nproc 2>/dev/null || echo 1)" -gt 1 ] && command -v taskset >/dev/null; then
	one_cpu="taskset -c 0"
fi

# pool_up SLOTS LAYERS EXPERTS POLICY [PREFIX]: a fresh pool, its weights, an
# agent (run under PREFIX, a command such as taskset).
pool_up()
{
	moecachectl pool create "$pool" --layers "$2" --experts "$3" --slots "$1" \
		--expert-bytes "$expert_bytes" >/dev/null || die "cannot create the pool"
	moecache-decode --pool "$pool" --fill $shape >/dev/null || die "cannot load the weights"
	: >"$work/agent.log" # before the agent opens it: the wait below greps it
	# shellcheck disable=SC2086 # the prefix is a command and its options
	${5:-} moecached --pool "$pool" --foreground --policy "$4" 2>"$work/agent.log" &
	agent_pid=$!
	# Clients start once the agent serves: it learns accesses from then on.
	n=0
	until grep -q 'serving:' "$work/agent.log"; do
		n=$((n + 1))
		[ $n -lt 600 ] || die "moecached did not start: $(cat "$work/agent.log")"
		sleep 0.1
	done
}

pool_down()
{
	moecachectl stats "$pool" --json >"$work/stats.json" || die "stats"
	kill -TERM "$agent_pid"
	wait "$agent_pid" || die "moecached failed: $(cat "$work/agent.log")"
	agent_pid=
	moecachectl pool destroy "$pool" >/dev/null || die "cannot destroy the pool"
}

json_rows=
# row KIND TRACE POLICY CAPACITY SLOTS CLIENTS LIVE_HITS LIVE_MISSES SIM_HITS SIM_MISSES
# (KIND single or four; with --batch B, single:BB)
row()
{
	live=$(rate "$7" "$8")
	sim=$(rate "$9" "${10}")
	diff=$(awk -v a="$live" -v b="$sim" 'BEGIN { printf "%+.4f", a - b }')
	jdiff=$(awk -v a="$live" -v b="$sim" 'BEGIN { printf "%.4f", a - b }') # JSON has no "+"
	same=no
	[ "$7" = "$9" ] && [ "$8" = "${10}" ] && same=yes
	rows=$((rows + 1))
	[ $same = no ] || exact=$((exact + 1))
	printf '%-10s %-20s %-8s %5s %5s %7s %8s %8s %8s %8s %8s %5s\n' "$1" "$2" "$3" "$4" "$5" \
		"$6" "$7/$8" "$9/${10}" "$live" "$sim" "$diff" "$same"
	j=$(printf '{"kind":"%s","trace":"%s","policy":"%s","capacity":%s,"slots":%s,"batch":%s,' \
		"${1%%:*}" "$2" "$3" "$4" "$5" "$batch")
	j="$j$(printf '"clients":%s,"live":{"hits":%s,"misses":%s,"hit_rate":%s},' \
		"$6" "$7" "$8" "$live")"
	j="$j$(printf '"sim":{"hits":%s,"misses":%s,"hit_rate":%s},"difference":%s,"exact":%s}' \
		"$9" "${10}" "$sim" "$jdiff" "$([ $same = yes ] && echo true || echo false)")"
	json_rows="${json_rows:+$json_rows,
}  $j"
}

# sim TRACE_FILE SLOTS POLICY [moecache-trace options]: "hits misses".
sim()
{
	f=$1 s=$2 p=$3
	shift 3
	moecache-trace sim --trace "$f" --slots "$s" --policy "$p" "$@" >"$work/sim.json" ||
		die "moecache-trace sim --trace $f --slots $s --policy $p $*"
	echo "$(jfield hits "$work/sim.json") $(jfield misses "$work/sim.json")"
}

# Geometry per trace: name, file, layers, experts, client options.
trace_setup()
{
	case $1 in
	olmoe)
		name="olmoe:$tokens"
		file=$olmoe_prefix layers=16 experts=64
		sel="--phase all"
		;;
	granite)
		name="granite:english_prose"
		file=$granite layers=24 experts=32
		sel="--prompt english_prose --phase all"
		;;
	esac
}

expert_bytes=$(moecache-decode --print-expert-bytes $shape) || die "moecache-decode"
printf '%-10s %-20s %-8s %5s %5s %7s %8s %8s %8s %8s %8s %5s\n' kind trace policy cap slots \
	clients live_h/m sim_h/m live sim diff exact

for t in $which_traces; do
	trace_setup "$t"
	for cap in $capacities; do
		slots=$(awk -v c="$cap" -v n=$((layers * experts)) 'BEGIN { printf "%d", c * n + 1e-9 }')
		for pol in $policies; do
			pool_up "$slots" "$layers" "$experts" "$pol" "$one_cpu"
			$one_cpu moecache-decode --pool "$pool" --trace "$file" $sel $shape --no-check-weights \
				--batch "$batch" $client_flags --json >"$work/client.json" \
				2>"$work/client.err" ||
				die "client: $(cat "$work/client.err")"
			pool_down
			# The driver's count must be the client's: one client, every access counted.
			lh=$(jfield hits "$work/client.json")
			lm=$(jfield misses "$work/client.json")
			dh=$(jfield hits "$work/stats.json")
			[ "$dh" = "$lh" ] || die "driver hits $dh, client hits $lh"
			grep -q '"verified":"ok"' "$work/client.json" ||
				die "client not verified: $(cat "$work/client.json")"
			kind=single
			[ "$batch" = 1 ] || kind=single:B$batch
			# shellcheck disable=SC2086 # the flags are several options
			row "$kind" "$name" "$pol" "$cap" "$slots" 1 "$lh" "$lm" \
				$(sim "$file" "$slots" "$pol" $sel --batch "$batch" $sim_flags)
		done
	done
done

[ "$concurrent" = 1 ] || {
	echo "live-vs-sim: $rows rows, $exact exact"
	[ -z "$out" ] || printf '{"rows": [\n%s\n]}\n' "$json_rows" >"$out"
	rm -rf "$work"
	exit 0
}

# Four clients at once. The reference is the simulator on one trace that
# interleaves the clients token by token (what a perfectly fair scheduler
# would produce); for granite, whose file format cannot be cut up here,
# the clients' solo simulations summed.
quarter=$((tokens / 4))
interleaved=$work/olmoe-interleaved.jsonl
awk -v q="$quarter" 'NR <= 4 * q { line[NR] = $0 }
	END { for (i = 1; i <= q; i++) for (c = 0; c < 4; c++) print line[c * q + i] }' \
	"$olmoe_prefix" >"$interleaved"

for t in $which_traces; do
	trace_setup "$t"
	for cap in $capacities; do
		slots=$(awk -v c="$cap" -v n=$((layers * experts)) 'BEGIN { printf "%d", c * n + 1e-9 }')
		for pol in $policies; do
			pool_up "$slots" "$layers" "$experts" "$pol"
			pids=
			for c in 0 1 2 3; do
				if [ "$t" = olmoe ]; then
					opts="--phase all --start-token $((c * quarter)) --steps $quarter"
				else
					case $c in
					0) opts="--prompt english_prose --phase all" ;;
					1) opts="--prompt code --phase all" ;;
					2) opts="--prompt math --phase all" ;;
					3) opts="--prompt english_prose --phase decode" ;;
					esac
				fi
				moecache-decode --pool "$pool" --trace "$file" $opts $shape \
					--no-check-weights $client_flags --json >"$work/client$c.json" \
					2>"$work/client$c.err" &
				pids="$pids $!"
			done
			for pid in $pids; do
				wait "$pid" || die "a client failed: $(cat "$work"/client*.err)"
			done
			pool_down
			lh=0 lm=0
			for c in 0 1 2 3; do
				lh=$((lh + $(jfield hits "$work/client$c.json")))
				lm=$((lm + $(jfield misses "$work/client$c.json")))
			done
			if [ "$t" = olmoe ]; then
				set -- $(sim "$interleaved" "$slots" "$pol" --phase all)
			else
				sh=0 sm=0
				for o in "--prompt english_prose --phase all" "--prompt code --phase all" \
					"--prompt math --phase all" "--prompt english_prose --phase decode"; do
					set -- $(sim "$file" "$slots" "$pol" $o)
					sh=$((sh + $1)) sm=$((sm + $2))
				done
				set -- $sh $sm
			fi
			row four "$name" "$pol" "$cap" "$slots" 4 "$lh" "$lm" "$1" "$2"
		done
	done
done

echo "live-vs-sim: $rows rows, $exact exact"
[ -z "$out" ] || printf '{"rows": [\n%s\n]}\n' "$json_rows" >"$out"
rm -rf "$work"
