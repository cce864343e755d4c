# Unit tests of libmoepolicy: each policy on hand-made sequences, profiles,
# the next-layer predictor.
POLICY_UNIT_TEST := $(TESTOUT)/unit/policy
POLICY_UNIT_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(sort $(wildcard tests/unit/policy/*.c)))

UNIT_TESTS   += $(POLICY_UNIT_TEST)
DEB_PACKAGES += libcriterion-dev libjson-c-dev

$(OBJ)/tests/unit/policy/%.o: CFLAGS += -I. $(CRIT_CFLAGS)

# test_bench_policy.c runs moecache-bench --policy from build/bin.
# cache.c drives the policies through the agent's slot choice (libmoeagent.a,
# whose map readers are libmoecache's).
$(POLICY_UNIT_TEST): $(POLICY_UNIT_OBJS) $(LIBOUT)/libmoeagent.a $(LIBOUT)/libmoepolicy.a \
		$(LIBOUT)/libmoecache.a | $(BIN)/moecache-bench
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS) $(CRIT_LIBS) $(JSONC_LIBS) -lm
