# libmoepolicy: replacement policies, profiles and next-layer prediction.
# Linked by moecached and by moecache-trace, so both run the same code.
MOEPOLICY_SRCS := $(wildcard agent/policy/*.c)
MOEPOLICY_OBJS := $(MOEPOLICY_SRCS:%.c=$(OBJ)/%.o)
MOEPOLICY_LIB  := $(LIBOUT)/libmoepolicy.a
# What a program linking libmoepolicy.a needs after it.
MOEPOLICY_LIBS := $(JSONC_LIBS) -lm

LIBRARIES += $(MOEPOLICY_LIB)
DEB_PACKAGES += libjson-c-dev

$(MOEPOLICY_LIB): $(MOEPOLICY_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^
