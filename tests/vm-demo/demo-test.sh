#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-demo-test: the README's main job, `make demo`, as make check runs
# it: moecache-demo (tools/demo/demo.sh) in the test VM with DEMO_STEPS
# steps per client (default 4, to keep it short), then its last line
#   demo: clients=4 steps=N hit_rate=X verified=ok host_bytes=B private_bytes=P
# checked field by field against what README.md and the script's header
# state. Prints one "ok N - name # description" line per check and
# "demo: P passed, F failed, S skipped".
set -u

steps=${DEMO_STEPS:-4}
clients=4
work=$(mktemp -d "${TMPDIR:-/tmp}/moecache-demo-test.XXXXXX")
passed=0
failed=0
n=0

# check NAME DESCRIPTION COMMAND...: one TAP line for COMMAND's status.
check()
{
	name=$1
	desc=$2
	shift 2
	n=$((n + 1))
	if "$@"; then
		passed=$((passed + 1))
		echo "ok $n - $name # $desc"
	else
		failed=$((failed + 1))
		echo "not ok $n - $name # $desc"
		sed 's/^/#   /' "$work/demo.out"
	fi
}

# A key=value field of the report line.
field()
{
	sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" "$work/report"
}

DEMO_STEPS=$steps DEMO_CLIENTS=$clients moecache-demo >"$work/demo.out" 2>&1
demo_rc=$?
grep '^demo: clients=' "$work/demo.out" | tail -n 1 >"$work/report"
# The bytes of one expert of the demo's shape: the pool holds 16 x 64 of them once.
expert_bytes=$(moecache-decode --print-expert-bytes --d-model 128 --d-ff 256 --dtype f32)

report_shape()
{
	grep -Eq '^demo: clients=[0-9]+ steps=[0-9]+ hit_rate=[0-9]+\.[0-9]{3} verified=[a-zA-Z]+ host_bytes=[0-9]+ private_bytes=[0-9]+$' \
		"$work/report"
}
exits_zero() { [ "$demo_rc" = 0 ]; }
verified_ok() { [ "$(field verified)" = ok ]; }
counts() { [ "$(field clients)" = "$clients" ] && [ "$(field steps)" = $((clients * steps)) ]; }
hit_rate_in_range()
{
	awk -v r="$(field hit_rate)" 'BEGIN { exit !(r > 0 && r <= 1) }'
}
one_shared_copy()
{
	[ -n "$expert_bytes" ] && [ "$(field host_bytes)" = $((16 * 64 * expert_bytes)) ]
}
private_copies()
{
	[ "$(field private_bytes)" = $((clients * $(field host_bytes))) ]
}

check basic_demo_report_line "the demo ends with its report line, in the README's format" report_shape
check basic_demo_exit_status "moecache-demo exits 0" exits_zero
check basic_demo_verified "every client checked its outputs bit for bit: verified=ok" verified_ok
check basic_demo_clients_steps "clients=4 and steps counts every client's steps (4 x DEMO_STEPS)" counts
check basic_demo_hit_rate "the shared pool's hit rate, from the driver's stats, is in (0, 1]" \
	hit_rate_in_range
check basic_demo_host_bytes "host_bytes is one copy of the 16 x 64 experts" one_shared_copy
check basic_demo_private_bytes "private_bytes is what four private copies would take" private_copies

sed 's/^/# /' "$work/report"
rm -rf "$work"
echo "demo: $passed passed, $failed failed, 0 skipped"
[ "$failed" = 0 ]
