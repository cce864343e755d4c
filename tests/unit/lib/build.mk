# Unit tests of libmoecache (no module needed): map readers, argument checks, bank import.
LIB_UNIT_TEST  := $(TESTOUT)/unit/libmoecache
LIB_UNIT_OBJS  := $(patsubst %.c,$(OBJ)/%.o,$(sort $(wildcard tests/unit/lib/*.c)))

UNIT_TESTS   += $(LIB_UNIT_TEST)
DEB_PACKAGES += libcriterion-dev

# The tests reach into lib/ (mc_internal.h) and write map regions in memory
# with agent/memmap.h (libmoeagent.a).
$(OBJ)/tests/unit/lib/%.o: CFLAGS += -I. $(CRIT_CFLAGS) $(LIBMOECACHE_PROTOCOL_CFLAGS)

$(LIB_UNIT_TEST): $(LIB_UNIT_OBJS) $(LIBOUT)/libmoeagent.a $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS)
