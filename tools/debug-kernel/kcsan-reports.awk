# SPDX-License-Identifier: GPL-2.0
# Sorts the KCSAN reports of a kernel log: prints the log without the
# reports that have no frame in the module, and appends the first line of
# each of those to the file named by -v foreign=FILE. A report with a frame
# "[MODULE]" (-v module=NAME, default moecache) stays in the output, where
# the report scan of tools/debug-kernel/vm-check.sh finds it.
#
#   awk -v module=moecache -v foreign=FILE -f kcsan-reports.awk LOG
#
# A report runs from its "BUG: KCSAN:" line to the next line of '='s (or
# the end of the log). POSIX awk: busybox runs it in the VM.
BEGIN {
	if (module == "")
		module = "moecache"
	n = 0
	inside = 0
}

function flush_report(i, ours) {
	ours = 0
	for (i = 1; i <= n; i++)
		if (index(buf[i], "[" module "]"))
			ours = 1
	if (ours) {
		for (i = 1; i <= n; i++)
			print buf[i]
	} else if (foreign != "") {
		print buf[1] >> foreign
	}
	n = 0
	inside = 0
}

inside && index($0, "====================") {
	buf[++n] = $0
	flush_report()
	next
}

inside {
	buf[++n] = $0
	next
}

index($0, "BUG: KCSAN:") {
	inside = 1
	n = 0
	buf[++n] = $0
	next
}

{
	print
}

END {
	if (inside)
		flush_report()
}
