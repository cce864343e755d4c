# moecache-stress: map readers against a churning, restarting agent (memory
# ordering of the map region), run inside the test VM. tests/stress/soak.sh
# is the kill -9 soak of moecached and the decode clients (make check-debug
# runs both in the VM).
STRESS_BIN := $(TESTOUT)/vm/moecache-stress

VM_TESTS  += $(STRESS_BIN)
# With no arguments: 20 s, 3 readers, 5 agents; ends "moecache-stress: 1 passed, 0 failed, 0 skipped".
VM_SUITES += moecache-stress

# The map readers are libmoecache's (lib/protocol/mc_atomic.h).
$(OBJ)/tests/stress/%.o: CFLAGS += $(LIBMOECACHE_PROTOCOL_CFLAGS)

$(STRESS_BIN): $(OBJ)/tests/stress/ordering.o
	@mkdir -p $(dir $@)
	$(CC) -static $(LDFLAGS) -o $@ $^
