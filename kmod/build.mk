# The kernel module, built by Kbuild against the installed headers (or KDIR).
# Kbuild writes its objects beside the sources, so the sources are mirrored
# into a folder under build/ as links and the module is built there.
KVER ?= $(shell ls -1 /usr/src 2>/dev/null | sed -n 's/^linux-headers-\(.*-amd64\)$$/\1/p' | sort -V | tail -n1)
KDIR ?= /usr/src/linux-headers-$(KVER)
KMOD_BUILD := $(BUILD)/kmod
KMOD_LINT  := $(BUILD)/lint/kmod
KMOD_SRCS  := Kbuild $(wildcard kmod/*.c kmod/*.h uapi/*.h)

# $(1): the folder to build in, $(2): more Kbuild arguments.
define kmod_kbuild
	@test -n "$(wildcard kmod/*.c)" || { echo "no driver sources (kmod/*.c) yet" >&2; exit 1; }
	@test -d "$(KDIR)" || { echo "no kernel headers in $(KDIR): run 'make deps'" >&2; exit 1; }
	@mkdir -p $(1)/kmod $(1)/uapi
	@for f in $(KMOD_SRCS); do ln -sfn $(CURDIR)/$$f $(1)/$$f; done
	@find $(1)/kmod $(1)/uapi -xtype l -delete
	+$(MAKE) -C $(KDIR) M=$(CURDIR)/$(1) $(2) modules
endef

.PHONY: module
module: $(KMOD_BUILD)/moecache.ko

$(KMOD_BUILD)/moecache.ko: $(KMOD_SRCS)
	$(call kmod_kbuild,$(KMOD_BUILD),$(KBUILD_EXTRA))

# For `make lint`: the module with W=1, then sparse over every source (C=2
# checks without recompiling). Their own folder keeps build/kmod's flags.
.PHONY: module-w1 module-sparse
module-w1:
	$(call kmod_kbuild,$(KMOD_LINT),W=1)
module-sparse:
	$(call kmod_kbuild,$(KMOD_LINT),W=1 C=2 CHECK=sparse)
