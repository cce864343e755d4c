#!/usr/bin/env bash
# `make lint`: the module built with W=1 without a warning and sparse without
# a warning, on 6.1 and 6.12, and checkpatch (the newest kernel's) clean on
# kmod/ and uapi/. Prints "ok - NAME" or
# "not ok - NAME" per check and ends with "lint: N passed, N failed, N skipped".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
make_cmd=${MAKE:-make}
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

result()
{
	local ok=$1 name=$2
	if [ "$ok" = 0 ]; then
		echo "ok - $name"
		passed=$((passed + 1))
	else
		echo "not ok - $name"
		sed 's/^/    /' "$log"
		failed=$((failed + 1))
	fi
}

# Any compiler, sparse or modpost diagnostic fails, as does a failed build.
kbuild_check()
{
	local rc
	$make_cmd --no-print-directory "$@" >"$log" 2>&1
	rc=$?
	if [ $rc != 0 ] || grep -Ei 'warning:|error:' "$log" | grep -Evq '^make(\[[0-9]+\])?: warning: jobserver'; then
		return 1
	fi
}

# Debian 12's kernel and Debian 13's (6.12), one of them the host's own
# (installed headers), the other fetched by tools/kernels/kernel, each with
# W=1 and sparse.
# LINT_KERNELS="6.1 6.12 latest" adds the newest kernel (docs/kernels.md).
for kernel in ${LINT_KERNELS:-6.1 6.12}; do
	kbuild_check MOECACHE_KERNEL="$kernel" module-w1
	result $? "module builds with W=1 and no warning on $kernel"
	# Kbuild only warns, with no "warning:", when sparse cannot run: each
	# source must have been checked.
	kbuild_check MOECACHE_KERNEL="$kernel" module-sparse &&
		grep -Eq '^ +CHECK +.*\.c$' "$log" && ! grep -q 'sparse is not available' "$log"
	result $? "sparse (C=2) reports nothing on the module on $kernel"
done

# checkpatch from the newest kernel's scripts (the linux-source package of
# the newest Debian kernel, fetched once into the cache); the host
# release's installed linux-source-X.Y (tools/releases) when that cannot be
# fetched (no network).
checkpatch_script()
{
	tools/kernels/kernel checkpatch latest && return
	echo "lint: note: no checkpatch of the newest kernel; using the host release's" >&2
	MOECACHE_KERNEL= tools/kernels/kernel checkpatch
}

if checkpatch=$(checkpatch_script 2>"$log"); then
	echo "lint: checkpatch.pl of $(basename "$(dirname "$(dirname "$checkpatch")")" | sed 's/^checkpatch-/linux /')"
	# Out of tree there is no MAINTAINERS file nor git history to consult.
	# The driver is held to --strict; uapi/ cannot use BIT(), which
	# --strict asks for, so it gets the default checks. kmod/compat.h is
	# where the driver tests LINUX_VERSION_CODE, which checkpatch asks
	# in-tree code to avoid (and to compare the other way round).
	for f in kmod/*.c kmod/*.h uapi/*.h; do
		[ -f "$f" ] || continue
		opts=(--strict)
		case $f in
		uapi/*) opts=() ;;
		kmod/compat.h) opts+=(--ignore "LINUX_VERSION_CODE,CONSTANT_COMPARISON") ;;
		esac
		perl "$checkpatch" --no-tree --quiet --show-types "${opts[@]}" -f "$f" >"$log" 2>&1
		result $? "checkpatch $f"
	done
else
	result 1 "checkpatch available"
fi

echo "lint: $passed passed, $failed failed, 0 skipped"
[ "$failed" = 0 ]
