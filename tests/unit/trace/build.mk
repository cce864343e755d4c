# Unit tests of the trace reader and the simulator (libmoetrace over
# libmoeagent and libmoepolicy), and the moecache-trace CLI. The checks on ../shared/traces
# skip when it is absent.
TRACE_UNIT_TEST := $(TESTOUT)/unit/trace
TRACE_UNIT_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(sort $(wildcard tests/unit/trace/*.c)))

UNIT_TESTS   += $(TRACE_UNIT_TEST)
DEB_PACKAGES += libcriterion-dev libjson-c-dev

$(OBJ)/tests/unit/trace/%.o: CFLAGS += -I. $(CRIT_CFLAGS)

# test_cli.c runs the CLI from build/bin. test_sim.c counts the agent's slot
# choices the simulator makes (the wrap).
$(TRACE_UNIT_TEST): $(TRACE_UNIT_OBJS) $(LIBOUT)/libmoetrace.a $(LIBOUT)/libmoeagent.a \
		    $(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a | $(BIN)/moecache-trace
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -Wl,--wrap=agent_slots_choose -o $@ $^ $(CRIT_LIBS) $(JSONC_LIBS) -lm
