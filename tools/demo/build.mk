# `make demo`: four verifying decode clients sharing one pool through moecached,
# in the test VM (VM=0: on this host, as root, with the module loadable).
MOECACHE_DEMO      := $(BIN)/moecache-demo
VM ?= 1

PROGRAMS += $(MOECACHE_DEMO)

# The script runs inside the VM, where build/bin is on PATH.
$(MOECACHE_DEMO): tools/demo/demo.sh
	@mkdir -p $(dir $@)
	install -m 0755 $< $@

# deps first, then a fresh make: pkg-config answers change once packages are there.
# Only what the demo runs is built, so that an unrelated broken piece cannot stop it.
# VM=0 builds the module for the running kernel (its headers must be installed).
.PHONY: demo
demo:
	+$(MAKE) --no-print-directory deps
	+$(MAKE) --no-print-directory -j2 $(if $(filter 0,$(VM)),KVER=$(shell uname -r)) module \
		$(MOECACHED) $(MOECACHE_DECODE) $(MOECACHECTL) $(MOECACHE_DEMO)
	tools/demo/run VM=$(VM)
