#!/bin/sh
# shellcheck disable=SC2086 # $shape is a list of options, split on purpose
# SPDX-License-Identifier: GPL-2.0
# The kill -9 soak: one pool, moecached serving it, 8 verifying decode
# clients decoding different stretches of the routing trace; meanwhile
# SIGKILL a running client 200 times and the agent 20 times (every tenth
# client kill), restarting each at once. Clients wait through agent deaths
# (their default --keep-waiting) and verify every expert's output. Two of
# the clients are never killed, so that runs complete during the killing.
#
# Passes when every client run that was not killed ends with verified=ok,
# and, once everything has stopped, the pool holds no pin, no client and no
# request, and can be destroyed (nothing kept it open). In the debug VM,
# make check-debug then scans for leaks.
#
# Runs where /dev/moecache exists and moecached, moecache-decode and
# moecachectl are on PATH (the test VM: tools/vm/run sh soak.sh).
# Environment: SOAK_CLIENTS (8), SOAK_WITNESSES (2: clients never killed),
# SOAK_CLIENT_KILLS (200), SOAK_AGENT_EVERY
# (10: one agent kill per this many client kills), SOAK_STEPS (steps per
# client run, 8), SOAK_TRACE (/traces/olmoe-1b-7b.decode.jsonl),
# SOAK_COPY_DELAY_US (200: widens the window of a kill in mid-copy).
set -u

clients=${SOAK_CLIENTS:-8}
witnesses=${SOAK_WITNESSES:-2}
kills_wanted=${SOAK_CLIENT_KILLS:-200}
agent_every=${SOAK_AGENT_EVERY:-10}
steps=${SOAK_STEPS:-8}
trace=${SOAK_TRACE:-/traces/olmoe-1b-7b.decode.jsonl}
copy_delay=${SOAK_COPY_DELAY_US:-200}
pool=soak-$$
layers=16
experts=64
slots=$((layers * experts / 4))
# Split on purpose where used: it is a list of options.
shape="--d-model 64 --d-ff 128 --dtype f32"
work=$(mktemp -d "${TMPDIR:-/tmp}/moecache-soak.XXXXXX")
agent_pid=

say()
{
	echo "soak: $*"
}

fail()
{
	echo "soak: FAILED: $*" >&2
	exit 1
}

for prog in moecached moecache-decode moecachectl; do
	command -v "$prog" >/dev/null 2>&1 || fail "$prog is not on PATH"
done
[ -r "$trace" ] || fail "no trace at $trace (SOAK_TRACE)"
[ -e /dev/moecache ] || fail "no /dev/moecache"

start_agent()
{
	moecached --pool "$pool" --foreground --copy-delay-us "$copy_delay" \
		>>"$work/agent.log" 2>&1 &
	agent_pid=$!
}

# The loop below spawns nothing it can avoid: under the debug kernel a
# process start costs a lot of the one CPU the clients share. Per-slot state
# lives in variables: pid_N, run_N, killed_N.

# Client slot $1: one run over a stretch of the trace chosen by the run number.
start_client()
{
	slot=$1
	run=0
	eval "run=\$((\${run_$slot:-0} + 1))"
	eval "run_$slot=$run killed_$slot="
	start_token=$(((slot * 97 + run * 31) % 400))
	moecache-decode --pool "$pool" --trace "$trace" --start-token "$start_token" \
		--steps "$steps" $shape --label "c$slot.$run" \
		>"$work/out.$slot.$run" 2>&1 &
	eval "pid_$slot=$!"
}

# Reaps slot $1's run. One that ended by itself (not by our SIGKILL: exit
# 137) must have verified its output.
collect_client()
{
	slot=$1
	pid='' run='' killed=''
	eval "pid=\$pid_$slot run=\$run_$slot killed=\$killed_$slot"
	# (the shell's "Killed" notice goes with wait's stderr)
	wait "$pid" 2>/dev/null
	rc=$?
	if [ -n "$killed" ] && [ "$rc" = 137 ]; then
		client_kills=$((client_kills + 1))
		rm -f "$work/out.$slot.$run"
		return 0
	fi
	finished=$((finished + 1))
	if [ "$rc" != 0 ] || ! grep -q 'verified=ok' "$work/out.$slot.$run"; then
		bad=$((bad + 1))
		echo "soak: client run $slot.$run failed (exit $rc):" >&2
		sed 's/^/    /' "$work/out.$slot.$run" >&2
	fi
	rm -f "$work/out.$slot.$run"
}

# A pseudo-random number in [0, $1), from a generator in shell arithmetic.
rng=$$
random_below()
{
	rng=$(((rng * 1103515245 + 12345) % 2147483648))
	rnd=$(((rng / 256) % $1))
}

# Running and not a zombie (the shell reaps its children only in wait).
alive()
{
	state=
	# shellcheck disable=SC2034 # the other fields are read past
	read -r f_pid f_comm state f_rest 2>/dev/null <"/proc/$1/stat"
	[ -n "$state" ] && [ "$state" != Z ]
}

expert_bytes=$(moecache-decode --print-expert-bytes $shape) || fail "moecache-decode"
moecachectl pool create "$pool" --layers $layers --experts $experts --slots $slots \
	--expert-bytes "$expert_bytes" >/dev/null || fail "cannot create the pool"
moecache-decode --pool "$pool" --fill $shape >/dev/null || fail "cannot load the weights"
say "pool $pool: $layers x $experts experts, $slots slots; $clients clients," \
	"$kills_wanted client kills, one agent kill per $agent_every"

start=$(cut -d' ' -f1 /proc/uptime)
start_agent
i=0
while [ $i -lt "$clients" ]; do
	start_client $i
	i=$((i + 1))
done

client_kills=0
agent_kills=0
finished=0
bad=0
while [ $client_kills -lt "$kills_wanted" ]; do
	# 20..400 ms between kills.
	random_below 380
	sleep "0.$(printf '%03d' $((20 + rnd)))"
	# Runs that ended by themselves are collected and started again.
	i=0
	while [ $i -lt "$clients" ]; do
		eval "pid=\$pid_$i"
		if ! alive "$pid"; then
			collect_client $i
			start_client $i
		fi
		i=$((i + 1))
	done
	# The first $witnesses clients are never killed: their runs verify
	# through the others' deaths and the agent's.
	random_below $((clients - witnesses))
	victim=$((witnesses + rnd))
	eval "pid=\$pid_$victim"
	if alive "$pid"; then
		eval "killed_$victim=1"
		kill -KILL "$pid" 2>/dev/null
		collect_client "$victim"
		start_client "$victim"
	fi
	if [ $((client_kills % agent_every)) = 0 ] && [ $client_kills -gt 0 ] &&
		[ $agent_kills -lt $((client_kills / agent_every)) ]; then
		kill -KILL "$agent_pid" 2>/dev/null
		wait "$agent_pid" 2>/dev/null
		agent_kills=$((agent_kills + 1))
		start_agent
		say "$client_kills client kills, $agent_kills agent kills, $finished runs" \
			"finished ($bad failed), $(awk -v a="$start" -v b="$(cut -d' ' -f1 /proc/uptime)" \
			'BEGIN { printf "%.0f", b - a }') s"
	fi
done

# The last runs end by themselves.
i=0
while [ $i -lt "$clients" ]; do
	collect_client $i
	i=$((i + 1))
done
kill -TERM "$agent_pid"
wait "$agent_pid"
agent_rc=$?
end=$(cut -d' ' -f1 /proc/uptime)

moecachectl stats "$pool" --json >"$work/stats" 2>&1 || fail "stats: $(cat "$work/stats")"
# The pool's state: "key": value fields of the totals' "state" object.
field()
{
	sed -n "s/.*\"$1\" *: *\\([0-9]*\\).*/\\1/p" "$work/stats" | head -n 1
}
stats=$(for f in hits misses evictions pins queued inflight filling clients agent_pid; do
	printf '%s=%s ' "$f" "$(field $f)"
done)
say "after: $stats"
leftover=
for f in pins queued inflight filling clients agent_pid; do
	[ "$(field $f)" = 0 ] || leftover="$leftover $f=$(field $f)"
done
moecachectl pool destroy "$pool" >/dev/null || leftover="$leftover (pool cannot be destroyed)"

say "$client_kills client kills, $agent_kills agent kills, $finished client runs finished" \
	"($bad failed), agent exit $agent_rc on SIGTERM, $(awk -v a="$start" -v b="$end" \
	'BEGIN { printf "%.0f", b - a }') s"
if [ $agent_kills -gt 0 ] && [ -s "$work/agent.log" ]; then
	grep -i -E 'error|fail' "$work/agent.log" | head -n 5 | sed 's/^/soak: agent log: /'
fi
rm -rf "$work"
[ -z "$leftover" ] || fail "left behind after every process exited:$leftover"
[ "$bad" = 0 ] || fail "$bad client runs did not verify"
[ "$finished" -gt 0 ] || fail "no client run finished"
[ "$agent_rc" = 0 ] || fail "moecached exited $agent_rc on SIGTERM"
say "ok"
