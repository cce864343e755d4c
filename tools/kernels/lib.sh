# shellcheck shell=bash
# The kernel matrix's machinery, shared by tools/kernels/kernel and
# tools/vm/lib.sh: which Debian kernel a name stands for, a private apt
# configuration that downloads its packages (the system's apt sources are
# never touched), its headers extracted into the cache, and a debootstrap
# chroot for the kernels whose build tools need a newer C library or
# compiler than the host has. docs/kernels.md describes it.
#
# A kernel is named by a series, as MOECACHE_KERNEL takes it:
#   6.1     Debian 12's kernel: the installed linux-headers-6.1.*-amd64 on
#           Debian 12, bookworm's from the private sources on Debian 13
#   6.12    Debian 13's kernel: installed on Debian 13, the newest of
#           bookworm-backports on Debian 12
#   latest  the newest kernel Debian ships (sid)
#   X.Y     any other series in the private sources
# or by a Debian kernel release (6.12.95+deb12-amd64), taken as it is. The
# private sources are the host release's kernel-suites in tools/releases.

kernels_die()
{
	echo "kernels: $*" >&2
	exit 1
}

kernels_cache_dir()
{
	echo "${MOECACHE_KERNELS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/moecache/kernels}"
}

# Serialises the steps that write the cache (downloads, extraction, the
# chroot) between runs started at once; the others wait.
kernels_lock()
{
	local cache
	cache=$(kernels_cache_dir)
	mkdir -p "$cache"
	exec {kernels_lock_fd}>"$cache/.lock"
	flock "$kernels_lock_fd"
}

kernels_unlock()
{
	flock -u "$kernels_lock_fd"
	exec {kernels_lock_fd}>&-
}

# The private apt configuration: its own sources list, package lists, state
# and download cache, all under the cache folder. A suite added to
# MOECACHE_KERNELS_SUITES becomes a place to find kernels in.
kernels_apt_dir()
{
	echo "$(kernels_cache_dir)/apt"
}

# The host's Debian release (its codename), and a field of its line in
# tools/releases (2: version, 3: series, 4: source, 5: kernel suites). A
# release the table does not know is an error, said once by name.
kernels_host_release()
{
	(
		# shellcheck disable=SC1091
		. /etc/os-release 2>/dev/null || true
		echo "${VERSION_CODENAME:-unknown}"
	)
}

kernels_release_field()
{
	local release=$1 field=$2 value
	value=$(awk -v r="$release" -v f="$field" '!/^#/ && $1 == r { print $f; exit }' \
		"$(dirname "${BASH_SOURCE[0]}")/../releases")
	[ -n "$value" ] || kernels_die "Debian release '$release' is not one of tools/releases"
	echo "$value"
}

kernels_suites()
{
	if [ -n "${MOECACHE_KERNELS_SUITES:-}" ]; then
		echo "$MOECACHE_KERNELS_SUITES"
		return
	fi
	kernels_release_field "$(kernels_host_release)" 5 | tr ',' ' '
}

kernels_mirror()
{
	echo "${MOECACHE_KERNELS_MIRROR:-http://deb.debian.org/debian}"
}

# Writes the configuration when the suites or the mirror changed.
kernels_apt_config()
{
	local dir conf suite want
	dir=$(kernels_apt_dir)
	conf=$dir/apt.conf
	want=$(
		for suite in $(kernels_suites); do
			echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(kernels_mirror) $suite main"
		done
	)
	if [ ! -f "$conf" ] || [ "$(cat "$dir/sources.list" 2>/dev/null)" != "$want" ]; then
		mkdir -p "$dir/lists/partial" "$dir/archives/partial"
		echo "$want" >"$dir/sources.list"
		: >"$dir/status"
		# The lists of the old sources would answer for the new ones.
		find "$dir/lists" -maxdepth 1 -type f -delete
		# Valid-Until is not checked: a mirror that lags behind, or a
		# snapshot, would otherwise stop every download. The signatures
		# still are.
		cat >"$conf.tmp" <<EOF
Dir::State::Lists "$dir/lists";
Dir::State::status "$dir/status";
Dir::Cache "$dir";
Dir::Cache::archives "$dir/archives";
Dir::Etc::SourceList "$dir/sources.list";
Dir::Etc::SourceParts "/dev/null";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "/dev/null";
APT::Architecture "amd64";
APT::Architectures "amd64";
APT::Sandbox::User "root";
Acquire::Check-Valid-Until "false";
Acquire::Languages "none";
EOF
		mv "$conf.tmp" "$conf"
	fi
	echo "$conf"
}

# apt with the private configuration. APT_CONFIG names the main file, which
# replaces /etc/apt/apt.conf; the settings above replace every path.
kernels_apt()
{
	local conf
	conf=$(kernels_apt_config)
	APT_CONFIG=$conf "$@"
}

# Downloads the package lists when they are missing or older than
# MOECACHE_KERNELS_MAX_AGE seconds (a day); `tools/kernels/kernel update`
# forces it. An old list is kept when the mirror cannot be reached.
kernels_apt_update()
{
	local force=${1:-0} dir stamp age
	dir=$(kernels_apt_dir)
	kernels_apt_config >/dev/null
	stamp=$dir/lists/.updated
	if [ "$force" = 0 ] && [ -f "$stamp" ]; then
		age=$(($(date +%s) - $(stat -c %Y "$stamp")))
		[ "$age" -gt "${MOECACHE_KERNELS_MAX_AGE:-86400}" ] || return 0
	fi
	# apt's own lock on the lists would fail a second update at once.
	exec {update_fd}>"$dir/.update-lock"
	flock "$update_fd"
	if [ "$force" = 1 ] || [ ! -f "$stamp" ] ||
		[ $(($(date +%s) - $(stat -c %Y "$stamp"))) -gt "${MOECACHE_KERNELS_MAX_AGE:-86400}" ]; then
		if kernels_apt apt-get update -q >&2; then
			touch "$stamp"
		elif [ -f "$stamp" ]; then
			echo "kernels: note: cannot refresh the package lists; using those of $(date -r "$stamp" -u '+%F %R UTC')" >&2
		else
			kernels_die "cannot download the package lists of $(kernels_suites)"
		fi
	fi
	exec {update_fd}>&-
}

# One field of a package's record in the private lists ($3: the version;
# the candidate when empty).
kernels_apt_field()
{
	local pkg=$1 field=$2 version=${3:-}
	kernels_apt apt-cache show "$pkg${version:+=$version}" 2>/dev/null |
		awk -v f="$field" '
			$0 == "" { exit }
			index($0, f ": ") == 1 { print substr($0, length(f) + 3); exit }'
}

# The Debian kernel release a name stands for (see the top of this file).
kernels_release()
{
	local name=$1 kver versions version deps memo
	case $name in
	*-*)
		echo "$name"
		return
		;;
	latest) ;;
	[0-9]*.[0-9]*)
		# A series the host has headers for (Debian 12's 6.1 through
		# linux-headers-amd64) is the installed one.
		kver=$(find /usr/src -maxdepth 1 -name "linux-headers-$name.*-amd64" -printf '%f\n' 2>/dev/null |
			sed 's/^linux-headers-//' | sort -V | tail -n1)
		if [ -n "$kver" ]; then
			echo "$kver"
			return
		fi
		;;
	*) kernels_die "unknown kernel '$name': 6.1, 6.12, latest, another X.Y or a release like 6.12.95+deb12-amd64" ;;
	esac
	kernels_apt_update
	# Remembered until the lists change: apt-cache reads them all each time.
	memo=$(kernels_apt_dir)/release-$name
	if [ -s "$memo" ] && [ "$memo" -nt "$(kernels_apt_dir)/lists/.updated" ]; then
		cat "$memo"
		return
	fi
	# Every version of the metapackage in the private sources, newest first;
	# its dependency names the release.
	versions=$(kernels_apt apt-cache madison linux-headers-amd64 | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' |
		sort -Vr | uniq)
	for version in $versions; do
		if [ "$name" = latest ] || [[ $version == "$name".* ]]; then
			deps=$(kernels_apt_field linux-headers-amd64 Depends "$version")
			kver=$(grep -Eo 'linux-headers-[^ ,]+-amd64' <<<"$deps" | head -n1 | sed 's/^linux-headers-//')
			[ -n "$kver" ] || kernels_die "linux-headers-amd64 $version names no headers package"
			echo "$kver" | tee "$memo"
			return
		fi
	done
	kernels_die "no linux-headers-amd64 of series $name in $(kernels_suites)"
}

# The installed headers of $1, when the system has them.
kernels_installed_headers()
{
	local kver=$1
	if [ -f "/usr/src/linux-headers-$kver/Makefile" ]; then
		echo "/usr/src/linux-headers-$kver"
	elif [ -f "/lib/modules/$kver/build/Makefile" ]; then
		echo "/lib/modules/$kver/build"
	else
		return 1
	fi
}

# Where the headers of $1 are built with: "host", or the suite whose chroot
# has the C library and compiler its tools need (the kbuild package's libc6
# is newer than the host's, or the compiler it names is not a host package).
kernels_build_place()
{
	local kver=$1 deps kbuild need have gcc suite dir
	dir=$(kernels_cache_dir)
	if kernels_installed_headers "$kver" >/dev/null || [ -f "$dir/headers-$kver/.complete" ]; then
		echo host
		return
	fi
	for suite in "$dir"/chroot-*; do
		if [ -f "$suite/.complete" ] && [ -f "$suite/usr/src/linux-headers-$kver/Makefile" ]; then
			echo "${suite##*/chroot-}"
			return
		fi
	done
	kernels_apt_update
	deps=$(kernels_apt_field "linux-headers-$kver" Depends)
	[ -n "$deps" ] || kernels_die "no package linux-headers-$kver in $(kernels_suites)"
	kbuild=$(grep -Eo 'linux-kbuild-[^ ,]+' <<<"$deps" | head -n1)
	need=$(kernels_apt_field "$kbuild" Depends | grep -Eo 'libc6 \(>= [^)]+\)' | sed 's/^libc6 (>= //; s/)$//')
	have=$(dpkg-query -W -f='${Version}' libc6 2>/dev/null)
	gcc=$(grep -Eo '(^|, )gcc-[0-9]+(-for-host)?' <<<"$deps" | sed 's/^, //' | head -n1)
	# The compiler the kernel was built with must be the host's own
	# (installed), not only a package of the host's release: Debian 13
	# has gcc-12, but builds with gcc-14, so 6.1 builds in a bookworm chroot.
	if { [ -z "$need" ] || dpkg --compare-versions "$have" ge "$need"; } &&
		{ [ -z "$gcc" ] || [ "$(dpkg-query -W -f='${Status}' "$gcc" 2>/dev/null)" = "install ok installed" ]; }; then
		echo host
		return
	fi
	suite=$(kernels_apt apt-cache policy "linux-headers-$kver" |
		awk '/^ +[0-9]+ [a-z]+:\/\// { split($3, s, "/"); print s[1]; exit }')
	[ -n "$suite" ] || kernels_die "cannot tell which suite ships linux-headers-$kver"
	echo "$suite"
}

# Downloads packages into $1 with the private configuration.
kernels_download()
{
	local into=$1
	shift
	mkdir -p "$into"
	(cd "$into" && kernels_apt apt-get download -q "$@") >&2
}

# The headers of $1 for a host build, extracted into the cache: the
# -amd64 package, the -common one it includes and the kbuild tools. Prints
# the folder to build against (KDIR).
kernels_host_headers()
{
	local kver=$1 dir tmp deps pkgs common deb
	dir=$(kernels_cache_dir)/headers-$kver
	if [ ! -f "$dir/.complete" ]; then
		kernels_lock
		if [ ! -f "$dir/.complete" ]; then
			kernels_apt_update
			deps=$(kernels_apt_field "linux-headers-$kver" Depends)
			pkgs="linux-headers-$kver $(grep -Eo 'linux-(headers-[^ ,]+-common|kbuild-[^ ,]+)' <<<"$deps" | tr '\n' ' ')"
			tmp=$(mktemp -d "$(kernels_cache_dir)/headers.XXXXXX")
			# shellcheck disable=SC2086
			kernels_download "$tmp/debs" $pkgs || kernels_die "cannot download $pkgs"
			for deb in "$tmp"/debs/*.deb; do
				dpkg-deb -x "$deb" "$tmp/root"
			done
			# The -amd64 Makefile includes the -common one by its
			# installed path.
			common=$(grep -Eo 'linux-headers-[^ ,]+-common' <<<"$deps" | head -n1)
			sed -i "s|^include /usr/src/$common/|include $dir/root/usr/src/$common/|" \
				"$tmp/root/usr/src/linux-headers-$kver/Makefile"
			rm -rf "$tmp/debs" "$dir"
			mkdir -p "$dir"
			mv "$tmp/root" "$dir/root"
			rmdir "$tmp"
			touch "$dir/.complete"
		fi
		kernels_unlock
	fi
	echo "$dir/root/usr/src/linux-headers-$kver"
}

# A minimal debootstrap chroot of suite $1 with make, cached and reused.
# Prints its folder.
kernels_chroot()
{
	local suite=$1 dir
	dir=$(kernels_cache_dir)/chroot-$suite
	if [ ! -f "$dir/.complete" ]; then
		kernels_lock
		if [ ! -f "$dir/.complete" ]; then
			command -v debootstrap >/dev/null || kernels_die "debootstrap is missing: run 'make deps'"
			echo "kernels: creating the $suite chroot (debootstrap, once)" >&2
			rm -rf "$dir.tmp" "$dir"
			debootstrap --variant=minbase --include=make \
				--keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
				"$suite" "$dir.tmp" "$(kernels_mirror)" >&2 ||
				{ rm -rf "$dir.tmp"; kernels_die "debootstrap $suite failed"; }
			printf 'Acquire::Check-Valid-Until "false";\nAcquire::Languages "none";\n' \
				>"$dir.tmp/etc/apt/apt.conf.d/90moecache"
			mv "$dir.tmp" "$dir"
			touch "$dir/.complete"
		fi
		kernels_unlock
	fi
	echo "$dir"
}

# Runs a command in the chroot $1 in a mount namespace of its own, with
# /proc and the folders named in KERNELS_BIND (space separated) mounted at
# the same paths as on the host. The mounts end with the command.
kernels_in_chroot()
{
	local dir=$1
	shift
	local script='set -e
dir=$1
shift
mount -t proc proc "$dir/proc"
for b in $KERNELS_BIND; do
	mkdir -p "$dir$b"
	mount --bind "$b" "$dir$b"
done
exec chroot "$dir" "$@"'
	env -u APT_CONFIG PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		unshare --mount --propagation private sh -c "$script" sh "$dir" "$@"
}

# The headers of $1 installed in the chroot of suite $2 by the chroot's
# apt, which also brings the compiler they name, and perl: W=1 runs
# scripts/kernel-doc, a Perl script before 6.16 that needs perl's modules.
# Prints the chroot.
kernels_chroot_headers()
{
	local kver=$1 suite=$2 dir
	dir=$(kernels_chroot "$suite")
	if [ ! -f "$dir/usr/src/linux-headers-$kver/Makefile" ]; then
		kernels_lock
		if [ ! -f "$dir/usr/src/linux-headers-$kver/Makefile" ]; then
			echo "kernels: installing linux-headers-$kver in the $suite chroot" >&2
			KERNELS_BIND= kernels_in_chroot "$dir" sh -c "apt-get update -q &&
				DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
					linux-headers-$kver perl" >&2 ||
				kernels_die "cannot install linux-headers-$kver in the $suite chroot"
		fi
		kernels_unlock
	fi
	echo "$dir"
}

# scripts/checkpatch.pl of kernel $1's series (with the files it reads
# beside it), from the installed /usr/src/linux-source-X.Y.tar.xz or else
# the linux-source-X.Y package of the private sources. Extracted once.
kernels_checkpatch()
{
	local kver=$1 series tarball dir tmp
	series=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$kver")
	dir=$(kernels_cache_dir)/checkpatch-$series
	if [ ! -x "$dir/scripts/checkpatch.pl" ]; then
		kernels_lock
		if [ ! -x "$dir/scripts/checkpatch.pl" ]; then
			tmp=$(mktemp -d "$(kernels_cache_dir)/checkpatch.XXXXXX")
			tarball=/usr/src/linux-source-$series.tar.xz
			if [ ! -f "$tarball" ]; then
				kernels_apt_update
				kernels_download "$tmp" "linux-source-$series" ||
					{ rm -rf "$tmp"; kernels_die "cannot download linux-source-$series"; }
				dpkg-deb --fsys-tarfile "$tmp"/linux-source-"$series"_*.deb |
					tar -x -C "$tmp" "./usr/src/linux-source-$series.tar.xz"
				tarball=$tmp/usr/src/linux-source-$series.tar.xz
			fi
			mkdir -p "$tmp/src"
			tar -xJf "$tarball" -C "$tmp/src" --strip-components=1 --wildcards \
				'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
				'*/scripts/const_structs.checkpatch' >&2 ||
				{ rm -rf "$tmp"; kernels_die "no checkpatch.pl in $tarball"; }
			rm -rf "$dir"
			mv "$tmp/src" "$dir"
			rm -rf "$tmp"
		fi
		kernels_unlock
	fi
	echo "$dir/scripts/checkpatch.pl"
}

# Fetches the headers of $1 for place $2 (kernels_build_place) and prints
# the folder to build against: on the host, or inside the chroot.
kernels_headers()
{
	local kver=$1 place=$2
	if kernels_installed_headers "$kver"; then
		return
	elif [ "$place" = host ]; then
		kernels_host_headers "$kver"
	else
		kernels_chroot_headers "$kver" "$place" >/dev/null
		echo "/usr/src/linux-headers-$kver"
	fi
}
