# libmoetrace: the trace reader and the cache simulator; moecache-trace: the CLI.
# The simulator runs the agent's slot choice (libmoeagent.a: agent/slots.c
# over agent/memmap.c's map region, read through libmoecache) and its
# policies (libmoepolicy.a): the same code as moecached.
MOETRACE_SRCS := tools/trace/trace.c tools/trace/sim.c tools/trace/timing.c tools/trace/hint.c \
		 tools/trace/batch.c tools/trace/simtiers.c tools/trace/clients.c
MOETRACE_OBJS := $(MOETRACE_SRCS:%.c=$(OBJ)/%.o)
MOETRACE_LIB  := $(LIBOUT)/libmoetrace.a
MOETRACE_BIN  := $(BIN)/moecache-trace

LIBRARIES += $(MOETRACE_LIB)
PROGRAMS  += $(MOETRACE_BIN)
DEB_PACKAGES += libjson-c-dev

$(MOETRACE_LIB): $(MOETRACE_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(MOETRACE_BIN): $(OBJ)/tools/trace/moecache-trace.o $(MOETRACE_LIB) $(LIBOUT)/libmoeagent.a \
		$(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(JSONC_LIBS) -lm

# The traces the tree ships (tests/traces), staged where the programs in
# build/bin find them (MOE_TRACE_SHARE_DIR beside bin/, as when installed).
MOETRACE_DATA   := $(sort $(wildcard tests/traces/*.json tests/traces/*.jsonl))
MOETRACE_STAGED := $(MOETRACE_DATA:tests/traces/%=$(BUILD)/share/moecache/traces/%)
EXTRA_ALL += $(MOETRACE_STAGED)
# The unit test's basic_default_trace_is_the_shipped_one runs build/bin's
# moecache-trace with no --trace: it needs them staged.
$(TRACE_UNIT_TEST): | $(MOETRACE_STAGED)

$(BUILD)/share/moecache/traces/%: tests/traces/%
	@mkdir -p $(dir $@)
	cp $< $@
