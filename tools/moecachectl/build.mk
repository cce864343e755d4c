# moecachectl: pools, loading, statistics and events; its checkpoint readers
# and their unit tests (tests/unit/ctl/), and its VM tests (tests/vm-ctl/).
CTL_DIR        := tools/moecachectl
CTL_CKPT_SRCS  := $(CTL_DIR)/ckpt.c $(CTL_DIR)/safetensors.c $(CTL_DIR)/gguf.c
CTL_CKPT_OBJS  := $(CTL_CKPT_SRCS:%.c=$(OBJ)/%.o)
CTL_NL_OBJS    := $(OBJ)/$(CTL_DIR)/nl.o
CTL_TOOL_SRCS  := $(filter-out $(CTL_CKPT_SRCS) $(CTL_DIR)/nl.c,$(sort $(wildcard $(CTL_DIR)/*.c)))
CTL_TOOL_OBJS  := $(CTL_TOOL_SRCS:%.c=$(OBJ)/%.o)
MOECACHECTL    := $(BIN)/moecachectl

CTL_GEN_OBJS   := $(OBJ)/tests/unit/ctl/ckpt_gen.o
CTL_UNIT_CKPT  := $(TESTOUT)/unit/ctl-ckpt
CTL_UNIT_UTIL  := $(TESTOUT)/unit/ctl-util

PROGRAMS     += $(MOECACHECTL)
UNIT_TESTS   += $(CTL_UNIT_CKPT) $(CTL_UNIT_UTIL)
DEB_PACKAGES += libnl-genl-3-dev libjson-c-dev libcriterion-dev

# The tests include the readers' headers by name.
$(OBJ)/tests/unit/ctl/%.o: CFLAGS += -I$(CTL_DIR)

# libmoepolicy: the profile ranking moecached uses (profile save).
$(MOECACHECTL): $(CTL_TOOL_OBJS) $(CTL_NL_OBJS) $(CTL_CKPT_OBJS) $(LIBOUT)/libmoepolicy.a \
		$(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(NL_LIBS) $(JSONC_LIBS) -lm

$(CTL_UNIT_CKPT): $(OBJ)/tests/unit/ctl/test_ckpt.o $(CTL_GEN_OBJS) $(CTL_CKPT_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS) $(JSONC_LIBS)

$(CTL_UNIT_UTIL): $(OBJ)/tests/unit/ctl/test_util.o $(OBJ)/tests/unit/ctl/test_banks.o \
		$(OBJ)/$(CTL_DIR)/util.o $(CTL_NL_OBJS) $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS) $(NL_LIBS)

# moecache-ctltest: netlink and loading tests, run in the test VM.
CTLTEST_BIN  := $(TESTOUT)/vm/moecache-ctltest
CTLTEST_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(sort $(wildcard tests/vm-ctl/*.c)))

VM_TESTS += $(CTLTEST_BIN)
VM_SUITES += moecache-ctltest

$(OBJ)/tests/vm-ctl/%.o: CFLAGS += -I$(CTL_DIR) -Itests/unit/ctl -Itests/harness

$(CTLTEST_BIN): $(CTLTEST_OBJS) $(CTL_GEN_OBJS) $(CTL_NL_OBJS) $(LIBOUT)/libmoecache.a $(TAP_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS) $(NL_LIBS) $(JSONC_LIBS)
