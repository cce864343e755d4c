# moecache-devnode: /dev/moecache's rights without udev (the driver's 0600
# default and its dev_gid parameter) and udev's widening, in its own test VM
# (tools/vm/run moecache-devnode): it reloads the module.
MOECACHE_DEVNODE_TEST := $(TESTOUT)/vm/moecache-devnode
MOECACHE_DEVNODE_OPEN := $(TESTOUT)/vm/moecache-devnode-open

VM_TESTS  += $(MOECACHE_DEVNODE_TEST) $(MOECACHE_DEVNODE_OPEN)
VM_SUITES += moecache-devnode

$(MOECACHE_DEVNODE_TEST): tests/vm-devnode/devnode-test.sh
	@mkdir -p $(dir $@)
	install -m 0755 $< $@

$(MOECACHE_DEVNODE_OPEN): $(OBJ)/tests/vm-devnode/open-as.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^
