# moecache-route-vmtest: a client's route over a pool of three CPU banks, the
# per-bank imports and moecache-decode on them, against the real driver in
# the test VM (tools/vm/run moecache-route-vmtest). The test forks its own
# agent; it needs moecache-decode from build/bin and the traces at /traces.
MOECACHE_ROUTE_VMTEST := $(TESTOUT)/vm/moecache-route-vmtest

VM_TESTS  += $(MOECACHE_ROUTE_VMTEST)
VM_SUITES += moecache-route-vmtest

$(MOECACHE_ROUTE_VMTEST): $(OBJ)/tests/vm-route/route.o $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^
