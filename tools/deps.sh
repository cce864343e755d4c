#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are not
# installed yet (run by `make deps`, as root). Does nothing, and needs no
# root, when every one is there.
set -euo pipefail

missing=()
for pkg in "$@"; do
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: the $# packages are installed"
	exit 0
fi
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages; run 'make deps' as root" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_install()
{
	# Another apt run (a second make in parallel) holds the lock for a while.
	apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"
}
# The package lists may be absent or stale on a fresh machine: update once.
if ! apt_install; then
	apt-get update -q -o DPkg::Lock::Timeout=600
	apt_install
fi
