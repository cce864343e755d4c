# moecached: the agent (agent/policy/ has its own fragment: libmoepolicy.a).
#   AGENT_BACKEND_OBJS  the copy engines behind agent/backend.h, for other
#                       programs that drive a backend directly (benchmarks)
AGENT_BACKEND_OBJS := $(OBJ)/agent/backend.o $(OBJ)/agent/copy_queue.o $(OBJ)/agent/cpu_backend.o \
	$(OBJ)/agent/log.o
AGENT_CORE_SRCS    := agent/backend.c agent/config.c agent/copy_queue.c agent/cpu_backend.c agent/log.c \
	agent/pool.c agent/slots.c
AGENT_CORE_OBJS    := $(AGENT_CORE_SRCS:%.c=$(OBJ)/%.o)
MOECACHED          := $(BIN)/moecached
# Literal paths: other fragments (lib/, agent/policy/) may be read after this one.
LIBMOEPOLICY_A     := $(LIBOUT)/libmoepolicy.a

PROGRAMS     += $(MOECACHED)
DEB_PACKAGES += libjson-c-dev

$(MOECACHED): $(OBJ)/agent/main.o $(AGENT_CORE_OBJS) $(LIBMOEPOLICY_A) $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS) $(JSONC_LIBS) -lm
