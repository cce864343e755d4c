# moecache-live-plan: the plan of a layer in the real system against the
# simulator (docs/live-vs-sim.md, "The plan"), and the prefetch gate wired
# end to end. A VM suite of make check.
MOECACHE_LIVE_PLAN_TEST := $(TESTOUT)/vm/moecache-live-plan

VM_TESTS  += $(MOECACHE_LIVE_PLAN_TEST)
# It needs moecached, moecache-decode, moecache-trace, moecachectl and
# moecache-live-vs-sim from build/bin and the traces at /traces.
VM_SUITES += moecache-live-plan

$(MOECACHE_LIVE_PLAN_TEST): tests/vm-live/plan/plan-test.sh
	@mkdir -p $(dir $@)
	install -m 0755 $< $@

# moecache-plan-queue: the plan follows the queue depth the driver publishes,
# live (tests/vm-live/plan/queue.c); run by plan-test.sh against a slow agent.
MOECACHE_PLAN_QUEUE := $(TESTOUT)/vm/moecache-plan-queue

VM_TESTS += $(MOECACHE_PLAN_QUEUE)

$(MOECACHE_PLAN_QUEUE): $(OBJ)/tests/vm-live/plan/queue.o $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lm
