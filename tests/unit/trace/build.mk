# Unit tests of the trace reader and the simulator (libmoetrace over
# libmoeagent and libmoepolicy), and the moecache-trace CLI. The checks on the
# tree's traces (tests/traces) read them where the tree is; a missing one fails.
TRACE_UNIT_TEST := $(TESTOUT)/unit/trace
TRACE_UNIT_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(sort $(wildcard tests/unit/trace/*.c)))

UNIT_TESTS   += $(TRACE_UNIT_TEST)
DEB_PACKAGES += libcriterion-dev libjson-c-dev

$(OBJ)/tests/unit/trace/%.o: CFLAGS += -I. $(CRIT_CFLAGS) -DMOE_TREE_TRACES='"$(abspath tests/traces)"'
$(OBJ)/tests/unit/trace/test_sim.o: tests/unit/trace/build.mk

# test_cli.c runs the CLI from build/bin. test_sim.c counts the agent's slot
# choices the simulator makes (the wrap).
$(TRACE_UNIT_TEST): $(TRACE_UNIT_OBJS) $(LIBOUT)/libmoetrace.a $(LIBOUT)/libmoeagent.a \
		    $(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a | $(BIN)/moecache-trace $(MOETRACE_STAGED)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -Wl,--wrap=agent_slots_choose -o $@ $^ $(CRIT_LIBS) $(JSONC_LIBS) -lm
