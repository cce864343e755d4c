# moecache-decode: the verifying decode client (and --fill loader).
DECODE_OBJS := $(OBJ)/tools/decode/decode.o
MOECACHE_DECODE := $(BIN)/moecache-decode

PROGRAMS     += $(MOECACHE_DECODE)
DEB_PACKAGES += libjson-c-dev

# kernels/ref (weights and FFN), tools/trace (the trace reader); the plan is libmoecache's.
$(OBJ)/tools/decode/%.o: CFLAGS += -Ikernels -Itools

# Literal library paths: their fragments may be read after this one.
$(MOECACHE_DECODE): $(DECODE_OBJS) $(LIBOUT)/libmoetrace.a $(LIBOUT)/libmoeref.a \
		$(LIBOUT)/libmoepolicy.a $(LIBOUT)/libmoecache.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(JSONC_LIBS) -lm -pthread
