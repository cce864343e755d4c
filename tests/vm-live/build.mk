# moecache-live-vs-sim: the real system (driver, moecached, decode clients)
# against the simulator, for the same trace, policy and slots; and
# moecache-live, the VM suite that asserts the agreement guaranteed.
MOECACHE_LIVE_VS_SIM := $(BIN)/moecache-live-vs-sim
MOECACHE_LIVE_TEST   := $(TESTOUT)/vm/moecache-live

PROGRAMS  += $(MOECACHE_LIVE_VS_SIM)
VM_TESTS  += $(MOECACHE_LIVE_TEST)
# It needs moecached, moecache-decode, moecache-trace, moecachectl and
# moecache-live-vs-sim from build/bin and the traces at /traces.
VM_SUITES += moecache-live

$(MOECACHE_LIVE_VS_SIM): tests/vm-live/live-vs-sim.sh
	@mkdir -p $(dir $@)
	install -m 0755 $< $@

$(MOECACHE_LIVE_TEST): tests/vm-live/live-test.sh
	@mkdir -p $(dir $@)
	install -m 0755 $< $@

# The full comparison in one VM run; the table as JSON in build/live-vs-sim/.
LIVE_VS_SIM_ARGS ?=
.PHONY: live-vs-sim
live-vs-sim:
	+$(MAKE) --no-print-directory -j2 module $(MOECACHED) $(MOECACHE_DECODE) \
		$(MOETRACE_BIN) $(MOECACHECTL) $(MOECACHE_LIVE_VS_SIM)
	@mkdir -p $(BUILD)/live-vs-sim
	MOECACHE_VM_TIMEOUT=$${MOECACHE_VM_TIMEOUT:-1800} MOECACHE_VM_OUT=$(BUILD)/live-vs-sim \
		tools/vm/run moecache-live-vs-sim --out /out/live-vs-sim.json $(LIVE_VS_SIM_ARGS)
