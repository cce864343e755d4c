# libmoecopy: the copy engines behind agent/copy/backend.h (cpu, cuda,
# rocm), for moecached and for whatever drives an engine directly (the
# benchmark, the GPU tests and device checks). The GPU engines reach their
# drivers through libmoecache's shims (lib/gpu/) and log through
# agent/log.o, which a program links beside this archive.
MOECOPY_SRCS := $(sort $(wildcard agent/copy/*.c))
MOECOPY_OBJS := $(MOECOPY_SRCS:%.c=$(OBJ)/%.o)
MOECOPY_LIB  := $(LIBOUT)/libmoecopy.a
AGENT_LOG_OBJ := $(OBJ)/agent/log.o

LIBRARIES += $(MOECOPY_LIB)
DEB_PACKAGES += libdrm-dev libhsakmt-dev

$(OBJ)/agent/copy/rocm.o: CFLAGS += $(GPU_DRM_CFLAGS)

$(MOECOPY_LIB): $(MOECOPY_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
