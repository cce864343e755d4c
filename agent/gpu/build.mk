# GPU backends of moecached (agent/backend_cuda.c, agent/backend_rocm.c)
# and the GPU bank import of libmoecache (lib/bank_cuda.c, lib/bank_rocm.c),
# with what they share in agent/gpu/. The CUDA driver, libhsakmt and
# libdrm_amdgpu are all loaded at run time (dlopen): nothing here links
# against them, and the CUDA toolkit is never needed to build.
#
#   GPU_LIB_OBJS    what lib/bank_{cuda,rocm}.o need: part of libmoecache
#   GPU_AGENT_OBJS  the backends and what they need: link into moecached
#                   with agent/log.o, which they log through

# libdrm's headers live in a subfolder; -isystem keeps our warnings ours.
GPU_DRM_CFLAGS := $(patsubst -I%,-isystem %,$(shell $(PKG_CONFIG) --cflags-only-I \
	libdrm_amdgpu libhsakmt 2>/dev/null || echo -I/usr/include/libdrm))

GPU_LIB_OBJS := $(addprefix $(OBJ)/agent/gpu/,gpu_common.o cuda_api.o rocm_api.o release_queue.o \
	gpu_bank.o)
GPU_AGENT_OBJS := $(OBJ)/agent/backend_cuda.o $(OBJ)/agent/backend_rocm.o \
	$(OBJ)/agent/gpu/sdma.o $(GPU_LIB_OBJS)

# Objects that include rocm_api.h (the installed hsakmt.h and amdgpu.h).
$(OBJ)/agent/gpu/rocm_api.o $(OBJ)/agent/backend_rocm.o $(OBJ)/lib/bank_rocm.o: \
	CFLAGS += $(GPU_DRM_CFLAGS)

# libmoecache compiles every lib/*.c, bank_cuda.c and bank_rocm.c included:
# their helpers go into the same archive and shared object. The recipes in
# lib/build.mk use $^, which takes these extra prerequisites in.
$(LIBOUT)/libmoecache.a $(LIBOUT)/libmoecache.so: $(GPU_LIB_OBJS)

DEB_PACKAGES += libdrm-dev libhsakmt-dev

# moecached and whatever drives the backends directly get the GPU engines.
$(MOECACHED): $(GPU_AGENT_OBJS)
AGENT_BACKEND_OBJS += $(GPU_AGENT_OBJS)
AGENT_CORE_OBJS += $(GPU_AGENT_OBJS)
