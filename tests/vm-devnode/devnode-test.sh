#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-devnode: the rights of /dev/moecache where no udev rule runs (the
# test VM's initramfs has none), the driver's own default and its dev_gid
# parameter, and udev's widening, which the rule does with chgrp and chmod
# (tools/install/guest-check runs the real rule under systemd). Reloads the
# module, so it runs alone in its VM (tools/vm/run moecache-devnode), and
# leaves it loaded with the parameters it found. Prints one
# "ok N - name # description" line per check and
# "moecache-devnode: P passed, F failed, S skipped".
set -u

node=/dev/moecache
ko=/lib/modules/$(cat /etc/vm/module).ko
params=$(cat /etc/vm/module-params 2>/dev/null)
group=4242
nobody=65534
passed=0
failed=0
n=0
out=$(mktemp "${TMPDIR:-/tmp}/moecache-devnode.XXXXXX")

# check NAME DESCRIPTION COMMAND...: one TAP line for COMMAND's status.
check()
{
	name=$1
	desc=$2
	shift 2
	n=$((n + 1))
	if "$@" >"$out" 2>&1; then
		passed=$((passed + 1))
		echo "ok $n - $name # $desc"
	else
		failed=$((failed + 1))
		echo "not ok $n - $name # $desc"
		sed 's/^/#   /' "$out"
	fi
}

# rights OCTAL UID GID: the node's mode and owner.
rights()
{
	got=$(stat -c '%a %u %g' "$node")
	echo "$node: $got"
	[ "$got" = "$1 $2 $3" ]
}

# opens UID GIDS: the open succeeds with those credentials, no capability.
opens() { moecache-devnode-open "$1" "$2" "$node"; }

# refused UID GIDS ERRNO: the open fails with ERRNO.
refused()
{
	got=$(moecache-devnode-open "$1" "$2" "$node")
	echo "open as $1:$2: $got"
	[ "$got" = "$3" ]
}

# reload [PARAM...]: the module again, with the VM's parameters and PARAM.
reload()
{
	if [ -e /sys/module/moecache ]; then
		rmmod moecache || return 1
	fi
	# shellcheck disable=SC2086 # the parameters are meant to be split
	insmod "$ko" $params "$@"
}

root_opens() { sh -c "exec 3<>$node"; }
param_is() { [ "$(cat /sys/module/moecache/parameters/dev_gid)" = "$1" ]; }
# load_fails PARAM: insmod refuses it with EINVAL and leaves no module.
load_fails()
{
	! reload "$@" 2>"$out.err"
	rc=$?
	cat "$out.err"
	grep -q 'Invalid argument' "$out.err" && [ "$rc" = 0 ] && [ ! -e /sys/module/moecache ]
}
# What udev's rule does: group moecache (here $group), mode 0660.
widen_and_open()
{
	chgrp "$group" "$node" && chmod 0660 "$node" && opens "$nobody" "$group"
}
restored()
{
	reload && rights 600 0 0
}

# The VM runner widens the node as udev would (MOECACHE_VM_NODE_MODE):
# start from a fresh load, which is what the driver alone makes.
check basic_default_fresh_load "the module loads again with the VM's parameters" reload
check basic_default_node_root_only "without udev the driver makes the node root:root 0600" \
	rights 600 0 0
check basic_default_dev_gid "dev_gid defaults to -1" param_is -1
check permission_default_other_uid "another uid cannot open the default node (EACCES)" \
	refused "$nobody" "$nobody" EACCES
check permission_default_group_member "nor can a member of any group (EACCES)" \
	refused "$nobody" "$nobody,$group" EACCES
check basic_default_owner_opens "uid 0 with no capability opens the 0600 node it owns" opens 0 0
check basic_udev_widening_group_opens \
	"once udev's rule gives the node group moecache 0660, its members open it" \
	widen_and_open
check permission_udev_widening_outsider "and nobody else does (EACCES)" \
	refused "$nobody" "$nobody" EACCES

check basic_dev_gid_reload "the module loads with dev_gid=$group" reload "dev_gid=$group"
check basic_dev_gid_node_mode "with dev_gid the node is 0666 (the check is in open)" rights 666 0 0
check basic_dev_gid_primary_group "a process whose group is dev_gid opens it" opens "$nobody" "$group"
check basic_dev_gid_supplementary_group "so does one with dev_gid among its supplementary groups" \
	opens "$nobody" "$nobody,$group"
check permission_dev_gid_outsider "anybody outside the group gets EACCES from open" \
	refused "$nobody" "$nobody" EACCES
check permission_dev_gid_root_without_caps "so does uid 0 without CAP_DAC_OVERRIDE" \
	refused 0 0 EACCES
check basic_dev_gid_root_opens "root with its capabilities opens it" root_opens

check bad_input_dev_gid_negative "dev_gid=-2 fails the load (EINVAL), no module left" \
	load_fails dev_gid=-2
check bad_input_dev_gid_not_a_number "dev_gid=x fails the load" load_fails dev_gid=x
check lifetime_default_restored "the module loads again with the VM's parameters, node 0600" \
	restored

rm -f "$out" "$out.err"
echo "moecache-devnode: $passed passed, $failed failed, 0 skipped"
[ "$failed" = 0 ]
