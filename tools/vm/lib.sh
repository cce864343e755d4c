# shellcheck shell=bash
# Helpers shared by the tools/vm scripts: where the cache lives, which kernel
# the module is built for, and how to fetch that kernel's image.

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

# The kernel the module is built against: the newest installed Debian amd64
# headers (what the linux-headers-amd64 metapackage pulled), as kmod/build.mk
# picks it.
vm_kernel_version()
{
	if [ -n "${MOECACHE_KVER:-}" ]; then
		echo "$MOECACHE_KVER"
		return
	fi
	local kver
	kver=$(find /usr/src -maxdepth 1 -name 'linux-headers-*-amd64' -printf '%f\n' 2>/dev/null |
		sed 's/^linux-headers-//' | sort -V | tail -n1)
	[ -n "$kver" ] || vm_die "no /usr/src/linux-headers-*-amd64: run 'make deps'"
	echo "$kver"
}

# The ELF kernel inside a bzImage (Debian compresses it with xz). qemu boots it
# through its PVH entry, which skips the decompressor: about 4 s less per boot
# under TCG. Nothing is written when there is no xz payload.
vm_extract_vmlinux()
{
	local bzimage=$1 vmlinux=$2 offset
	offset=$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$bzimage" | head -n1 | cut -d: -f1)
	[ -n "$offset" ] || return 0
	# xz stops at the end of its stream and complains about what follows it.
	tail -c +$((offset + 1)) "$bzimage" | xz -dc >"$vmlinux.tmp" 2>/dev/null || true
	if [ "$(head -c 4 "$vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
		mv "$vmlinux.tmp" "$vmlinux"
	else
		rm -f "$vmlinux.tmp"
	fi
}

# Prints the path of the kernel to boot for $1 (the ELF vmlinux when it could
# be extracted, else the bzImage), downloading the matching linux-image
# package first if needed. /boot is never touched.
vm_fetch_kernel()
{
	local kver=$1 cache dir vmlinuz tmp deb pkg
	cache=$(vm_cache_dir)
	dir=$cache/kernel-$kver
	vmlinuz=$dir/vmlinuz
	if [ -s "$vmlinuz" ] && [ -s "$dir/modules/loop.ko" ]; then
		vm_kernel_image "$dir"
		return
	fi
	mkdir -p "$cache"
	# Several runs may start at once: one downloads, the others wait.
	exec {lock_fd}>"$cache/.lock"
	flock "$lock_fd"
	if [ ! -s "$vmlinuz" ] || [ ! -s "$dir/modules/loop.ko" ]; then
		tmp=$(mktemp -d "$cache/fetch.XXXXXX")
		for pkg in "linux-image-$kver" "linux-image-$kver-unsigned"; do
			if (cd "$tmp" && apt-get download "$pkg") >&2 2>"$tmp/apt.log"; then
				break
			fi
			# The package lists may be missing or stale on a fresh machine.
			if [ "$(id -u)" = 0 ] && [ ! -e "$tmp/updated" ]; then
				apt-get update >&2 && touch "$tmp/updated"
				(cd "$tmp" && apt-get download "$pkg") >&2 2>"$tmp/apt.log" && break
			fi
		done
		deb=$(find "$tmp" -maxdepth 1 -name 'linux-image-*.deb' | head -n1)
		if [ -z "$deb" ]; then
			cat "$tmp/apt.log" >&2
			rm -rf "$tmp"
			vm_die "cannot download linux-image-$kver"
		fi
		# The image and its config, and the loop driver (a block device for
		# the O_DIRECT tests); not the other modules.
		mkdir -p "$tmp/x"
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x -C "$tmp/x" --wildcards './boot/*' '*/drivers/block/loop.ko'
		[ -s "$tmp/x/boot/vmlinuz-$kver" ] || vm_die "$deb has no boot/vmlinuz-$kver"
		mkdir -p "$dir.new"
		mv "$tmp/x/boot/vmlinuz-$kver" "$dir.new/vmlinuz"
		mv "$tmp/x/boot/config-$kver" "$dir.new/config" 2>/dev/null || true
		mkdir -p "$dir.new/modules"
		find "$tmp/x" -name loop.ko -exec mv {} "$dir.new/modules/" \;
		vm_extract_vmlinux "$dir.new/vmlinuz" "$dir.new/vmlinux"
		basename "$deb" >"$dir.new/package"
		rm -rf "$dir" "$tmp"
		mv "$dir.new" "$dir"
	fi
	flock -u "$lock_fd"
	exec {lock_fd}>&-
	vm_kernel_image "$dir"
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
		[ -f "$f" ] || vm_die "no module $name in the kernel package's 9p and virtio modules"
		# shellcheck disable=SC2046 # depends is a comma-separated list
		vm_module_order "$dir" $(modinfo -F depends "$f" | tr ',' ' ')
		basename "$f"
	done
}

# Prints the folder holding kernel $1's 9p client and virtio-pci modules
# (from its linux-image package, decompressed) and the file "order" that
# lists them in insmod order; downloads and extracts them the first time.
vm_fetch_9p_modules()
{
	local kver=$1 cache out tmp deb pkg f
	cache=$(vm_cache_dir)
	out=$cache/kernel-$kver/modules-9p
	if [ ! -s "$out/order" ]; then
		mkdir -p "$cache"
		exec {lock9p_fd}>"$cache/.lock"
		flock "$lock9p_fd"
	fi
	if [ ! -s "$out/order" ]; then
		tmp=$(mktemp -d "$cache/fetch9p.XXXXXX")
		for pkg in "linux-image-$kver" "linux-image-$kver-unsigned"; do
			(cd "$tmp" && apt-get download "$pkg") >&2 2>"$tmp/apt.log" && break
		done
		deb=$(find "$tmp" -maxdepth 1 -name 'linux-image-*.deb' | head -n1)
		if [ -z "$deb" ]; then
			cat "$tmp/apt.log" >&2
			rm -rf "$tmp"
			vm_die "cannot download linux-image-$kver for its 9p modules"
		fi
		mkdir -p "$tmp/x" "$tmp/m"
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards '*/fs/9p/*' \
			'*/net/9p/*' '*/drivers/virtio/*' '*/fs/netfs/*' '*/fs/fscache/*'
		while read -r f; do
			case $f in
			*.ko) cp "$f" "$tmp/m/" ;;
			*.ko.xz) xz -dc "$f" >"$tmp/m/$(basename "$f" .xz)" ;;
			*.ko.zst) zstd -qdc "$f" >"$tmp/m/$(basename "$f" .zst)" ;;
			esac
		done < <(find "$tmp/x" -name '*.ko*')
		vm_module_order "$tmp/m" 9p 9pnet_virtio virtio_pci >"$tmp/m/order"
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
