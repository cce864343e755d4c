#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The phases of `make check-debug`, run inside the test VM on the debug
# kernel (tools/debug-kernel/check copies this file to /data):
#
#   sh /data/vm-check.sh PHASE...
#
#   suites    every VM test suite (CHECK_DEBUG_SUITES: program names)
#   fuzz      moecache-fuzz: FUZZ_OPS operations from FUZZ_SEED in 4 lanes, and
#             FUZZ_STRICT_OPS in one lane (exact checks)
#   faultinj  moecache-faultinj, then FAULT_RANDOM random rounds of each call
#   stress    moecache-stress for STRESS_SECONDS
#   soak      tests/stress/soak.sh (needs moecached and moecache-decode)
#   leaks     unloads the module, scans for leaks: always last (KASAN kernel)
#   kcsan     unloads the module, checks that KCSAN watched: always last
#             (KCSAN kernel)
#
# After each phase the kernel log is checked for reports (KASAN, lockdep,
# UBSAN, BUG, WARNING...) and cleared, so that each report is blamed on its
# phase; the harness then checks whatever comes after. The kmemleak banner at
# boot is no report; allocation-failure dumps during faultinj are expected
# (their "Call Trace" is not counted there, the reports' own headers are),
# and so is kmemleak's note that it could not allocate a scan area.
# A KCSAN report counts when a frame of it is in the module; the kernel's
# own races are listed, not counted (/data/kcsan-reports.awk sorts them).
# Prints "check-debug: PHASE: ok|FAILED|SKIPPED (N s)" per phase and exits
# non-zero if any failed.
set -u

reports='BUG:|kernel BUG at|WARNING:|Oops|general protection|Call Trace|Kernel panic|KASAN|UBSAN|KFENCE|kmemleak|suspected memory leak|refcount_t:|list_add corruption|list_del corruption|list corruption|detected stall|soft lockup|hung_task|blocked for more than|possible recursive locking|inconsistent lock state|circular locking'
benign='kmemleak: Kernel memory leak detector initialized'
kmemleak=/sys/kernel/debug/kmemleak
kcsan=/sys/kernel/debug/kcsan
status=0

now()
{
	cut -d' ' -f1 /proc/uptime
}

since()
{
	awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'
}

# Checks the kernel log written since the last call, then clears it.
# $1: a pattern of lines that are no report in this phase.
kernel_log_clean()
{
	dmesg -c >/tmp/dmesg.all 2>/dev/null || dmesg >/tmp/dmesg.all
	ignore=$benign${1:+|$1}
	: >/tmp/kcsan.kernel
	awk -v module=moecache -v foreign=/tmp/kcsan.kernel -f /data/kcsan-reports.awk \
		/tmp/dmesg.all >/tmp/dmesg.phase || cp /tmp/dmesg.all /tmp/dmesg.phase
	if [ -s /tmp/kcsan.kernel ]; then
		echo "check-debug: note: $(wc -l </tmp/kcsan.kernel) KCSAN reports without a frame in the module (not counted):"
		sort -u /tmp/kcsan.kernel | head -n 20 | sed 's/^/    /'
	fi
	if grep -E "$reports" /tmp/dmesg.phase | grep -v -E "$ignore" >/tmp/dmesg.found; then
		echo "check-debug: kernel reports:"
		# The context of each report: what follows its first line.
		first=$(head -n 1 /tmp/dmesg.found)
		grep -F -A 40 -- "$first" /tmp/dmesg.phase | head -n 80 | sed 's/^/    /'
		return 1
	fi
	return 0
}

phase_end()
{
	name=$1 rc=$2 start=$3 ignore=${4:-}
	if ! kernel_log_clean "$ignore"; then
		rc=1
	fi
	case $rc in
	0) echo "check-debug: $name: ok ($(since "$start") s)" ;;
	77) echo "check-debug: $name: SKIPPED ($(since "$start") s)" ;;
	*)
		echo "check-debug: $name: FAILED ($(since "$start") s)"
		status=1
		;;
	esac
}

# ---- phases ----

phase_suites()
{
	rc=0
	for suite in ${CHECK_DEBUG_SUITES:-}; do
		suite_start=$(now)
		"$suite"
		r=$?
		echo "check-debug: suite $suite: exit $r ($(since "$suite_start") s)"
		[ "$r" = 0 ] || rc=1
	done
	return $rc
}

phase_fuzz()
{
	rc=0
	moecache-fuzz --seed "${FUZZ_SEED:-1}" --ops "${FUZZ_OPS:-200000}" --lanes 4 || rc=1
	moecache-fuzz --seed "$((${FUZZ_SEED:-1} + 1))" --ops "${FUZZ_STRICT_OPS:-50000}" \
		--lanes 1 || rc=1
	return $rc
}

phase_faultinj()
{
	moecache-faultinj --random "${FAULT_RANDOM:-20}"
}

phase_stress()
{
	moecache-stress --seconds "${STRESS_SECONDS:-60}" --readers 3 --agent-restarts 6
}

phase_soak()
{
	if ! command -v moecached >/dev/null 2>&1 || ! command -v moecache-decode >/dev/null 2>&1; then
		echo "check-debug: soak needs moecached and moecache-decode, not built"
		return 77
	fi
	sh /data/soak.sh
}

# Leaks the module left: after rmmod every pool is gone, so anything of ours
# kmemleak still finds unreferenced is a leak.
phase_leaks()
{
	rc=0
	if [ -d /sys/module/moecache ]; then
		rmmod moecache || {
			echo "check-debug: rmmod moecache failed"
			rc=1
		}
	fi
	[ -e "$kmemleak" ] || {
		echo "check-debug: no $kmemleak"
		return 1
	}
	# kmemleak reports objects unreferenced for 5 s and more: wait, scan twice.
	sleep 6
	echo scan >"$kmemleak"
	sleep 1
	echo scan >"$kmemleak"
	if [ -s "$kmemleak" ]; then
		echo "check-debug: kmemleak:"
		head -n 120 "$kmemleak" | sed 's/^/    /'
		rc=1
	fi
	return $rc
}

# KCSAN was on and watching the whole run (no report is worth nothing from
# a detector that was off), then the module goes (its release paths race
# too). The module's own reports fail the phases they came in.
phase_kcsan()
{
	rc=0
	[ -e "$kcsan" ] || {
		echo "check-debug: no $kcsan: not a KCSAN kernel"
		return 1
	}
	sed 's/^/    /' "$kcsan" | head -n 12
	if ! grep -qx 'enabled: 1' "$kcsan"; then
		echo "check-debug: KCSAN is not enabled"
		rc=1
	fi
	watched=$(sed -n 's/^setup_watchpoints: //p' "$kcsan")
	if [ "${watched:-0}" -le 0 ]; then
		echo "check-debug: KCSAN set up no watchpoint"
		rc=1
	fi
	if [ -d /sys/module/moecache ]; then
		rmmod moecache || {
			echo "check-debug: rmmod moecache failed"
			rc=1
		}
	fi
	return $rc
}

# ---- main ----

[ -e "$kmemleak" ] || [ -e "$kcsan" ] || echo "check-debug: warning: no kmemleak in this kernel"
# Boot and insmod: reports there count too. Leaks from before the tests do not.
t=$(now)
if [ -e "$kmemleak" ]; then
	echo scan >"$kmemleak"
	echo clear >"$kmemleak"
fi
phase_end boot 0 "$t"

for phase in "$@"; do
	t=$(now)
	case $phase in
	suites) phase_suites ;;
	fuzz) phase_fuzz ;;
	faultinj) phase_faultinj ;;
	stress) phase_stress ;;
	soak) phase_soak ;;
	leaks) phase_leaks ;;
	kcsan) phase_kcsan ;;
	*)
		echo "check-debug: unknown phase $phase"
		false
		;;
	esac
	rc=$?
	if [ "$phase" = faultinj ]; then
		# Failed allocations dump their stack (warn_alloc), and kmemleak
		# falls back to scanning a whole object: no reports by themselves.
		phase_end "$phase" "$rc" "$t" 'Call Trace|kmemleak: Cannot allocate a scan area'
	else
		phase_end "$phase" "$rc" "$t"
	fi
done
exit $status
