# rdmad: declarative RDMA resource daemon.
#   make          build build/rdmad, build/rdmactl, build/librdmad.so
#   make check    install what is missing, build, run every test
#   make demo     install what is missing, run the daemon on soft-RoCE
#   make deps     install the Debian packages the build and tests need
#   make install  install (PREFIX, DESTDIR and the directories below)
#   make deb      the Debian packages, into build/deb/
#   make pkgcheck build the packages, lintian, install them and attach

VERSION := 0.1.0
comma := ,
B := build

# Where make install puts things (DESTDIR is prepended to each).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
# Multiarch systems pass theirs: LIBDIR=/usr/lib/x86_64-linux-gnu.
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# rdmad.conf(5) lives in /etc/rdmad whatever the prefix; the daemon's
# and rdmactl's defaults are built from SYSCONFDIR.
SYSCONFDIR ?= /etc
# systemd's own directories when installing into /usr (they may differ
# from PREFIX's, e.g. /lib/systemd/system), else under PREFIX.
systemd_dir = $(or $(if $(filter /usr,$(PREFIX)),$(shell \
	pkg-config --variable=$(1) $(2) 2>/dev/null)),$(3))
SYSTEMDUNITDIR ?= $(call systemd_dir,systemdsystemunitdir,systemd,$(PREFIX)/lib/systemd/system)
SYSUSERSDIR ?= $(call systemd_dir,sysusersdir,systemd,$(PREFIX)/lib/sysusers.d)
TMPFILESDIR ?= $(call systemd_dir,tmpfilesdir,systemd,$(PREFIX)/lib/tmpfiles.d)
BASHCOMPDIR ?= $(call systemd_dir,completionsdir,bash-completion,$(DATADIR)/bash-completion/completions)
# The Python package (client/python/rdmad): Debian's python3 looks in
# /usr/lib/python3/dist-packages, and under /usr/local in
# lib/python3.X/dist-packages.
PYTHON3 ?= /usr/bin/python3
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/$(shell \
	$(PYTHON3) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' \
	2>/dev/null || echo python3)/dist-packages)
INSTALL ?= install

CC ?= cc
PKGS := libibverbs librdmacm libconfig libmicrohttpd jansson libsystemd libmnl libxxhash
WARN := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral
CFLAGS ?= -O2 -g
# daemon/ by layer: front ends, control layer, engine, model, verbs edge.
DAEMON_DIRS := daemon daemon/front daemon/api daemon/engine daemon/model daemon/verbs
CFLAGS += -std=gnu11 $(WARN) -fPIC -D_GNU_SOURCE -DRDMAD_VERSION='"$(VERSION)"' \
	-DRDMAD_SYSCONFDIR='"$(SYSCONFDIR)"'
# Include paths by component: a file finds the headers of its own folder
# (the compiler looks there first) and of the layers below it, never
# those above. common/ is the bottom of all; proto/ sits on it; client/
# on proto/; in daemon/ each layer sees the ones below it (verbs: the
# daemon's root helpers; model: verbs and proto/; engine: model; api:
# engine; front: api). client/ and proto/ cannot find a daemon/ header,
# nor verbs/ a model/ one: an include that climbs fails to compile.
INC_common := -Icommon
INC_proto := -Iproto $(INC_common)
INC_client := -Iclient $(INC_proto)
INC_daemon := -Idaemon $(INC_common)
INC_daemon/verbs := -Idaemon/verbs $(INC_daemon)
INC_daemon/model := -Idaemon/model $(INC_daemon/verbs) -Iproto
INC_daemon/engine := -Idaemon/engine $(INC_daemon/model)
INC_daemon/api := -Idaemon/api $(INC_daemon/engine)
INC_daemon/front := -Idaemon/front $(INC_daemon/api)
# main.c wires every layer of the daemon; the unit and fuzz tests and
# the benchmarks may reach anything (INC_ALL).
INC_daemon/main.c := $(INC_daemon/front)
INC_ALL := $(INC_daemon/front) -Iclient
# The include flags of source file $(1): its own INC_ entry, else its
# folder's, else INC_ALL. tests/structure reads the same table.
inc = $(or $(INC_$(1)),$(INC_$(patsubst %/,%,$(dir $(1)))),$(INC_ALL))
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# libmicrohttpd is opened when REST listens (daemon/front/mhd.c), not
# linked: its header is used, its library is not on the link line.
PKG_LIBS = $(shell pkg-config --libs $(filter-out libmicrohttpd,$(PKGS)) 2>/dev/null)
# The name dlopen() asks for: the soname of the library we build against.
MHD_SONAME := $(or $(shell objdump -p $$(pkg-config --variable=libdir \
	libmicrohttpd 2>/dev/null)/libmicrohttpd.so 2>/dev/null | \
	sed -n 's/^ *SONAME *//p'),libmicrohttpd.so.12)
CFLAGS += -DMHD_SONAME='"$(MHD_SONAME)"'

DAEMON_SRC := $(filter-out daemon/main.c,$(wildcard $(DAEMON_DIRS:%=%/*.c)))
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(B)/%.o)
LIB_SRC := $(wildcard client/lib*.c) $(wildcard proto/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
# rdmactl's own pieces (everything in client/ outside the library).
CTL_SRC := $(filter-out client/lib% client/rdmactl.c,$(wildcard client/*.c))
CTL_OBJ := $(CTL_SRC:%.c=$(B)/%.o)
# The wire protocol: shared by the daemon and librdmad.
PROTO_OBJ := $(patsubst %.c,$(B)/%.o,$(wildcard proto/*.c))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

# Unit tests run under AddressSanitizer and UBSan.
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer
ASAN_DAEMON_OBJ := $(DAEMON_SRC:%.c=$(B)/asan/%.o)
ASAN_LIB_OBJ := $(LIB_SRC:%.c=$(B)/asan/%.o) $(CTL_SRC:%.c=$(B)/asan/%.o)
# The threaded engine under ThreadSanitizer: the worker pool's unit test
# and a daemon for the engine's integration tests (RDMAD_BIN=build/rdmad-tsan).
TSAN := -fsanitize=thread -fno-omit-frame-pointer
TSAN_DAEMON_OBJ := $(DAEMON_SRC:%.c=$(B)/tsan/%.o)

# librdmad's file is named after the newest version node of
# client/librdmad.map (RDMAD_0.4: librdmad.so.0.4); the soname
# librdmad.so.0 and the link librdmad.so point to it.
LIB_SONAME := librdmad.so.0
LIB_REAL := $(LIB_SONAME).$(lastword $(shell \
	sed -n 's/^RDMAD_0\.\([0-9][0-9]*\) *{.*/\1/p' client/librdmad.map))

all: $(B)/rdmad $(B)/rdmactl $(B)/librdmad.so $(B)/rdmad.pc \
	$(B)/examples/attach $(B)/examples/target_peer $(B)/dist/rdmactl $(B)/dist/units \
	$(B)/kubelet/api_pb2.py

# rdmad-kubelet's protobuf messages (kubelet/), and the test kubelet's
# (tests/kubelet/), generated from the upstream api.proto: never
# committed. The gRPC services are written by hand over grpcio's generic
# handlers (no protoc plugin needed).
$(B)/kubelet/api_pb2.py: kubelet/api.proto
	@mkdir -p $(dir $@)
	protoc --python_out=$(dir $@) -Ikubelet $<

$(B)/tests/kubelet/api_pb2.py: tests/kubelet/api.proto
	@mkdir -p $(dir $@)
	protoc --python_out=$(dir $@) -Itests/kubelet $<

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(call inc,$<) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

# The install paths built into the programs and rdmad.pc: what uses
# them is rebuilt when one changes.
$(B)/paths: FORCE
	@mkdir -p $(B)
	@printf '%s\n' '$(PREFIX)' '$(SBINDIR)' '$(LIBDIR)' '$(INCLUDEDIR)' \
		'$(SYSCONFDIR)' >$@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

$(B)/daemon/main.o $(B)/asan/daemon/main.o $(B)/tsan/daemon/main.o \
	$(B)/client/rdmactl.o: $(B)/paths

# The OpenAPI document is in the daemon (.incbin, see daemon/api/openapi.c).
$(B)/daemon/api/openapi.o $(B)/asan/daemon/api/openapi.o \
	$(B)/tsan/daemon/api/openapi.o $(B)/fuzz/obj/daemon/api/openapi.o: \
	daemon/api/openapi.json

$(B)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(call inc,$<) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/tsan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN) $(call inc,$<) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/rdmad: $(B)/daemon/main.o $(DAEMON_OBJ) $(PROTO_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The daemon under AddressSanitizer/UBSan, for the integration suite
# (RDMAD_BIN=build/rdmad-asan).
$(B)/rdmad-asan: $(B)/asan/daemon/main.o $(ASAN_DAEMON_OBJ) \
		$(PROTO_OBJ:$(B)/%=$(B)/asan/%)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(PKG_LIBS)

$(B)/rdmad-tsan: $(B)/tsan/daemon/main.o $(TSAN_DAEMON_OBJ) \
		$(PROTO_OBJ:$(B)/%=$(B)/tsan/%)
	$(CC) $(CFLAGS) $(TSAN) -o $@ $^ $(PKG_LIBS)

$(B)/tsan-tests/test_workers: tests/unit/test_workers.c \
		$(B)/tsan/daemon/engine/workers.o $(B)/tsan/daemon/log.o \
		$(B)/tsan/daemon/utf8.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN) $(INC_ALL) $(PKG_CFLAGS) -Itests/unit -o $@ $^ \
		$(PKG_LIBS) -lcmocka

tsan: $(B)/rdmad-tsan $(B)/tsan-tests/test_workers

$(B)/$(LIB_REAL): $(LIB_OBJ) client/librdmad.map
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(LIB_SONAME) \
		-Wl,--version-script=client/librdmad.map -o $@ $(LIB_OBJ) \
		$(shell pkg-config --libs libibverbs librdmacm jansson)

# The soname programs load, and the name they link with.
$(B)/$(LIB_SONAME): $(B)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $@

$(B)/librdmad.so: $(B)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $@

# Paths under PREFIX are written relative to ${prefix}.
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

$(B)/rdmad.pc: client/rdmad.pc.in Makefile $(B)/paths
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
		-e 's|@LIBDIR@|$(call pc_dir,$(LIBDIR))|g' \
		-e 's|@INCLUDEDIR@|$(call pc_dir,$(INCLUDEDIR))|g' $< >$@

$(B)/examples/%: examples/%.c $(B)/librdmad.so.0
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_client) $(PKG_CFLAGS) -o $@ $< -L$(B) -lrdmad \
		-Wl,-rpath,'$$ORIGIN/..' $(shell pkg-config --libs libibverbs)

$(B)/rdmactl: $(B)/client/rdmactl.o $(CTL_OBJ) $(B)/librdmad.so
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(B)/client/rdmactl.o $(CTL_OBJ) \
		-L$(B) -lrdmad -Wl,-rpath,'$$ORIGIN' $(PKG_LIBS)

# rdmactl as installed: found by the system's loader, not beside itself.
$(B)/dist/rdmactl: $(B)/client/rdmactl.o $(CTL_OBJ) $(B)/librdmad.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(B)/client/rdmactl.o $(CTL_OBJ) \
		-L$(B) -lrdmad $(PKG_LIBS)

# The units name the installed daemon and configuration.
UNITS := $(notdir $(wildcard systemd/*.service systemd/*.socket))

$(B)/dist/units: $(UNITS:%=systemd/%) $(B)/paths
	@mkdir -p $@
	for u in $(UNITS); do \
		sed -e 's|/usr/sbin/rdmad|$(SBINDIR)/rdmad|g' \
		    -e 's|/etc/rdmad/|$(SYSCONFDIR)/rdmad/|g' \
		    systemd/$$u >$@/$$u || exit 1; \
	done
	touch $@

$(B)/tests/%: tests/unit/%.c $(ASAN_DAEMON_OBJ) $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(INC_ALL) $(PKG_CFLAGS) -Itests/unit -o $@ $^ \
		$(PKG_LIBS) -lcmocka $(WRAP_$*)

# Unit tests that stand in for some verbs (a fake device's answers).
WRAP_test_restore_stale := $(addprefix -Wl$(comma)--wrap=,ibv_import_device \
	ibv_get_device_name ibv_close_device ibv_import_pd ibv_unimport_pd \
	ibv_import_mr ibv_unimport_mr ibv_dereg_mr ibv_dealloc_pd)

# The fuzz targets replay their seeds and past crashes (tests/fuzz/) as
# unit tests, built with the daemon's compiler.
FUZZ_REPLAY := $(patsubst tests/fuzz/fuzz_%.c,$(B)/tests/test_fuzz_%, \
	$(wildcard tests/fuzz/fuzz_*.c))

$(B)/tests/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c \
		$(ASAN_DAEMON_OBJ) $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(INC_ALL) $(PKG_CFLAGS) -Itests/fuzz \
		-DFUZZ_TARGET='"fuzz_$*"' -o $@ $^ $(PKG_LIBS) -lcmocka

unit: $(UNIT_BIN) $(FUZZ_REPLAY)

# Small programs the integration suite drives (tests/integration/helpers).
HELPERS := $(B)/tests/loopback $(B)/tests/devwatch_probe \
	$(B)/tests/event_client $(B)/tests/pattern_writer \
	$(B)/tests/nums_client $(B)/tests/shared_rdma $(B)/tests/mcast_peer \
	$(B)/tests/big_client $(B)/tests/made_client $(B)/tests/lazy_client \
	$(B)/tests/kubelet/api_pb2.py $(B)/tests/kubelet/goclient \
	$(B)/tests/kubelet/cdiresolve

# The Go programs of tests/kubelet/, built offline from Debian's packaged
# Go modules (/usr/share/gocode, GOPATH mode: no module proxy, no
# vendoring), their build cache in build/. goclient's messages and
# client stub are generated from the upstream api.proto by Debian's
# protoc-gen-go and protoc-gen-go-grpc, into build/ beside it: never
# committed.
GO_ENV := GO111MODULE=off GOPATH=/usr/share/gocode GOPROXY=off GOFLAGS= \
	GOCACHE="$(CURDIR)/$(B)/gocache"
GOCLIENT_SRC := $(B)/tests/kubelet/goclient-src

$(B)/tests/kubelet/goclient: tests/kubelet/goclient/main.go \
		tests/kubelet/api.proto
	@rm -rf $(GOCLIENT_SRC) && mkdir -p $(GOCLIENT_SRC)
	protoc -Itests/kubelet --go_out=$(GOCLIENT_SRC) \
		--go_opt=paths=source_relative,Mapi.proto=rdmad/goclient\;main \
		--go-grpc_out=$(GOCLIENT_SRC) \
		--go-grpc_opt=paths=source_relative,Mapi.proto=rdmad/goclient\;main \
		tests/kubelet/api.proto
	cp tests/kubelet/goclient/main.go $(GOCLIENT_SRC)/
	cd $(GOCLIENT_SRC) && $(GO_ENV) go build -o "$(CURDIR)/$@" .

$(B)/tests/kubelet/cdiresolve: tests/kubelet/cdiresolve/main.go
	@mkdir -p $(dir $@)
	cd tests/kubelet/cdiresolve && $(GO_ENV) go build \
		-o "$(CURDIR)/$@" main.go

$(B)/tests/loopback: tests/integration/helpers/loopback.c \
		$(B)/daemon/verbs/qpstate.o $(B)/daemon/verbs/selftest.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_daemon/verbs) $(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/tests/devwatch_probe: tests/integration/helpers/devwatch_probe.c \
		$(B)/daemon/verbs/devwatch.o $(B)/daemon/verbs/uevent.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_daemon/verbs) $(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/tests/event_client: tests/integration/helpers/event_client.c \
		$(B)/librdmad.so.0
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) $(INC_client) -o $@ $< -L$(B) -lrdmad \
		-Wl,-rpath,'$$ORIGIN/..' $(shell pkg-config --libs libibverbs)

$(B)/tests/pattern_writer $(B)/tests/nums_client $(B)/tests/shared_rdma \
		$(B)/tests/mcast_peer $(B)/tests/big_client $(B)/tests/made_client \
		$(B)/tests/lazy_client: \
		$(B)/tests/%: \
		tests/integration/helpers/%.c $(B)/librdmad.so.0
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) $(INC_client) -o $@ $< -L$(B) -lrdmad \
		-Wl,-rpath,'$$ORIGIN/..' $(shell pkg-config --libs libibverbs)

helpers: $(HELPERS)

# Coverage-guided fuzzing (clang's libFuzzer, with ASan and UBSan): one
# target per input rdmad reads from others. Seeds and dictionaries are in
# tests/fuzz/<target>/; the corpora grow in build/fuzz/corpus/<target>.
#   make fuzz                   every target FUZZ_SECONDS (60) seconds
#   make fuzz FUZZ_TARGETS=fuzz_config FUZZ_SECONDS=600
FUZZ_CC := clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_CFLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -DMHD_SONAME='"$(MHD_SONAME)"' -DRDMAD_VERSION='"$(VERSION)"' \
	-Itests/fuzz
FUZZ_ALL := fuzz_config fuzz_image fuzz_api fuzz_http fuzz_proto fuzz_attached \
	fuzz_frames fuzz_rdmanl fuzz_target fuzz_uevent fuzz_restore_doc \
	fuzz_durable fuzz_mr_table fuzz_restore_leases
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SECONDS ?= 60
# fuzz_proto checks librdmad's decoder of ATTACHED against proto_decode.
FUZZ_OBJ := $(DAEMON_SRC:%.c=$(B)/fuzz/obj/%.o) \
	$(PROTO_OBJ:$(B)/%=$(B)/fuzz/obj/%) $(B)/fuzz/obj/client/librdmad_reuse.o

$(B)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
		$(call inc,$<) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer $(INC_ALL) \
		$(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS)

fuzz-build: $(FUZZ_ALL:%=$(B)/fuzz/%)

# The fuzz targets, one a line (.ci/run shares them out).
fuzz-list:
	@printf "%s\n" $(FUZZ_ALL)

# fuzz_image's committed seeds (the unit tests replay them), made again
# when the image's format changes (test_config_kept says when).
fuzz-image-seeds: $(B)/fuzz/fuzz_config
	rm -f tests/fuzz/fuzz_image/*.img
	RDMAD_FUZZ_IMAGES=tests/fuzz/fuzz_image $(B)/fuzz/fuzz_config \
		-runs=0 tests/fuzz/fuzz_config

# fuzz_image's seeds are the images fuzz_config makes of its own.
fuzz: $(FUZZ_TARGETS:%=$(B)/fuzz/%) $(B)/fuzz/fuzz_config
	tests/fuzz/run $(FUZZ_SECONDS) $(FUZZ_TARGETS)

deps:
	@tests/deps

check: deps
	@start=$$(date +%s); \
	$(MAKE) -j$$(nproc) all unit helpers $(B)/rdmad-asan tsan && \
	RDMAD_CHECK_BUILD_S=$$(($$(date +%s) - start)) tests/check

# A fast loop for development (no substitute for make check): the unit
# tests, the suites on this machine and one VM lane of the suites a
# change most likely breaks, against the plain daemon.
check-quick: deps
	@start=$$(date +%s); \
	$(MAKE) -j$$(nproc) all unit helpers $(B)/rdmad-asan && \
	RDMAD_CHECK_BUILD_S=$$(($$(date +%s) - start)) tests/check --quick

# The load and fault suite at full size (make check runs it small).
stress: deps
	$(MAKE) all helpers
	RDMAD_STRESS=long tests/vm/run /usr/bin/python3 -m pytest -v -s \
		-p no:cacheprovider tests/integration/test_stress.py
	RDMAD_STRESS=long tests/vm/run --import /usr/bin/python3 -m pytest \
		-v -s -p no:cacheprovider tests/integration/test_shared_stress.py

# rdmad under a real systemd (PID 1 in a throwaway VM): the unit files,
# readiness, reload, journal fields, watchdog, socket activation.
systemd-check: all
	tests/systemd/run

demo: deps
	$(MAKE) all
	tests/demo

clean:
	rm -rf $(B)

# ---- installation and packages ----

MANPAGES := $(wildcard man/*.[1-8]) client/librdmad.3
PYFILES := $(wildcard client/python/rdmad/*.py)
MANSECTIONS := $(sort $(subst .,,$(suffix $(MANPAGES))))
# DESTDIR, quoted for the shell: dh_auto_install passes an absolute one,
# which has spaces when the checkout's path has ('x y'/usr/sbin is one
# word). Only recipes use it, never a make function that splits words.
D := $(if $(DESTDIR),'$(subst ','\'',$(DESTDIR))')

install: $(B)/rdmad $(B)/dist/rdmactl $(B)/$(LIB_REAL) $(B)/rdmad.pc \
		$(B)/dist/units $(B)/kubelet/api_pb2.py
	$(INSTALL) -d $(D)$(SBINDIR) $(D)$(BINDIR) $(D)$(LIBDIR) \
		$(D)$(PKGCONFIGDIR) $(D)$(INCLUDEDIR) $(D)$(SYSTEMDUNITDIR) \
		$(D)$(SYSUSERSDIR) $(D)$(TMPFILESDIR) $(D)$(BASHCOMPDIR) \
		$(D)$(SYSCONFDIR)/rdmad $(D)$(PYTHONDIR)/rdmad \
		$(foreach s,$(MANSECTIONS),$(D)$(MANDIR)/man$(s))
	$(INSTALL) -m 0755 $(B)/rdmad $(D)$(SBINDIR)/rdmad
	$(INSTALL) -m 0755 $(B)/dist/rdmactl $(D)$(BINDIR)/rdmactl
	$(INSTALL) -m 0644 $(B)/$(LIB_REAL) $(D)$(LIBDIR)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(D)$(LIBDIR)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(D)$(LIBDIR)/librdmad.so
	$(INSTALL) -m 0644 client/rdmad.h $(D)$(INCLUDEDIR)/rdmad.h
	$(INSTALL) -m 0644 $(B)/rdmad.pc $(D)$(PKGCONFIGDIR)/rdmad.pc
	$(foreach m,$(MANPAGES),$(INSTALL) -m 0644 $(m) \
		$(D)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)) &&) true
	$(foreach u,$(UNITS),$(INSTALL) -m 0644 $(B)/dist/units/$(u) \
		$(D)$(SYSTEMDUNITDIR)/$(u) &&) true
	$(INSTALL) -m 0644 systemd/sysusers.conf $(D)$(SYSUSERSDIR)/rdmad.conf
	$(INSTALL) -m 0644 systemd/tmpfiles.conf $(D)$(TMPFILESDIR)/rdmad.conf
	$(INSTALL) -m 0644 client/rdmactl.bash $(D)$(BASHCOMPDIR)/rdmactl
	$(INSTALL) -m 0644 $(PYFILES) $(D)$(PYTHONDIR)/rdmad/
	$(INSTALL) -D -m 0644 daemon/api/openapi.json $(D)$(DATADIR)/rdmad/openapi.json
	$(INSTALL) -D -m 0644 deploy/prometheus/rdmad.rules.yml \
		$(D)$(DATADIR)/rdmad/prometheus/rdmad.rules.yml
	$(INSTALL) -m 0755 kubelet/rdmad-kubelet $(D)$(BINDIR)/rdmad-kubelet
	$(INSTALL) -D -m 0644 $(B)/kubelet/api_pb2.py \
		$(D)$(PREFIX)/lib/rdmad-kubelet/api_pb2.py
	# The configuration is the operator's: an existing one is kept.
	test -e $(D)$(SYSCONFDIR)/rdmad/rdmad.conf || \
		$(INSTALL) -m 0644 conf/example.conf \
			$(D)$(SYSCONFDIR)/rdmad/rdmad.conf

# Everything install put, but the configuration.
uninstall:
	rm -f $(D)$(SBINDIR)/rdmad $(D)$(BINDIR)/rdmactl \
		$(D)$(LIBDIR)/$(LIB_REAL) $(D)$(LIBDIR)/$(LIB_SONAME) \
		$(D)$(LIBDIR)/librdmad.so $(D)$(INCLUDEDIR)/rdmad.h \
		$(D)$(PKGCONFIGDIR)/rdmad.pc \
		$(foreach m,$(MANPAGES),$(D)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
		$(UNITS:%=$(D)$(SYSTEMDUNITDIR)/%) \
		$(D)$(SYSUSERSDIR)/rdmad.conf $(D)$(TMPFILESDIR)/rdmad.conf \
		$(D)$(BASHCOMPDIR)/rdmactl $(D)$(DATADIR)/rdmad/openapi.json \
		$(D)$(DATADIR)/rdmad/prometheus/rdmad.rules.yml \
		$(PYFILES:client/python/%=$(D)$(PYTHONDIR)/%) \
		$(D)$(BINDIR)/rdmad-kubelet \
		$(D)$(PREFIX)/lib/rdmad-kubelet/api_pb2.py
	rm -rf $(D)$(PYTHONDIR)/rdmad/__pycache__ \
		$(D)$(PREFIX)/lib/rdmad-kubelet/__pycache__
	rmdir $(D)$(PREFIX)/lib/rdmad-kubelet 2>/dev/null || true
	rmdir $(D)$(DATADIR)/rdmad/prometheus $(D)$(DATADIR)/rdmad \
		$(D)$(PYTHONDIR)/rdmad 2>/dev/null || true

# The Debian packages (debian/), built in a copy of the tree under
# build/deb/src so that debian/rules clean cannot touch build/ here;
# the .deb, .changes and .buildinfo files end in build/deb/.
deb:
	tests/pkg/deps
	rm -rf $(B)/deb
	mkdir -p $(B)/deb/src/rdmad
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -z -c -o --exclude-standard; \
	else \
		find . \( -path ./$(B) -o -name .git \) -prune -o \
			\( -type f -o -type l \) -print0; \
	fi | tar -c --null --ignore-failed-read -T - -f - | tar -x -C $(B)/deb/src/rdmad -f -
	cd $(B)/deb/src/rdmad && dpkg-buildpackage -us -uc -b -rfakeroot
	mv $(B)/deb/src/*.deb $(B)/deb/src/*.changes \
		$(B)/deb/src/*.buildinfo $(B)/deb/
	rm -rf $(B)/deb/src
	ls -l $(B)/deb

# Packages, lintian, then the packages installed (in a throwaway overlay
# of this machine's root) and used on soft-RoCE: see tests/pkg/check.
pkgcheck:
	tests/pkg/check

include bench/bench.mk
bench:
	bench/deps
	$(MAKE) all bench-progs
	bench/run --size "$(BENCH_SIZE)"

.PHONY: all unit helpers tsan fuzz fuzz-build fuzz-list fuzz-image-seeds deps check check-quick stress \
	systemd-check demo clean install uninstall deb pkgcheck FORCE
FORCE:
-include $(shell find $(B) -path $(B)/deb -prune -o -name '*.d' -type f -print 2>/dev/null)
