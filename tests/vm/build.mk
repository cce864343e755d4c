# moecache-vmtest: the driver's tests, run inside the test VM (tools/vm/run)
# against the loaded module. Linked statically: the VM is a busybox initramfs
# with no shared libraries.
VMTEST_BIN  := $(TESTOUT)/vm/moecache-vmtest
VMTEST_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(wildcard tests/vm/*.c))

VM_TESTS += $(VMTEST_BIN)
VM_SUITES += moecache-vmtest

# The harness, and libmoecache's fast pins and map readers (lib/protocol);
# tests of what the library does with the driver's answers link it.
$(OBJ)/tests/vm/%.o: CFLAGS += -Itests/harness -Ilib/include $(LIBMOECACHE_PROTOCOL_CFLAGS)

$(VMTEST_BIN): $(VMTEST_OBJS) $(TAP_LIB) $(LIBMOECACHE_A)
	@mkdir -p $(dir $@)
	$(CC) -static $(LDFLAGS) -o $@ $(LINK_INPUTS)
