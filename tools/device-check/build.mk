# The device checks: moecache-cuda-check (run by tools/gpu-check) and
# moecache-rocm-check (run by tools/amd-check). Each has checks (pass or
# fail) and benchmarks (figures). Built everywhere; they need a GPU to run,
# and run on the fake drivers in the unit tests (tests/unit/gpu).
DEVCHECK_OBJ := $(OBJ)/tools/device-check
DEVCHECK_CUDA := $(TESTOUT)/gpu/moecache-cuda-check
DEVCHECK_ROCM := $(TESTOUT)/gpu/moecache-rocm-check
DEVCHECK_LINK := $(DEVCHECK_OBJ)/devcheck.o $(OBJ)/agent/log.o $(LIBOUT)/libmoecopy.a \
	$(LIBOUT)/libmoecache.a
EXTRA_ALL += $(DEVCHECK_CUDA) $(DEVCHECK_ROCM)

$(DEVCHECK_OBJ)/%.o: CFLAGS += -I.
$(DEVCHECK_OBJ)/cuda_%.o: CFLAGS += -Ikernels
$(DEVCHECK_OBJ)/rocm_%.o: CFLAGS += $(GPU_DRM_CFLAGS)

$(DEVCHECK_CUDA): $(addprefix $(DEVCHECK_OBJ)/cuda_,main.o common.o checks.o bench.o) \
		$(DEVCHECK_OBJ)/decode_slots.o $(DEVCHECK_LINK) $(LIBOUT)/libmoetrace.a \
		$(LIBOUT)/libmoekernels.a $(LIBOUT)/libmoeref.a $(LIBOUT)/libmoeagent.a \
		$(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(JSONC_LIBS) -lm

$(DEVCHECK_ROCM): $(addprefix $(DEVCHECK_OBJ)/rocm_,main.o common.o checks.o bench.o) \
		$(DEVCHECK_LINK)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(JSONC_LIBS)
