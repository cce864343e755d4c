# The debug kernel (KASAN, lockdep, kmemleak, UBSAN, fault injection, KCOV)
# and `make check-debug`, which runs the VM suites, the fuzzer, fault
# injection, the ordering stress and the kill -9 soak on it. See
# docs/reliability.md.
DEB_PACKAGES += linux-source-6.1 bc bison flex libelf-dev libssl-dev dwarves python3 xz-utils cpio

# Builds the kernel into the cache (once) and prints its folder.
.PHONY: debug-kernel
debug-kernel:
	@tools/debug-kernel/build --dir

# The module against the debug kernel, in build/debug/kmod (build/kmod stays
# the one for Debian's kernel).
.PHONY: debug-module
debug-module:
	+@kdir=$$(tools/debug-kernel/build) && \
		$(MAKE) --no-print-directory -B BUILD=$(BUILD)/debug KDIR=$$kdir module

# VM_PROGRAMS names what the fragments build, not what build/bin holds:
# make expands a whole recipe before running its first line, so a wildcard
# here would list build/bin as it was before `userspace` built it (empty in
# a fresh clone). tools/debug-kernel/check skips the names not built.
.PHONY: check-debug
check-debug:
	+@$(MAKE) --no-print-directory deps
	+@$(MAKE) --no-print-directory -k userspace
	+@MAKE="$(MAKE)" VM_PROGRAMS="$(PROGRAMS) $(VM_TESTS)" \
		VM_SUITES="$(VM_SUITES)" tools/debug-kernel/check
