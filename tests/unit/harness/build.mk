# Unit tests of the VM suites' harness (tests/harness/tap.h) on the host:
# outcomes, naming rules, filters and hooks on fake tests.
TAP_UNIT_TEST := $(TESTOUT)/unit/tap

UNIT_TESTS   += $(TAP_UNIT_TEST)
DEB_PACKAGES += libcriterion-dev

$(OBJ)/tests/unit/harness/%.o: CFLAGS += -Itests/harness $(CRIT_CFLAGS)

$(TAP_UNIT_TEST): $(OBJ)/tests/unit/harness/test_tap.o $(TESTOUT)/lib/libtap.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS) $(CRIT_LIBS)
