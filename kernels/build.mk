# kernels/: the C references (libmoeref.a), the CUDA and HIP kernels, and
# libmoekernels.a, which embeds the built device images so that a process
# can load them (cuModuleLoadData, hipModuleLoadData) without a file path.
# nvcc and hipcc are optional: without them the images are skipped, and
# moe_kernels_cuda_image() / moe_kernels_hip_image() answer -ENOENT.
# `make deps` installs Debian's hipcc, so `make check` builds the HIP code
# objects; nvcc is not a Debian package and is used where it is found.
DEB_PACKAGES += hipcc

CFLAGS_kernels := -Ikernels -ffp-contract=off
KERNELS_OUT := $(BUILD)/kernels
KERNELS_DEVICE_DEPS := kernels/moe_kernels.h kernels/moe_numerics.h uapi/moecache.h \
	$(wildcard kernels/device/*.h)

MOEREF_OBJS := $(OBJ)/kernels/ref/moe_ref.o
MOEKERNELS_OBJS := $(OBJ)/kernels/image.o $(OBJ)/kernels/fatbin.o
LIBRARIES += $(LIBOUT)/libmoeref.a $(LIBOUT)/libmoekernels.a

$(LIBOUT)/libmoeref.a: $(MOEREF_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBOUT)/libmoekernels.a: $(MOEKERNELS_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

# CUDA: a fatbin with sm_80 and sm_90 code and compute_90 PTX.
ifeq ($(origin NVCC),undefined)
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
endif
NVCC_GENCODE := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
# -fmad=false backs up the _rn intrinsics: the FFN order must not change.
NVCC_FLAGS ?= -O3 -std=c++17 -fmad=false
KERNELS_FATBIN := $(KERNELS_OUT)/moe_kernels.fatbin

ifneq ($(NVCC),)
EXTRA_ALL += $(KERNELS_FATBIN)
$(KERNELS_FATBIN): kernels/cuda/moe_kernels.cu $(wildcard kernels/cuda/*.cu kernels/cuda/*.cuh) \
		$(KERNELS_DEVICE_DEPS)
	@mkdir -p $(dir $@)
	$(NVCC) -fatbin $(NVCC_GENCODE) $(NVCC_FLAGS) -Ikernels -Iuapi -o $@ $<
$(OBJ)/kernels/image.o: $(KERNELS_FATBIN)
$(OBJ)/kernels/image.o: CFLAGS += -DMOE_CUDA_FATBIN='"$(KERNELS_FATBIN)"'
else
EXTRA_ALL += kernels-cuda-skipped
.PHONY: kernels-cuda-skipped
kernels-cuda-skipped:
	@echo "kernels: nvcc not found (/usr/local/cuda/bin or PATH; or set NVCC): CUDA kernels skipped"
endif

# HIP: one code object bundle for the RDNA targets, built without the ROCm
# device libraries (the kernels use amdgcn builtins only).
ifeq ($(origin HIPCC),undefined)
HIPCC := $(shell command -v hipcc 2>/dev/null)
endif
HIP_ARCHS ?= gfx1030 gfx1100
HIPCC_FLAGS ?= -O3 -std=c++17 -ffp-contract=off -mno-wavefrontsize64
KERNELS_HSACO := $(KERNELS_OUT)/moe_kernels.hsaco

ifneq ($(HIPCC),)
EXTRA_ALL += $(KERNELS_HSACO)
$(KERNELS_HSACO): kernels/hip/moe_kernels.hip $(wildcard kernels/hip/*.hip kernels/hip/*.h) \
		$(KERNELS_DEVICE_DEPS)
	@mkdir -p $(dir $@)
	$(HIPCC) --genco $(addprefix --offload-arch=,$(HIP_ARCHS)) -nogpulib $(HIPCC_FLAGS) \
		-Ikernels -Iuapi -o $@ $<
$(OBJ)/kernels/image.o: $(KERNELS_HSACO)
$(OBJ)/kernels/image.o: CFLAGS += -DMOE_HIP_HSACO='"$(KERNELS_HSACO)"'
else
EXTRA_ALL += kernels-hip-skipped
.PHONY: kernels-hip-skipped
kernels-hip-skipped:
	@echo "kernels: hipcc not found (or set HIPCC): HIP kernels skipped"
endif
