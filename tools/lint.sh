#!/usr/bin/env bash
# `make lint`: the module built with W=1 without a warning, sparse without a
# warning, and checkpatch clean on kmod/ and uapi/. Prints "ok - NAME" or
# "not ok - NAME" per check and ends with "lint: N passed, N failed".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
# shellcheck source=tools/vm/lib.sh
. tools/vm/lib.sh
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
	local target=$1 rc
	$make_cmd --no-print-directory "$target" >"$log" 2>&1
	rc=$?
	if [ $rc != 0 ] || grep -Ei 'warning:|error:' "$log" | grep -Evq '^make(\[[0-9]+\])?: warning: jobserver'; then
		return 1
	fi
}

kbuild_check module-w1
result $? "module builds with W=1 and no warning"
kbuild_check module-sparse
result $? "sparse (C=2) reports nothing on the module"

# checkpatch comes from Debian's kernel source tarball, once, into the cache.
checkpatch_script()
{
	local tarball dir
	tarball=$(find /usr/src -maxdepth 1 -name 'linux-source-*.tar.xz' | sort -V | tail -n1)
	[ -n "$tarball" ] || { echo "no /usr/src/linux-source-*.tar.xz: run 'make deps'" >&2; return 1; }
	dir=$(vm_cache_dir)/checkpatch-$(basename "$tarball" .tar.xz)
	if [ ! -x "$dir/scripts/checkpatch.pl" ]; then
		rm -rf "$dir.tmp"
		mkdir -p "$dir.tmp"
		tar -xJf "$tarball" -C "$dir.tmp" --strip-components=1 --wildcards \
			'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
			'*/scripts/const_structs.checkpatch' >&2 || return 1
		rm -rf "$dir"
		mv "$dir.tmp" "$dir"
	fi
	echo "$dir/scripts/checkpatch.pl"
}

if checkpatch=$(checkpatch_script 2>"$log"); then
	# Out of tree there is no MAINTAINERS file nor git history to consult.
	# The driver is held to --strict; uapi/ cannot use BIT(), which
	# --strict asks for, so it gets the default checks.
	for f in kmod/*.c kmod/*.h uapi/*.h; do
		[ -f "$f" ] || continue
		strict=--strict
		ignore=
		case $f in uapi/*) strict= ;; esac
		# The one place that tests kernel versions, by design (kmod/compat.h).
		case $f in kmod/compat.h) ignore=--ignore=LINUX_VERSION_CODE,CONSTANT_COMPARISON ;; esac
		perl "$checkpatch" --no-tree --quiet --show-types $strict $ignore -f "$f" >"$log" 2>&1
		result $? "checkpatch $f"
	done
else
	result 1 "checkpatch available"
fi

echo "lint: $passed passed, $failed failed"
[ "$failed" = 0 ]
