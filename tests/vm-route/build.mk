# moecache-route-vmtest: a client's route over a pool of three CPU banks, the
# per-bank imports and moecache-decode on them, against the real driver in
# the test VM (tools/vm/run moecache-route-vmtest). The test forks its own
# agent; it needs moecache-decode from build/bin, the traces at /traces and,
# for its Python test (lib/python/tests/route_vm.py), the VM booted with
# MOECACHE_VM_HOST_USR=1 (make check boots every suite so).
MOECACHE_ROUTE_VMTEST := $(TESTOUT)/vm/moecache-route-vmtest

VM_TESTS  += $(MOECACHE_ROUTE_VMTEST)
VM_SUITES += moecache-route-vmtest

$(MOECACHE_ROUTE_VMTEST): $(OBJ)/tests/vm-route/route.o $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^
