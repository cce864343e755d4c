# lib/gpu/: the GPU driver-API shims (the CUDA driver, libhsakmt and
# libdrm_amdgpu, all loaded at run time with dlopen: nothing links against
# them and the CUDA toolkit is never needed to build) and libmoecache's GPU
# bank import. They are part of libmoecache (lib/build.mk compiles
# lib/gpu/*.c); the copy engines of agent/copy/ use the shims through it.

# libdrm's headers live in a subfolder; -isystem keeps our warnings ours.
# Debian 13's libhsakmt-dev puts hsakmt.h in /usr/include/hsakmt, and its
# libhsakmt.pc names a relative folder (usr//include/rocm): the folder is
# added where it is found.
GPU_DRM_CFLAGS := $(patsubst -I%,-isystem %,$(shell $(PKG_CONFIG) --cflags-only-I \
	libdrm_amdgpu libhsakmt 2>/dev/null || echo -I/usr/include/libdrm)) \
	$(if $(wildcard /usr/include/hsakmt/hsakmt.h),-isystem /usr/include/hsakmt)

# Objects that include rocm_api.h (the installed hsakmt.h and amdgpu.h).
$(OBJ)/lib/gpu/rocm_api.o $(OBJ)/lib/gpu/bank_rocm.o: CFLAGS += $(GPU_DRM_CFLAGS)

DEB_PACKAGES += libdrm-dev libhsakmt-dev
