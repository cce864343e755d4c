# libmoetrace: the trace reader and the cache simulator; moecache-trace: the CLI.
# The simulator runs libmoepolicy.a, the same policy code as moecached.
MOETRACE_SRCS := tools/trace/trace.c tools/trace/sim.c tools/trace/timing.c tools/trace/hint.c \
		 tools/trace/batch.c
MOETRACE_OBJS := $(MOETRACE_SRCS:%.c=$(OBJ)/%.o)
MOETRACE_LIB  := $(LIBOUT)/libmoetrace.a
MOETRACE_BIN  := $(BIN)/moecache-trace

LIBRARIES += $(MOETRACE_LIB)
PROGRAMS  += $(MOETRACE_BIN)
DEB_PACKAGES += libjson-c-dev

$(MOETRACE_LIB): $(MOETRACE_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(MOETRACE_BIN): $(OBJ)/tools/trace/moecache-trace.o $(MOETRACE_LIB) $(LIBOUT)/libmoepolicy.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(JSONC_LIBS) -lm
