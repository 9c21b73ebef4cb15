# mk/install.mk — `make install` and `make uninstall` (included by the Makefile).
#
#   make install   PREFIX=/usr/local DESTDIR=/tmp/stage
#   make uninstall PREFIX=/usr/local DESTDIR=/tmp/stage
#
# PREFIX is where the files will live when the system runs; DESTDIR is
# prepended only when copying (staging for a package). Every directory below
# can be overridden on the command line. What goes where:
#
#   $(BINDIR)          h5logfs h5logreplay h5logdump h5logrecover [h5logtail, if built]
#   $(SBINDIR)         mount.h5logfs (with @BINDIR@ filled in)
#   $(MOUNT_HELPER_DIR)/mount.fuse.h5logfs -> $(SBINDIR)/mount.h5logfs
#                      mount(8) looks for helpers in /sbin only, and a helper
#                      named after the full type fuse.h5logfs wins over
#                      Debian's generic mount.fuse3. Without it, mount(8)
#                      falls back to mount.fuse3, which runs h5logfs from
#                      PATH with the options unfiltered (x-systemd.* and
#                      relatime make the daemon fail) and adds dev,suid.
#                      MOUNT_HELPER_DIR= (empty) skips the link.
#   $(LIBDIR)          libh5log.so.$(H5L_VERSION), libh5log.so.$(H5L_SOVERSION),
#                      libh5log.so, libh5log.a
#   $(INCLUDEDIR)      h5log.h h5log_common.h h5log_reader.h
#   $(PKGCONFIGDIR)    h5log.pc
#   $(SYSTEMDUNITDIR)  h5logfs@.service. Default $(PREFIX)/lib/systemd/system:
#                      systemd searches /usr/local/lib/systemd/system and
#                      /usr/lib/systemd/system, and /etc/systemd/system stays
#                      the administrator's. For another PREFIX, pass
#                      SYSTEMDUNITDIR=/etc/systemd/system.
#   $(MANDIR)          h5logfs.8 mount.h5logfs.8 h5logreplay.1 h5logdump.1 h5logrecover.1
#                      h5log.3 [h5logtail.1, with h5logtail]
#   $(DOCDIR)          operations.md, examples/ (.mount/.automount pair,
#                      h5logfs@ instance configuration)
#   $(PYTHONDIR)/h5log the Python package (mk/python.mk defines PYTHONDIR:
#                      $(PREFIX)/lib/pythonX.Y/dist-packages, which
#                      /usr/bin/python3 searches for PREFIX /usr/local and
#                      /usr); its _config.py names the installed
#                      $(LIBDIR)/$(H5L_SONAME)
#
# Nothing is written to $(SYSCONFDIR); the unit reads
# $(SYSCONFDIR)/h5logfs/INSTANCE.conf, which the administrator writes.
# With an empty DESTDIR, install and uninstall run ldconfig (when root).

PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/h5logfs
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
MOUNT_HELPER_DIR ?= /sbin
FUSERMOUNT3 ?= $(or $(shell command -v fusermount3 2>/dev/null),/usr/bin/fusermount3)
INSTALL ?= install

# H5L_VERSION, H5L_SONAME: from the Makefile (defined once, there)

INST_TOOLS := h5logfs h5logreplay h5logdump h5logrecover
INST_HEADERS := h5log.h h5log_common.h h5log_reader.h
INST_MAN8 := h5logfs.8 mount.h5logfs.8
INST_MAN1 := h5logreplay.1 h5logdump.1 h5logrecover.1
INST_MAN3 := h5log.3
INST_UNITS := h5logfs@.service
INST_EXAMPLES := systemd/examples/data-h5logfs.mount systemd/examples/data-h5logfs.automount \
	systemd/examples/h5logfs-instance.conf

# pkg-config paths relative to ${prefix} when they lie under it: a copy of
# h5log.pc with only its prefix= line changed describes a staged (DESTDIR) or
# moved tree (pkgconf's --define-prefix and --define-variable=prefix would
# also move the paths of hdf5's dependency ompi.pc)
pc_rel = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# fill in the install paths of a unit or script: $(call subst_paths,IN,OUT)
subst_paths = sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SBINDIR@|$(SBINDIR)|g' \
	-e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@FUSERMOUNT3@|$(FUSERMOUNT3)|g' $(1) > $(2)

.PHONY: install uninstall

install: lib tools daemon
	@{ echo 'prefix=$(PREFIX)'; \
	   echo 'exec_prefix=$${prefix}'; \
	   echo 'libdir=$(call pc_rel,$(LIBDIR))'; \
	   echo 'includedir=$(call pc_rel,$(INCLUDEDIR))'; \
	   echo; \
	   echo 'Name: h5log'; \
	   echo 'Description: libh5log, the parallel log-layout HDF5 writer (MPI) and its tick-by-tick reader'; \
	   echo 'Version: $(H5L_VERSION)'; \
	   echo 'Requires: hdf5'; \
	   echo 'Cflags: -I$${includedir}'; \
	   echo 'Libs: -L$${libdir} -lh5log'; \
	   echo 'Libs.private: -lhdf5_hl -lxxhash -lpthread -lm'; \
	} > $(BUILD)/h5log.pc
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)/examples
	$(INSTALL) -m 755 $(INST_TOOLS:%=$(BUILD)/bin/%) $(DESTDIR)$(BINDIR)/
	if [ -x $(BUILD)/bin/h5logtail ]; then \
		$(INSTALL) -m 755 $(BUILD)/bin/h5logtail $(DESTDIR)$(BINDIR)/ && \
		$(INSTALL) -m 644 docs/man/h5logtail.1 $(DESTDIR)$(MANDIR)/man1/; fi
	$(call subst_paths,mount_helpers/mount.h5logfs,$(BUILD)/mount.h5logfs)
	$(INSTALL) -m 755 $(BUILD)/mount.h5logfs $(DESTDIR)$(SBINDIR)/mount.h5logfs
	if [ -n "$(MOUNT_HELPER_DIR)" ]; then \
		$(INSTALL) -d $(DESTDIR)$(MOUNT_HELPER_DIR) && \
		ln -sfn $(SBINDIR)/mount.h5logfs $(DESTDIR)$(MOUNT_HELPER_DIR)/mount.fuse.h5logfs; fi
	soname=$$(objdump -p $(BUILD)/libh5log.so | sed -n 's/^ *SONAME *//p'); \
	if [ "$$soname" = "$(H5L_SONAME)" ]; then \
		$(INSTALL) -m 755 $(BUILD)/libh5log.so $(DESTDIR)$(LIBDIR)/libh5log.so.$(H5L_VERSION) && \
		ln -sfn libh5log.so.$(H5L_VERSION) $(DESTDIR)$(LIBDIR)/$(H5L_SONAME) && \
		ln -sfn $(H5L_SONAME) $(DESTDIR)$(LIBDIR)/libh5log.so; \
	elif [ -z "$$soname" ]; then \
		echo "warning: $(BUILD)/libh5log.so has no SONAME (link it with -Wl,-soname,$(H5L_SONAME)); installed unversioned" >&2; \
		$(INSTALL) -m 755 $(BUILD)/libh5log.so $(DESTDIR)$(LIBDIR)/libh5log.so; \
	else \
		echo "error: $(BUILD)/libh5log.so has SONAME $$soname, expected $(H5L_SONAME)" >&2; exit 1; \
	fi
	$(INSTALL) -m 644 $(BUILD)/libh5log.a $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 644 $(INST_HEADERS:%=libcore/include/%) $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 644 $(BUILD)/h5log.pc $(DESTDIR)$(PKGCONFIGDIR)/h5log.pc
	$(foreach u,$(INST_UNITS),$(call subst_paths,systemd/$(u),$(BUILD)/$(u)) && \
		$(INSTALL) -m 644 $(BUILD)/$(u) $(DESTDIR)$(SYSTEMDUNITDIR)/$(u);)
	$(INSTALL) -m 644 $(INST_MAN1:%=docs/man/%) $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 $(INST_MAN3:%=docs/man/%) $(DESTDIR)$(MANDIR)/man3/
	$(INSTALL) -m 644 $(INST_MAN8:%=docs/man/%) $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 644 docs/operations.md $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 644 $(INST_EXAMPLES) $(DESTDIR)$(DOCDIR)/examples/
	$(INSTALL) -d $(DESTDIR)$(PYTHONDIR)/h5log
	$(INSTALL) -m 644 $(filter-out %/_config.py,$(PY_MODULES)) $(DESTDIR)$(PYTHONDIR)/h5log/
	{ echo '# written by make install: the library this package loads'; \
	  echo 'LIBRARY = "$(LIBDIR)/$(H5L_SONAME)"'; } > $(BUILD)/h5log_config.py
	$(INSTALL) -m 644 $(BUILD)/h5log_config.py $(DESTDIR)$(PYTHONDIR)/h5log/_config.py
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

uninstall:
	rm -f $(INST_TOOLS:%=$(DESTDIR)$(BINDIR)/%) $(DESTDIR)$(BINDIR)/h5logtail
	rm -f $(DESTDIR)$(SBINDIR)/mount.h5logfs
	if [ -n "$(MOUNT_HELPER_DIR)" ]; then rm -f $(DESTDIR)$(MOUNT_HELPER_DIR)/mount.fuse.h5logfs; fi
	rm -f $(DESTDIR)$(LIBDIR)/libh5log.so $(DESTDIR)$(LIBDIR)/libh5log.so.* $(DESTDIR)$(LIBDIR)/libh5log.a
	rm -f $(INST_HEADERS:%=$(DESTDIR)$(INCLUDEDIR)/%)
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/h5log.pc
	rm -f $(INST_UNITS:%=$(DESTDIR)$(SYSTEMDUNITDIR)/%)
	rm -f $(INST_MAN1:%=$(DESTDIR)$(MANDIR)/man1/%) $(DESTDIR)$(MANDIR)/man1/h5logtail.1
	rm -f $(INST_MAN3:%=$(DESTDIR)$(MANDIR)/man3/%) $(INST_MAN8:%=$(DESTDIR)$(MANDIR)/man8/%)
	rm -f $(DESTDIR)$(DOCDIR)/operations.md $(addprefix $(DESTDIR)$(DOCDIR)/examples/,$(notdir $(INST_EXAMPLES)))
	rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null || true
	rm -rf $(DESTDIR)$(PYTHONDIR)/h5log
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi
