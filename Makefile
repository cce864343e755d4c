# moecache: top-level build. `make` builds the module and all userspace into build/.
# Each area adds its programs, libraries and tests through a build.mk fragment.

BUILD    ?= build
OBJ      := $(BUILD)/obj
BIN      := $(BUILD)/bin
LIBOUT   := $(BUILD)/lib
TESTOUT  := $(BUILD)/test

CC       ?= cc
PKG_CONFIG ?= pkg-config
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter \
	    -Wstrict-prototypes -Wmissing-prototypes -fPIC -pthread -Iuapi -Ilib/include -MMD -MP
LDFLAGS  += -pthread

JSONC_CFLAGS := $(shell $(PKG_CONFIG) --cflags json-c 2>/dev/null)
JSONC_LIBS   := $(shell $(PKG_CONFIG) --libs json-c 2>/dev/null || echo -ljson-c)
NL_CFLAGS    := $(shell $(PKG_CONFIG) --cflags libnl-genl-3.0 2>/dev/null)
NL_LIBS      := $(shell $(PKG_CONFIG) --libs libnl-genl-3.0 2>/dev/null || echo -lnl-genl-3 -lnl-3)
CRIT_CFLAGS  := $(shell $(PKG_CONFIG) --cflags criterion 2>/dev/null)
CRIT_LIBS    := $(shell $(PKG_CONFIG) --libs criterion 2>/dev/null || echo -lcriterion)
CFLAGS   += $(JSONC_CFLAGS) $(NL_CFLAGS)

# Link inputs with archives last, whatever order prerequisites were added in.
LINK_INPUTS = $(filter-out %.a,$^) $(filter %.a,$^)

# Filled in by the fragments.
PROGRAMS   :=
LIBRARIES  :=
UNIT_TESTS :=
VM_TESTS   :=
VM_SUITES  :=
EXTRA_ALL  :=

.PHONY: all
all: module userspace

include $(sort $(wildcard */build.mk */*/build.mk */*/*/build.mk))

.PHONY: userspace
userspace: $(LIBRARIES) $(PROGRAMS) $(UNIT_TESTS) $(VM_TESTS) $(EXTRA_ALL)

# The unit tests alone (make coverage builds them with --coverage).
.PHONY: unit-tests
unit-tests: $(UNIT_TESTS)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CFLAGS_$(firstword $(subst /, ,$*))) -c $< -o $@

# The host's Debian release and the package names that differ between the
# releases moecache supports: one table, tools/releases (12 and 13).
DEBIAN_RELEASE := $(shell . /etc/os-release 2>/dev/null; echo $${VERSION_CODENAME:-unknown})
release_field = $(shell awk -v r='$(DEBIAN_RELEASE)' '!/^\#/ && $$1 == r { print $$$(1); exit }' \
	tools/releases)
# The release's kernel source (checkpatch, the debug kernels).
DEB_KERNEL_SOURCE := $(call release_field,4)

# Debian packages the build, the tests and the VM harness need; the fragments
# add theirs to DEB_PACKAGES.
DEB_PACKAGES_BASE := build-essential linux-headers-amd64 qemu-system-x86 busybox-static cpio \
	kmod pkg-config sparse $(DEB_KERNEL_SOURCE) xz-utils libcriterion-dev libjson-c-dev \
	libnl-genl-3-dev libdrm-dev libhsakmt-dev ca-certificates git

.PHONY: deps
deps:
	$(if $(DEB_KERNEL_SOURCE),,$(error Debian release '$(DEBIAN_RELEASE)' is not one of tools/releases))
	@tools/deps.sh $(sort $(DEB_PACKAGES_BASE) $(DEB_PACKAGES))

# deps first, then a fresh make (pkg-config answers change once the packages
# are there) that builds, runs the unit tests, the VM tests and the lint.
.PHONY: check
check:
	+@$(MAKE) --no-print-directory deps
	+@MAKE="$(MAKE)" UNIT_TESTS="$(UNIT_TESTS)" VM_PROGRAMS="$(PROGRAMS) $(VM_TESTS)" \
		VM_SUITES="$(VM_SUITES)" tests/run-check

# A clone of the committed tree alone in an empty folder runs the demo and
# moecache-live (part of make check).
.PHONY: check-bare-clone
check-bare-clone:
	+@MAKE="$(MAKE)" tools/check-bare-clone

# W=1 and sparse on the module, checkpatch on kmod/ and uapi/.
.PHONY: lint
lint:
	+@MAKE="$(MAKE)" tools/lint.sh

# An interactive shell in the test VM, with the module loaded.
.PHONY: vm-shell
vm-shell: all
	tools/vm/run

# For tools/vm/run: the programs that must go into the VM besides build/bin.
.PHONY: print-vm-tests
print-vm-tests:
	@echo $(VM_TESTS)

.PHONY: clean
clean:
	rm -rf $(BUILD)

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
