# Unit tests of moecached's parts (no module needed): config, slot choice
# through the policy interface, the CPU copy engine, profiles.
AGENT_UNIT_TEST := $(TESTOUT)/unit/moecached
AGENT_UNIT_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(sort $(wildcard tests/unit/agent/*.c)))

UNIT_TESTS   += $(AGENT_UNIT_TEST)
DEB_PACKAGES += libcriterion-dev libjson-c-dev

$(OBJ)/tests/unit/agent/%.o: CFLAGS += -I. $(CRIT_CFLAGS)

# The agent's libraries; literal paths (their fragments may come later).
$(AGENT_UNIT_TEST): $(AGENT_UNIT_OBJS) $(OBJ)/agent/log.o $(LIBOUT)/libmoeagent.a \
		$(LIBOUT)/libmoecopy.a $(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS) $(CRIT_LIBS) $(JSONC_LIBS) -lm
