# Unit tests of kernels/ (Criterion), included by the top Makefile.
# The guard keeps a second inclusion harmless.
ifndef TESTS_UNIT_KERNELS_MK
TESTS_UNIT_KERNELS_MK := 1

KTEST_DIR := $(OBJ)/tests/unit/kernels
KTEST_REF_OBJS := $(addprefix $(KTEST_DIR)/,test_bf16.o test_gen.o test_remap.o test_ffn.o helpers.o)
KTEST_DEVICE_OBJS := $(addprefix $(KTEST_DIR)/,test_image.o test_cuda.o helpers.o)

# The naive reference compares against fp32 results: no contraction there either.
$(KTEST_REF_OBJS) $(KTEST_DEVICE_OBJS): CFLAGS += $(CRIT_CFLAGS) -Ikernels -ffp-contract=off

UNIT_TESTS += $(TESTOUT)/unit/kernels_ref $(TESTOUT)/unit/kernels_device
DEB_PACKAGES += libcriterion-dev pkg-config

$(TESTOUT)/unit/kernels_ref: $(KTEST_REF_OBJS) $(LIBOUT)/libmoeref.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS) -lm

# Runs the kernels where a GPU and its driver are present, else skips.
$(TESTOUT)/unit/kernels_device: $(KTEST_DEVICE_OBJS) $(LIBOUT)/libmoekernels.a $(LIBOUT)/libmoeref.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRIT_LIBS) -ldl -lm

endif
