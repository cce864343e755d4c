# libmoecache: shared and static library, headers and a pkg-config file in build/.
LIBMOECACHE_SRCS := $(sort $(wildcard lib/*.c lib/gpu/*.c))
LIBMOECACHE_OBJS := $(LIBMOECACHE_SRCS:%.c=$(OBJ)/%.o)
LIBMOECACHE_A    := $(LIBOUT)/libmoecache.a
LIBMOECACHE_SO   := $(LIBOUT)/libmoecache.so
LIBMOECACHE_PC   := $(LIBOUT)/pkgconfig/libmoecache.pc
LIBMOECACHE_HDRS := $(BUILD)/include/libmoecache.h $(BUILD)/include/moecache.h

LIBRARIES += $(LIBMOECACHE_A) $(LIBMOECACHE_SO) $(LIBMOECACHE_PC) $(LIBMOECACHE_HDRS)

$(LIBMOECACHE_A): $(LIBMOECACHE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(LIBMOECACHE_SO): $(LIBMOECACHE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libmoecache.so $(LDFLAGS) -o $@ $^

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
		'Version: 1' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lmoecache' \
		'Libs.private: -pthread' > $@
