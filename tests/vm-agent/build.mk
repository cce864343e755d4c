# moecache-agent-e2e: end-to-end tests of moecached, libmoecache and the decode
# client, run in the test VM (tools/vm/run moecache-agent-e2e).
MOECACHE_AGENT_E2E := $(TESTOUT)/vm/moecache-agent-e2e

VM_TESTS  += $(MOECACHE_AGENT_E2E)
# `make check` boots a VM for it; it needs moecached, moecache-decode and
# moecachectl from build/bin and the traces at /traces.
VM_SUITES += moecache-agent-e2e

$(OBJ)/tests/vm-agent/%.o: CFLAGS += -Itests/harness

$(MOECACHE_AGENT_E2E): $(OBJ)/tests/vm-agent/e2etest.o $(LIBOUT)/libmoecache.a $(TAP_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS)
