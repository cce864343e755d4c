# libmoecache: shared and static library, headers and a pkg-config file in build/.
LIBMOECACHE_SRCS := $(sort $(wildcard lib/*.c lib/gpu/*.c))
LIBMOECACHE_OBJS := $(LIBMOECACHE_SRCS:%.c=$(OBJ)/%.o)
LIBMOECACHE_A    := $(LIBOUT)/libmoecache.a
# The shared object's soname is libmoecache.so.1 (bump it on an ABI break);
# lib/libmoecache.map exports the API of libmoecache.h and nothing else.
# In build/ the object is libmoecache.so (other fragments name it) with
# libmoecache.so.1 a link to it; `make install` installs it as
# .so.$(LIBMOECACHE_VERSION), whose minor number counts the map's version
# nodes after the first.
LIBMOECACHE_SOVERSION := 1
LIBMOECACHE_VERSION   := 1.1.0
LIBMOECACHE_MAP  := lib/libmoecache.map
LIBMOECACHE_SO   := $(LIBOUT)/libmoecache.so
LIBMOECACHE_SO_LINK := $(LIBOUT)/libmoecache.so.$(LIBMOECACHE_SOVERSION)
LIBMOECACHE_PC   := $(LIBOUT)/pkgconfig/libmoecache.pc
LIBMOECACHE_HDRS := $(BUILD)/include/libmoecache.h $(BUILD)/include/moecache.h

LIBRARIES += $(LIBMOECACHE_A) $(LIBMOECACHE_SO) $(LIBMOECACHE_SO_LINK) $(LIBMOECACHE_PC) \
	$(LIBMOECACHE_HDRS)

# The client's side of the map region's protocols as the library runs them,
# header-only: the seqcount reader and accessors (mc_atomic.h) and the fast
# pins (mc_fastpin.h). Never installed; for the tests, the agent's in-memory
# map and the tools that speak the protocol without a handle, so that there
# is one implementation of each.
LIBMOECACHE_PROTOCOL_CFLAGS := -Ilib/protocol

# Everything else is private to the library (the archive's users link it whole).
$(OBJ)/lib/%.o: CFLAGS += -fvisibility=hidden $(LIBMOECACHE_PROTOCOL_CFLAGS)

$(LIBMOECACHE_A): $(LIBMOECACHE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(LIBMOECACHE_SO): $(LIBMOECACHE_OBJS) $(LIBMOECACHE_MAP)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libmoecache.so.$(LIBMOECACHE_SOVERSION) \
		-Wl,--version-script=$(LIBMOECACHE_MAP) -Wl,--no-undefined $(LDFLAGS) -o $@ \
		$(filter-out $(LIBMOECACHE_MAP),$^) -ldl

$(LIBMOECACHE_SO_LINK): $(LIBMOECACHE_SO)
	ln -sfn $(notdir $<) $@

$(BUILD)/include/libmoecache.h: lib/include/libmoecache.h
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/include/moecache.h: uapi/moecache.h
	@mkdir -p $(dir $@)
	cp $< $@

# Relocatable: paths are relative to the .pc file, so build/ can be used in place.
$(LIBMOECACHE_PC): lib/build.mk
	@mkdir -p $(dir $@)
	printf '%s\n' 'prefix=$${pcfiledir}/../..' 'libdir=$${prefix}/lib' \
		'includedir=$${prefix}/include' '' 'Name: libmoecache' \
		'Description: client, agent and loader library for /dev/moecache' \
		'Version: $(LIBMOECACHE_VERSION)' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lmoecache' \
		'Libs.private: -pthread' > $@
