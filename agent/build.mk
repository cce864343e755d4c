# moecached: the agent. Its parts are libraries a program can link alone:
#   libmoeagent.a   the agent proper: config, pools, slot choice and an
#                   in-memory map region (agent/*.c but main.c and log.c);
#                   the simulator runs its slot choice over that region
#   libmoecopy.a    the copy engines (agent/copy/)
#   libmoepolicy.a  the replacement policies and profiles (agent/policy/)
# agent/log.o goes beside them: the agent and the copy engines log through it.
# Literal library paths: other fragments may be read after this one.
MOEAGENT_SRCS := agent/config.c agent/fairq.c agent/memmap.c agent/pool.c agent/slots.c \
		 agent/tiers.c
MOEAGENT_OBJS := $(MOEAGENT_SRCS:%.c=$(OBJ)/%.o)
MOEAGENT_LIB  := $(LIBOUT)/libmoeagent.a
MOECACHED     := $(BIN)/moecached
# What a program needs to run the agent's pools (moecached, its unit tests).
AGENT_LINK    := $(OBJ)/agent/log.o $(MOEAGENT_LIB) $(LIBOUT)/libmoecopy.a \
	$(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a

CFLAGS_agent := -I.
# The in-memory map region writes what libmoecache's readers read (lib/protocol).
$(OBJ)/agent/memmap.o: CFLAGS += $(LIBMOECACHE_PROTOCOL_CFLAGS)
LIBRARIES    += $(MOEAGENT_LIB)

# libsystemd: readiness (sd_notify) under moecached@.service.
SYSTEMD_LIBS := $(shell $(PKG_CONFIG) --libs libsystemd 2>/dev/null || echo -lsystemd)

PROGRAMS     += $(MOECACHED)
DEB_PACKAGES += libjson-c-dev libsystemd-dev

$(MOEAGENT_LIB): $(MOEAGENT_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(MOECACHED): $(OBJ)/agent/main.o $(AGENT_LINK)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS) $(JSONC_LIBS) $(SYSTEMD_LIBS) -lm
