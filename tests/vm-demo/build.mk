# moecache-demo-test: `make demo`'s script (tools/demo/demo.sh, installed as
# moecache-demo) run by `make check` in the test VM, its report line checked.
MOECACHE_DEMO_TEST := $(TESTOUT)/vm/moecache-demo-test

VM_TESTS  += $(MOECACHE_DEMO_TEST)
# It needs moecache-demo, moecached, moecache-decode and moecachectl from
# build/bin and the traces at /traces.
VM_SUITES += moecache-demo-test

$(MOECACHE_DEMO_TEST): tests/vm-demo/demo-test.sh
	@mkdir -p $(dir $@)
	install -m 0755 $< $@
