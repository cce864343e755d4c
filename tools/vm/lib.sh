# shellcheck shell=bash
# Helpers shared by the tools/vm scripts: where the cache lives, which kernel
# the module is built for, and how to fetch that kernel's image.

# shellcheck source=tools/kernels/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../kernels/lib.sh"

vm_die()
{
	echo "vm: $*" >&2
	exit 1
}

# Everything downloaded or extracted lives outside the repository.
vm_cache_dir()
{
	echo "${MOECACHE_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/moecache/vm}"
}

# The kernel the module is built against: MOECACHE_KVER, else the release
# MOECACHE_KERNEL names (tools/kernels/kernel), else the newest installed
# Debian amd64 headers (what the linux-headers-amd64 metapackage pulled), as
# kmod/build.mk picks them.
vm_kernel_version()
{
	if [ -n "${MOECACHE_KVER:-}" ]; then
		echo "$MOECACHE_KVER"
		return
	fi
	if [ -n "${MOECACHE_KERNEL:-}" ]; then
		(kernels_release "$MOECACHE_KERNEL")
		return
	fi
	local kver
	kver=$(find /usr/src -maxdepth 1 -name 'linux-headers-*-amd64' -printf '%f\n' 2>/dev/null |
		sed 's/^linux-headers-//' | sort -V | tail -n1)
	[ -n "$kver" ] || vm_die "no /usr/src/linux-headers-*-amd64: run 'make deps'"
	echo "$kver"
}

# The module tools/vm/run loads by default: the one kmod/build.mk builds for
# the same MOECACHE_KERNEL.
vm_default_module()
{
	echo "$1/build/kmod${MOECACHE_KERNEL:+-$MOECACHE_KERNEL}/moecache.ko"
}

# The ELF kernel inside a bzImage (Debian compresses it with xz, and with
# zstd from 6.x on in sid). qemu boots it through its PVH entry, which skips
# the decompressor: about 4 s less per boot under TCG. Nothing is written
# when there is no payload it can decompress.
vm_extract_vmlinux()
{
	local bzimage=$1 vmlinux=$2 magic offset tool
	for magic in xz zstd; do
		case $magic in
		xz) offset=$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$bzimage" | head -n1 | cut -d: -f1 || true) tool="xz -dc" ;;
		zstd) offset=$(LC_ALL=C grep -abo $'\x28\xb5\x2f\xfd' "$bzimage" | head -n1 | cut -d: -f1 || true) tool="zstd -dcq" ;;
		esac
		[ -n "$offset" ] || continue
		command -v "${tool%% *}" >/dev/null || continue
		# Both stop at the end of their stream and complain about what
		# follows it.
		tail -c +$((offset + 1)) "$bzimage" | $tool >"$vmlinux.tmp" 2>/dev/null || true
		if [ "$(head -c 4 "$vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
			mv "$vmlinux.tmp" "$vmlinux"
			return 0
		fi
		rm -f "$vmlinux.tmp"
	done
}

# Downloads the first of the packages $2... that exists into $1: from the
# system's apt sources (Debian 12's kernel), else from the private ones of
# tools/kernels/lib.sh (bookworm-backports, sid), else from the system's
# after refreshing its lists (stale or missing on a fresh machine).
vm_download()
{
	local into=$1 pkg
	shift
	for pkg in "$@"; do
		if (cd "$into" && apt-get download "$pkg") >&2 2>>"$into/apt.log" ||
			(kernels_apt_update && kernels_download "$into" "$pkg") 2>>"$into/apt.log"; then
			return 0
		fi
	done
	if [ "$(id -u)" = 0 ] && [ ! -e "$into/updated" ]; then
		apt-get update >&2 && touch "$into/updated"
		for pkg in "$@"; do
			(cd "$into" && apt-get download "$pkg") >&2 2>>"$into/apt.log" && return 0
		done
	fi
	return 1
}

# Prints the path of the kernel to boot for $1 (the ELF vmlinux when it could
# be extracted, else the bzImage), downloading the matching image package
# first if needed, and keeps the loop driver beside it (a block device for
# the O_DIRECT tests), decompressed. Debian's 6.1 and 6.12 ship both in
# linux-image-KVER; newer kernels split the image (linux-binary-KVER) from
# its modules (linux-modules-KVER). /boot is never touched.
vm_fetch_kernel()
{
	local kver=$1 cache dir tmp image loop config
	cache=$(vm_cache_dir)
	dir=$cache/kernel-$kver
	if [ -s "$dir/vmlinuz" ] && [ -s "$dir/modules/loop.ko" ]; then
		vm_kernel_image "$dir"
		return
	fi
	mkdir -p "$cache"
	# Several runs may start at once: one downloads, the others wait.
	exec {lock_fd}>"$cache/.lock"
	flock "$lock_fd"
	if [ ! -s "$dir/vmlinuz" ] || [ ! -s "$dir/modules/loop.ko" ]; then
		tmp=$(mktemp -d "$cache/fetch.XXXXXX")
		mkdir -p "$tmp/debs" "$tmp/x"
		vm_download "$tmp/debs" "linux-image-$kver" "linux-image-$kver-unsigned" ||
			{ cat "$tmp/debs/apt.log" >&2; rm -rf "$tmp"; vm_die "cannot download linux-image-$kver"; }
		vm_fetch_extract "$tmp" "$kver"
		if [ -z "$(vm_fetch_find "$tmp" image "$kver")" ]; then
			vm_download "$tmp/debs" "linux-binary-$kver" ||
				{ cat "$tmp/debs/apt.log" >&2; rm -rf "$tmp"; vm_die "linux-image-$kver has no image, and no linux-binary-$kver"; }
			vm_fetch_extract "$tmp" "$kver"
		fi
		if [ -z "$(vm_fetch_find "$tmp" loop "$kver")" ]; then
			vm_download "$tmp/debs" "linux-modules-$kver" ||
				{ cat "$tmp/debs/apt.log" >&2; rm -rf "$tmp"; vm_die "no loop module for $kver, and no linux-modules-$kver"; }
			vm_fetch_extract "$tmp" "$kver"
		fi
		image=$(vm_fetch_find "$tmp" image "$kver")
		loop=$(vm_fetch_find "$tmp" loop "$kver")
		[ -n "$image" ] || { rm -rf "$tmp"; vm_die "no vmlinuz of $kver in $(ls "$tmp/debs")"; }
		[ -n "$loop" ] || { rm -rf "$tmp"; vm_die "no loop.ko of $kver in $(ls "$tmp/debs")"; }
		mkdir -p "$dir.new/modules"
		mv "$image" "$dir.new/vmlinuz"
		vm_ko_unpack "$loop" "$dir.new/modules/loop.ko"
		config=$(find "$tmp/x" \( -name "config-$kver" -o -path "*/modules/$kver/config" \) | head -n1)
		[ -z "$config" ] || mv "$config" "$dir.new/config"
		vm_extract_vmlinux "$dir.new/vmlinuz" "$dir.new/vmlinux"
		(cd "$tmp/debs" && ls -- *.deb) >"$dir.new/package"
		rm -rf "$dir" "$tmp"
		mv "$dir.new" "$dir"
	fi
	flock -u "$lock_fd"
	exec {lock_fd}>&-
	vm_kernel_image "$dir"
}

# Writes the module file $1 (.ko, or compressed as .ko.xz, .ko.zst, .ko.gz)
# uncompressed to $2.
vm_ko_unpack()
{
	case $1 in
	*.ko) cp "$1" "$2" ;;
	*.ko.xz) xz -dc "$1" >"$2" ;;
	*.ko.zst) zstd -dcq "$1" >"$2" ;;
	*.ko.gz) gzip -dc "$1" >"$2" ;;
	esac
}

# Unpacks what vm_fetch_kernel keeps from each downloaded package under
# $1/x: the image, its config and the loop driver, not the other modules.
vm_fetch_extract()
{
	local tmp=$1 kver=$2 deb
	for deb in "$tmp"/debs/*.deb; do
		[ -e "$deb.done" ] && continue
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards \
			'./boot/*' "./*lib/modules/$kver/vmlinuz" \
			"./*lib/modules/$kver/config" '*/drivers/block/loop.ko*' 2>/dev/null || true
		touch "$deb.done"
	done
}

# The extracted image ($2 = image) or loop driver ($2 = loop) of kernel $3.
vm_fetch_find()
{
	local tmp=$1 what=$2 kver=$3
	case $what in
	image) find "$tmp/x" -type f \( -name "vmlinuz-$kver" -o -path "*/modules/$kver/vmlinuz" \) | head -n1 ;;
	loop) find "$tmp/x" -type f -name 'loop.ko*' | head -n1 ;;
	esac
}

vm_kernel_image()
{
	if [ -s "$1/vmlinux" ] && [ "${MOECACHE_VM_BZIMAGE:-0}" != 1 ]; then
		echo "$1/vmlinux"
	else
		echo "$1/vmlinuz"
	fi
}

# ---- MOECACHE_VM_HOST_USR: the host's /usr over 9p ----

# Prints the module files of $2... found in folder $1, each after the
# modules it depends on (modinfo's depends), for insmod in that order.
declare -A _vm_mod_seen=()
vm_module_order()
{
	local dir=$1 name f
	shift
	for name in "$@"; do
		[ -z "${_vm_mod_seen[$name]:-}" ] || continue
		_vm_mod_seen[$name]=1
		f=$dir/$name.ko
		[ -f "$f" ] || f=$dir/${name//_/-}.ko
		# Not in the packages: built into the kernel (6.12 and later build
		# virtio_pci in), nothing to load. A module really missing shows
		# as the 9p mount failing at boot.
		[ -f "$f" ] || continue
		# shellcheck disable=SC2046 # depends is a comma-separated list
		vm_module_order "$dir" $(modinfo -F depends "$f" | tr ',' ' ')
		basename "$f"
	done
}

# Prints the folder holding kernel $1's 9p client and virtio-pci modules,
# and vgem (a DRM device whose buffers are dma-bufs, for the fake ROCm
# driver's banks: lib/python/tests), from its linux-image package,
# decompressed, and the file "order" that lists them in insmod order;
# downloads and extracts them the first time.
vm_fetch_9p_modules()
{
	local kver=$1 cache out tmp deb pkg f f_name
	cache=$(vm_cache_dir)
	out=$cache/kernel-$kver/modules-host
	if [ ! -s "$out/order" ]; then
		mkdir -p "$cache"
		exec {lock9p_fd}>"$cache/.lock"
		flock "$lock9p_fd"
	fi
	if [ ! -s "$out/order" ]; then
		tmp=$(mktemp -d "$cache/fetch9p.XXXXXX")
		mkdir -p "$tmp/debs" "$tmp/x" "$tmp/m"
		# The same packages as vm_fetch_kernel, from the same sources: the
		# modules are in linux-image-KVER up to 6.12, in linux-modules-KVER
		# after.
		for pkg in "linux-image-$kver" "linux-modules-$kver"; do
			if ! vm_download "$tmp/debs" "$pkg" "$pkg-unsigned"; then
				continue
			fi
			for deb in "$tmp"/debs/*.deb; do
				dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards '*/fs/9p/*' \
					'*/net/9p/*' '*/drivers/virtio/*' '*/fs/netfs/*' '*/fs/fscache/*' \
					'*/drivers/gpu/drm/vgem/*' '*/drivers/gpu/drm/drm.ko*' \
					'*/drivers/gpu/drm/drm_panel_orientation_quirks.ko*' \
					'*/drivers/gpu/drm/drm_shmem_helper.ko*' '*/drivers/gpu/drm/drm_kms_helper.ko*' \
					2>/dev/null || true
			done
			[ -z "$(find "$tmp/x" -name '9p.ko*' | head -n1)" ] || break
		done
		if [ -z "$(find "$tmp/x" -name '9p.ko*' | head -n1)" ]; then
			cat "$tmp/debs/apt.log" >&2 2>/dev/null
			rm -rf "$tmp"
			vm_die "no 9p modules of $kver in linux-image-$kver or linux-modules-$kver"
		fi
		while read -r f; do
			f_name=$(basename "$f")
			vm_ko_unpack "$f" "$tmp/m/${f_name%.ko*}.ko"
		done < <(find "$tmp/x" -name '*.ko*')
		vm_module_order "$tmp/m" 9p 9pnet_virtio virtio_pci vgem >"$tmp/m/order"
		rm -rf "$out"
		mv "$tmp/m" "$out"
		rm -rf "$tmp"
	fi
	if [ -n "${lock9p_fd:-}" ]; then
		flock -u "$lock9p_fd"
		exec {lock9p_fd}>&-
	fi
	echo "$out"
}

# Runs VM test suite $1 (a program that ends with "WORD: P passed, F
# failed, S skipped") in a fresh VM with tools/vm/run, shows its output and
# keeps it in $2. Sets suite_passed, suite_failed, suite_skipped (its tests),
# suite_skips (one "name: reason" per "ok N - name # SKIP reason" line) and
# suite_problems (what else went wrong: no summary, a kernel report, rmmod,
# a crash, the time), each problem counted as one more failure. The VM
# settings come from the environment (MOECACHE_KERNEL, MOECACHE_VM_*).
vm_run_suite()
{
	local suite=$1 log=$2 rc summary here
	here=$(dirname "${BASH_SOURCE[0]}")
	suite_passed=0
	suite_failed=0
	suite_skipped=0
	suite_skips=()
	suite_problems=()
	MOECACHE_VM_TIMEOUT=${MOECACHE_VM_TIMEOUT:-1200} "$here/run" "$suite" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	summary=$(grep -E '^[a-z0-9-]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n1)
	if [ -n "$summary" ]; then
		read -r suite_passed suite_failed suite_skipped < <(sed 's/^[a-z0-9-]*://' <<<"$summary" | grep -Eo '[0-9]+' | tr '\n' ' ')
	else
		suite_passed=$(grep -Ec '^ok [0-9]+ ' "$log")
		suite_failed=$(grep -Ec '^not ok [0-9]+ ' "$log")
		suite_problems+=("$suite printed no 'WORD: N passed, N failed, N skipped' line")
	fi
	mapfile -t suite_skips < <(sed -nE 's/^ok [0-9]+ - ([^ ]+) # SKIP (.*)$/\1: \2/p' "$log")
	if [ "${#suite_skips[@]}" != "$suite_skipped" ]; then
		suite_problems+=("$suite counted $suite_skipped skipped but printed ${#suite_skips[@]} SKIP lines")
	fi
	# The harness's own verdict: a kernel report, rmmod, a crash or the time.
	if grep -q '^vm: FAILED: ' "$log"; then
		suite_problems+=("VM run of $suite: $(sed -n 's/^vm: FAILED: //p' "$log" | tail -n1)")
	elif [ "$rc" != 0 ] && [ "$suite_failed" = 0 ]; then
		suite_problems+=("$suite exited $rc")
	fi
}
