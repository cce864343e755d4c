# moecache: top-level build. `make` builds the module and all userspace into build/.
# Each area adds its programs, libraries and tests through a build.mk fragment.

BUILD    ?= build
OBJ      := $(BUILD)/obj
BIN      := $(BUILD)/bin
LIBOUT   := $(BUILD)/lib
TESTOUT  := $(BUILD)/test

CC       ?= cc
PKG_CONFIG ?= pkg-config
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter \
	    -Wstrict-prototypes -Wmissing-prototypes -fPIC -pthread -Iuapi -Ilib/include -MMD -MP
LDFLAGS  += -pthread

JSONC_CFLAGS := $(shell $(PKG_CONFIG) --cflags json-c 2>/dev/null)
JSONC_LIBS   := $(shell $(PKG_CONFIG) --libs json-c 2>/dev/null || echo -ljson-c)
NL_CFLAGS    := $(shell $(PKG_CONFIG) --cflags libnl-genl-3.0 2>/dev/null)
NL_LIBS      := $(shell $(PKG_CONFIG) --libs libnl-genl-3.0 2>/dev/null || echo -lnl-genl-3 -lnl-3)
CRIT_CFLAGS  := $(shell $(PKG_CONFIG) --cflags criterion 2>/dev/null)
CRIT_LIBS    := $(shell $(PKG_CONFIG) --libs criterion 2>/dev/null || echo -lcriterion)
CFLAGS   += $(JSONC_CFLAGS) $(NL_CFLAGS)

# Filled in by the fragments.
PROGRAMS   :=
LIBRARIES  :=
UNIT_TESTS :=
VM_TESTS   :=
EXTRA_ALL  :=

.PHONY: all
all: module userspace

include $(sort $(wildcard */build.mk */*/build.mk))

.PHONY: userspace
userspace: $(LIBRARIES) $(PROGRAMS) $(UNIT_TESTS) $(VM_TESTS) $(EXTRA_ALL)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CFLAGS_$(firstword $(subst /, ,$*))) -c $< -o $@

.PHONY: clean
clean:
	rm -rf $(BUILD)

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
