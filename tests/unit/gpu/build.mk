# Unit tests of the GPU backends and the GPU bank import (Criterion, on the
# host: no GPU, no driver, no module). The CUDA ones run against a fake
# libcuda built beside them; the ROCm ones against Debian's libhsakmt and
# libdrm_amdgpu without /dev/kfd, and against a fake of both that runs the
# SDMA packets on the host.
#
# The device checks that need a real GPU (tools/cuda-check, tools/rocm-check)
# run here on the fakes too: gpu_cuda, gpu_rocm and gpu_multi run them.

GPUTEST_OBJ := $(OBJ)/tests/unit/gpu
GPUTEST_FAKE_CUDA := $(TESTOUT)/unit/libmoecache-fakecuda.so
GPUTEST_LINK := $(OBJ)/agent/log.o $(LIBOUT)/libmoecopy.a $(LIBOUT)/libmoecache.a

UNIT_TESTS += $(TESTOUT)/unit/gpu_common $(TESTOUT)/unit/gpu_cuda $(TESTOUT)/unit/gpu_rocm \
	$(TESTOUT)/unit/gpu_multi

$(GPUTEST_OBJ)/%.o: CFLAGS += $(CRIT_CFLAGS) -I.
$(GPUTEST_OBJ)/test_rocm.o $(GPUTEST_OBJ)/test_rocm_fake.o $(GPUTEST_OBJ)/test_gpu_multi.o: \
	CFLAGS += $(GPU_DRM_CFLAGS)

$(TESTOUT)/unit/gpu_common: $(addprefix $(GPUTEST_OBJ)/,test_sdma.o test_gpu_common.o \
		test_release_queue.o) $(OBJ)/agent/copy/sdma.o $(OBJ)/lib/gpu/common.o \
		$(OBJ)/lib/gpu/release_queue.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS)

# The fake driver: a shared object the tests name through MOECACHE_LIBCUDA.
$(GPUTEST_FAKE_CUDA): tests/unit/gpu/fake_cuda.c lib/gpu/cuda_api.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I. -shared -o $@ $< $(LDFLAGS)

# With the CPU part of the CUDA benchmark (its bank's residency through the agent's slot choice).
$(TESTOUT)/unit/gpu_cuda: $(GPUTEST_OBJ)/test_cuda.o $(GPUTEST_OBJ)/test_decode_slots.o \
		$(OBJ)/tools/device-check/decode_slots.o $(GPUTEST_LINK) $(LIBOUT)/libmoeagent.a \
		$(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a | $(GPUTEST_FAKE_CUDA) \
		$(TESTOUT)/gpu/moecache-cuda-check
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS) $(JSONC_LIBS) -lm

# Fake libhsakmt + libdrm_amdgpu in one library, executing SDMA packets on the host.
GPUTEST_FAKE_ROCM := $(TESTOUT)/unit/libmoecache-fakerocm.so
$(GPUTEST_FAKE_ROCM): tests/unit/gpu/fake_rocm.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPU_DRM_CFLAGS) -shared -o $@ $< $(LDFLAGS)

$(TESTOUT)/unit/gpu_rocm: $(GPUTEST_OBJ)/test_rocm.o $(GPUTEST_OBJ)/test_rocm_fake.o \
		$(GPUTEST_LINK) | $(GPUTEST_FAKE_ROCM) $(TESTOUT)/gpu/moecache-rocm-check
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS)

# Several devices, one bank each, with and without peer access: both backends on their fakes.
$(TESTOUT)/unit/gpu_multi: $(GPUTEST_OBJ)/test_gpu_multi.o $(GPUTEST_LINK) | $(GPUTEST_FAKE_CUDA) \
		$(GPUTEST_FAKE_ROCM) $(TESTOUT)/gpu/moecache-cuda-check $(TESTOUT)/gpu/moecache-rocm-check
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS)

# lib/gpu/cuda_api.h against the toolkit's cuda.h, wherever it is installed.
CUDA_INCLUDE ?= $(or $(wildcard /usr/local/cuda/include),$(if $(wildcard /usr/include/cuda.h),/usr/include))
ifneq ($(wildcard $(CUDA_INCLUDE)/cuda.h),)
EXTRA_ALL += $(GPUTEST_OBJ)/cuda_abi_check.o
$(GPUTEST_OBJ)/cuda_abi_check.o: CFLAGS += -isystem $(CUDA_INCLUDE)
endif
