# libtap: the harness of the VM suites (tests/harness/tap.h), a static library
# the suites link; their objects add -Itests/harness.
TAP_LIB := $(TESTOUT)/lib/libtap.a

$(TAP_LIB): $(OBJ)/tests/harness/tap.o
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^
