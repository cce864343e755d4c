# moecache-fuzz (random typed sequences of the whole ABI) and moecache-faultinj
# (every allocation of each call failed in turn), run inside the test VM;
# `make check-debug` runs them on the debug kernel. Static: nothing to copy.
FUZZ_BIN      := $(TESTOUT)/vm/moecache-fuzz
FAULTINJ_BIN  := $(TESTOUT)/vm/moecache-faultinj
FUZZ_OBJS     := $(OBJ)/tests/fuzz/main.o $(OBJ)/tests/fuzz/ops.o $(OBJ)/tests/fuzz/check.o \
                 $(OBJ)/tests/fuzz/netlink.o
FAULTINJ_OBJS := $(OBJ)/tests/fuzz/faultinj.o

VM_TESTS  += $(FUZZ_BIN) $(FAULTINJ_BIN)

# The fast pins and map readers are libmoecache's (lib/protocol).
$(OBJ)/tests/fuzz/%.o: CFLAGS += $(LIBMOECACHE_PROTOCOL_CFLAGS)
# With no arguments moecache-fuzz runs its regression seeds and two fresh runs.
# moecache-faultinj needs the debug kernel: check-debug runs it.
VM_SUITES += moecache-fuzz

$(FUZZ_BIN): $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -static $(LDFLAGS) -o $@ $^

$(FAULTINJ_BIN): $(FAULTINJ_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -static $(LDFLAGS) -o $@ $^
