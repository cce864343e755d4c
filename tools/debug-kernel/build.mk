# The debug kernels and `make check-debug`, which runs the VM suites, the
# fuzzer, fault injection, the ordering stress and the kill -9 soak on them:
# the KASAN flavour (KASAN, lockdep, kmemleak, UBSAN, fault injection, KCOV)
# and the KCSAN flavour (the data-race detector). See docs/reliability.md.
DEB_PACKAGES += $(DEB_KERNEL_SOURCE) bc bison flex libelf-dev libssl-dev dwarves python3 xz-utils cpio \
	libcriterion-dev

# Builds the kernel of a flavour (DEBUG_FLAVOUR, default kasan) into the
# cache (once) and prints its folder.
DEBUG_FLAVOUR ?= kasan
.PHONY: debug-kernel
debug-kernel:
	@tools/debug-kernel/build --flavour $(DEBUG_FLAVOUR) --dir

# The module against a debug kernel, in build/debug/kmod for the KASAN
# flavour, build/debug-kcsan/kmod for KCSAN (build/kmod stays the one for
# Debian's kernel).
.PHONY: debug-module
debug-module:
	+@kdir=$$(tools/debug-kernel/build --flavour $(DEBUG_FLAVOUR)) && \
		$(MAKE) --no-print-directory -B \
		BUILD=$(BUILD)/$(if $(filter kasan,$(DEBUG_FLAVOUR)),debug,debug-$(DEBUG_FLAVOUR)) \
		KDIR=$$kdir module

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

# Which KCSAN reports fail check-debug (tools/debug-kernel/kcsan-reports.awk).
DEBUG_KCSAN_UNIT := $(TESTOUT)/unit/debug-kernel-kcsan-reports
UNIT_TESTS += $(DEBUG_KCSAN_UNIT)

$(DEBUG_KCSAN_UNIT): $(OBJ)/tests/unit/debug-kernel/test_kcsan_reports.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS)
