# moecache-bench: the paths measured as ratios (run in the VM by `make bench`).
BENCH_BIN  := $(BIN)/moecache-bench
BENCH_OBJS := $(OBJ)/tools/bench/moecache-bench.o $(OBJ)/tools/bench/policy.o $(OBJ)/agent/log.o \
	$(LIBOUT)/libmoecopy.a
CFLAGS_tools += -I.

PROGRAMS += $(BENCH_BIN)

$(BENCH_BIN): $(BENCH_OBJS) $(LIBMOECACHE_A) $(LIBOUT)/libmoepolicy.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LINK_INPUTS) $(JSONC_LIBS) -lm

# Runs the benchmark in a fresh VM and brings build/bench/results.json back.
.PHONY: bench
bench: all
	@mkdir -p $(BUILD)/bench
	MOECACHE_VM_OUT=$(BUILD)/bench tools/vm/run 'moecache-bench --out /out/results.json'
	@echo "results: $(BUILD)/bench/results.json"
