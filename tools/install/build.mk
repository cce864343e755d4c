# Installing: `make install`/`make uninstall` (DESTDIR, PREFIX and the GNU
# directories below; nothing is written outside them), `make deb` (the five
# Debian packages of debian/, with lintian) and `make check-install` (the
# packages installed and used on a booted Debian 12, tools/install/check-install).
MOECACHE_VERSION := 0.1.0

PREFIX      ?= /usr/local
EXEC_PREFIX ?= $(PREFIX)
BINDIR      ?= $(EXEC_PREFIX)/bin
SBINDIR     ?= $(EXEC_PREFIX)/sbin
LIBDIR      ?= $(EXEC_PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
DATAROOTDIR ?= $(PREFIX)/share
MANDIR      ?= $(DATAROOTDIR)/man
DOCDIR      ?= $(DATAROOTDIR)/doc/moecache
SYSCONFDIR  ?= $(PREFIX)/etc
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# systemd, udev and kmod read these under /usr/lib (and /lib); with another
# PREFIX they are installed under it and have to be linked or copied there.
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
UDEVRULESDIR   ?= $(PREFIX)/lib/udev/rules.d
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR    ?= $(PREFIX)/lib/tmpfiles.d
MODULESLOADDIR ?= $(PREFIX)/lib/modules-load.d
# The module's source, for DKMS (dkms add moecache/$(MOECACHE_VERSION)).
DKMSSRCDIR     ?= $(PREFIX)/src/moecache-$(MOECACHE_VERSION)

INSTALL         ?= install
INSTALL_PROGRAM ?= $(INSTALL) -m 0755
INSTALL_DATA    ?= $(INSTALL) -m 0644

INSTALL_SBIN := $(BIN)/moecached $(BIN)/moecachectl
INSTALL_BIN  := $(BIN)/moecache-decode $(BIN)/moecache-trace $(BIN)/moecache-bench
INSTALL_MAN  := agent/moecached.8 tools/moecachectl/moecachectl.8 tools/systemd/moecache-pools.8 \
	tools/decode/moecache-decode.1 tools/trace/moecache-trace.1 tools/bench/moecache-bench.1 \
	kmod/moecache.4
INSTALL_UNITS := tools/systemd/moecached@.service tools/systemd/moecache-pools.service
INSTALL_HDRS := lib/include/libmoecache.h uapi/moecache.h uapi/moecache_netlink.h
DKMS_SRCS    := Kbuild $(sort $(wildcard kmod/*.c kmod/*.h uapi/*.h))
INSTALL_OUT  := $(BUILD)/install

DEB_PACKAGES += debhelper dh-dkms dkms lintian debootstrap e2fsprogs

# Installed files that name installed paths.
$(INSTALL_OUT)/libmoecache.pc: tools/install/build.mk lib/build.mk
	@mkdir -p $(dir $@)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))' \
		'includedir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))' '' \
		'Name: libmoecache' 'Description: client, agent and loader library for /dev/moecache' \
		'Version: $(LIBMOECACHE_VERSION)' 'Cflags: -I$${includedir}' \
		'Libs: -L$${libdir} -lmoecache' 'Libs.private: -pthread' > $@

$(INSTALL_OUT)/dkms.conf: tools/install/dkms.conf tools/install/build.mk
	@mkdir -p $(dir $@)
	sed 's/@VERSION@/$(MOECACHE_VERSION)/g' $< > $@

$(INSTALL_OUT)/%.service: tools/systemd/%.service tools/install/build.mk
	@mkdir -p $(dir $@)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' $< > $@

# The script with the folders it reads and runs (its own two lines for them).
$(INSTALL_OUT)/moecache-pools: tools/systemd/moecache-pools tools/install/build.mk
	@mkdir -p $(dir $@)
	sed -e 's|^sysconfdir=.*|sysconfdir=$(SYSCONFDIR)|' -e 's|^sbindir=.*|sbindir=$(SBINDIR)|' \
		$< > $@
	grep -qx 'sysconfdir=$(SYSCONFDIR)' $@ && grep -qx 'sbindir=$(SBINDIR)' $@

# The paths above depend on the command line: rewrite them every time.
.PHONY: install-files
install-files:
	@rm -f $(INSTALL_OUT)/libmoecache.pc $(INSTALL_OUT)/*.service $(INSTALL_OUT)/moecache-pools
	+@$(MAKE) --no-print-directory $(INSTALL_OUT)/libmoecache.pc $(INSTALL_OUT)/dkms.conf \
		$(patsubst tools/systemd/%,$(INSTALL_OUT)/%,$(INSTALL_UNITS)) $(INSTALL_OUT)/moecache-pools

# `install` is this and, from lib/python/build.mk, the Python package
# (install-python; debian/rules runs the two apart, the second once per
# supported Python 3, for python3-moecache).
.PHONY: install install-moecache
install: install-moecache
install-moecache: $(INSTALL_SBIN) $(INSTALL_BIN) $(LIBMOECACHE_SO) $(LIBMOECACHE_A) install-files
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man4 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SYSTEMDUNITDIR) \
		$(DESTDIR)$(UDEVRULESDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
		$(DESTDIR)$(MODULESLOADDIR) $(DESTDIR)$(DKMSSRCDIR)/kmod $(DESTDIR)$(DKMSSRCDIR)/uapi \
		$(DESTDIR)$(SYSCONFDIR)/moecache/pools.d $(DESTDIR)$(DOCDIR)/examples \
		$(DESTDIR)$(DATAROOTDIR)/moecache/traces
	$(INSTALL_PROGRAM) $(INSTALL_SBIN) $(INSTALL_OUT)/moecache-pools $(DESTDIR)$(SBINDIR)/
	$(INSTALL_PROGRAM) $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/
	$(INSTALL_PROGRAM) $(LIBMOECACHE_SO) \
		$(DESTDIR)$(LIBDIR)/libmoecache.so.$(LIBMOECACHE_VERSION)
	ln -sfn libmoecache.so.$(LIBMOECACHE_VERSION) \
		$(DESTDIR)$(LIBDIR)/libmoecache.so.$(LIBMOECACHE_SOVERSION)
	ln -sfn libmoecache.so.$(LIBMOECACHE_SOVERSION) $(DESTDIR)$(LIBDIR)/libmoecache.so
	$(INSTALL_DATA) $(LIBMOECACHE_A) $(DESTDIR)$(LIBDIR)/
	$(INSTALL_DATA) $(INSTALL_OUT)/libmoecache.pc $(DESTDIR)$(PKGCONFIGDIR)/
	$(INSTALL_DATA) $(INSTALL_HDRS) $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL_DATA) $(filter %.1,$(INSTALL_MAN)) $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL_DATA) $(filter %.4,$(INSTALL_MAN)) $(DESTDIR)$(MANDIR)/man4/
	$(INSTALL_DATA) $(filter %.8,$(INSTALL_MAN)) $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL_DATA) $(patsubst tools/systemd/%,$(INSTALL_OUT)/%,$(INSTALL_UNITS)) \
		$(DESTDIR)$(SYSTEMDUNITDIR)/
	$(INSTALL_DATA) tools/systemd/moecache.rules $(DESTDIR)$(UDEVRULESDIR)/60-moecache.rules
	$(INSTALL_DATA) tools/systemd/moecache.sysusers $(DESTDIR)$(SYSUSERSDIR)/moecache.conf
	$(INSTALL_DATA) tools/systemd/moecache.tmpfiles $(DESTDIR)$(TMPFILESDIR)/moecache.conf
	$(INSTALL_DATA) tools/systemd/moecache.modules-load $(DESTDIR)$(MODULESLOADDIR)/moecache.conf
	$(INSTALL_DATA) tools/systemd/pool.conf.example $(DESTDIR)$(DOCDIR)/examples/
	$(INSTALL_DATA) $(MOETRACE_DATA) $(DESTDIR)$(DATAROOTDIR)/moecache/traces/
	$(INSTALL_DATA) $(INSTALL_OUT)/dkms.conf $(DESTDIR)$(DKMSSRCDIR)/
	$(INSTALL_DATA) Kbuild $(DESTDIR)$(DKMSSRCDIR)/
	$(INSTALL_DATA) $(filter kmod/%,$(DKMS_SRCS)) $(DESTDIR)$(DKMSSRCDIR)/kmod/
	$(INSTALL_DATA) $(filter uapi/%,$(DKMS_SRCS)) $(DESTDIR)$(DKMSSRCDIR)/uapi/

# Removes what `make install` installed with the same settings (not the
# folders, which other software may share, nor a DKMS registration).
.PHONY: uninstall uninstall-moecache
uninstall: uninstall-moecache
uninstall-moecache:
	rm -f $(addprefix $(DESTDIR)$(SBINDIR)/,$(notdir $(INSTALL_SBIN)) moecache-pools)
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(INSTALL_BIN)))
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/libmoecache.,so so.$(LIBMOECACHE_SOVERSION) \
		so.$(LIBMOECACHE_VERSION) a)
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/libmoecache.pc
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/,$(notdir $(INSTALL_HDRS)))
	rm -f $(foreach m,$(INSTALL_MAN),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)))
	rm -f $(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(notdir $(INSTALL_UNITS)))
	rm -f $(DESTDIR)$(UDEVRULESDIR)/60-moecache.rules $(DESTDIR)$(SYSUSERSDIR)/moecache.conf \
		$(DESTDIR)$(TMPFILESDIR)/moecache.conf $(DESTDIR)$(MODULESLOADDIR)/moecache.conf
	rm -f $(DESTDIR)$(DOCDIR)/examples/pool.conf.example
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(DATAROOTDIR)/moecache/traces/,$(notdir $(MOETRACE_DATA)))
	-rmdir $(DESTDIR)$(DATAROOTDIR)/moecache/traces $(DESTDIR)$(DATAROOTDIR)/moecache 2>/dev/null
	rm -rf $(DESTDIR)$(DKMSSRCDIR)

# What `make install` installs, built (debian/rules builds only this).
.PHONY: moecache-programs
moecache-programs: $(INSTALL_SBIN) $(INSTALL_BIN) $(LIBMOECACHE_SO) $(LIBMOECACHE_A)

# The five .debs in build/deb/, built from a copy of the tree with
# dpkg-buildpackage, then lintian (fails on an error). DIST=CODENAME
# (tools/releases) builds them for that release in its chroot, into
# build/deb-CODENAME/.
DIST ?=
DEB_OUT := $(BUILD)/deb$(if $(DIST),-$(DIST))
.PHONY: deb
deb:
	tools/install/deb $(DEB_OUT) $(MOECACHE_VERSION) $(DIST)

# The packages installed and used on a booted Debian 12, or with DIST on the
# release it names (not in `make check`: README, "Install").
.PHONY: check-install
check-install: deb
	MOECACHE_INSTALL_DIST=$(DIST) tools/install/check-install

# For `make check`: install/uninstall, the exported symbols, the packages
# and lintian (tools/install/check-packages).
.PHONY: check-packages
check-packages: $(LIBMOECACHE_SO)
	+@MAKE="$(MAKE)" BUILD=$(BUILD) tools/install/check-packages
