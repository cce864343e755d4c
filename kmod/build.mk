# The kernel module, built by Kbuild. Kbuild writes its objects beside the
# sources, so the sources are mirrored into a folder under build/ as links and
# the module is built there.
#
# Which kernel (docs/kernels.md):
#   make                          the newest installed Debian headers
#                                 (linux-headers-*-amd64) -> build/kmod
#   make KVER=$(uname -r)         the installed headers of that release,
#                                 /lib/modules/KVER/build -> build/kmod
#   make KDIR=<tree>              any prepared kernel tree -> build/kmod
#   make MOECACHE_KERNEL=6.12     a kernel of the matrix (6.1, 6.12, latest, or
#                                 a Debian release), fetched by
#                                 tools/kernels/kernel -> build/kmod-6.12
# tools/vm/run boots the kernel of the same MOECACHE_KERNEL with that module.
MOECACHE_KERNEL ?=
KMOD_SRCS := Kbuild $(wildcard kmod/*.c kmod/*.h uapi/*.h)

ifneq ($(MOECACHE_KERNEL),)
ifeq ($(filter command line environment,$(origin KDIR)),)
KMOD_MATRIX := 1
endif
endif

ifeq ($(KMOD_MATRIX),1)
KMOD_BUILD := $(BUILD)/kmod-$(MOECACHE_KERNEL)
KMOD_LINT  := $(BUILD)/lint/kmod-$(MOECACHE_KERNEL)
# Through Kbuild every time: which release the name stands for may change
# (latest), and Kbuild rebuilds what a new release or new sources change.
KMOD_FORCE := FORCE
kmod_make   = tools/kernels/kernel kbuild $(MOECACHE_KERNEL)
kmod_check  = true
else
KVER ?= $(shell ls -1 /usr/src 2>/dev/null | sed -n 's/^linux-headers-\(.*-amd64\)$$/\1/p' | sort -V | tail -n1)
KDIR ?= $(if $(wildcard /usr/src/linux-headers-$(KVER)/Makefile),/usr/src/linux-headers-$(KVER),$(if \
	$(wildcard /lib/modules/$(KVER)/build/Makefile),/lib/modules/$(KVER)/build,/usr/src/linux-headers-$(KVER)))
KMOD_BUILD := $(BUILD)/kmod
KMOD_LINT  := $(BUILD)/lint/kmod
KMOD_FORCE :=
kmod_make   = $(MAKE) -C $(KDIR)
kmod_check  = test -f "$(KDIR)/Makefile" || { echo "no kernel headers in $(KDIR): $(if \
	$(filter command line,$(origin KVER)),install linux-headers-$(KVER),run 'make deps')" >&2; exit 1; }
endif

# $(1): the folder to build in, $(2): more Kbuild arguments.
define kmod_kbuild
	@test -n "$(wildcard kmod/*.c)" || { echo "no driver sources (kmod/*.c) yet" >&2; exit 1; }
	@$(kmod_check)
	@mkdir -p $(1)/kmod $(1)/uapi
	@for f in $(KMOD_SRCS); do ln -sfn $(CURDIR)/$$f $(1)/$$f; done
	@find $(1)/kmod $(1)/uapi -xtype l -delete
	+$(kmod_make) M=$(CURDIR)/$(1) $(2) modules
endef

.PHONY: module FORCE
module: $(KMOD_BUILD)/moecache.ko

# The headers the module was last built against: a build for another
# release into the same folder is not reused by its date.
KMOD_STAMP := $(KMOD_BUILD)/.kernel
ifneq ($(KMOD_MATRIX),1)
ifneq ($(shell cat $(KMOD_STAMP) 2>/dev/null),$(KDIR))
KMOD_FORCE := FORCE
endif
endif

$(KMOD_BUILD)/moecache.ko: $(KMOD_SRCS) $(KMOD_FORCE)
	$(call kmod_kbuild,$(KMOD_BUILD),$(KBUILD_EXTRA))
	@$(if $(filter 1,$(KMOD_MATRIX)),:,echo "$(KDIR)" >$(KMOD_STAMP))

# For `make lint`: the module with W=1, then sparse over every source (C=2
# checks without recompiling). Their own folder keeps build/kmod's flags.
.PHONY: module-w1 module-sparse
module-w1:
	$(call kmod_kbuild,$(KMOD_LINT),W=1)
module-sparse:
	$(call kmod_kbuild,$(KMOD_LINT),W=1 C=2 CHECK=sparse)
