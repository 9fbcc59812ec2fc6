# rdmad: declarative RDMA resource daemon.
#   make          build build/rdmad, build/rdmactl, build/librdmad.so
#   make check    install what is missing, build, run every test
#   make demo     install what is missing, run the daemon on soft-RoCE
#   make deps     install the Debian packages the build and tests need

VERSION := 0.1.0
B := build
PREFIX ?= /usr/local

CC ?= cc
PKGS := libibverbs libconfig libmicrohttpd jansson libsystemd
WARN := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral
CFLAGS ?= -O2 -g
# daemon/ by layer: front ends, control layer, engine, model, verbs edge.
DAEMON_DIRS := daemon daemon/front daemon/api daemon/engine daemon/model daemon/verbs
DAEMON_INC := $(DAEMON_DIRS:%=-I%)
CFLAGS += -std=gnu11 $(WARN) -fPIC -D_GNU_SOURCE -DRDMAD_VERSION='"$(VERSION)"' \
	$(DAEMON_INC) -Iproto -Iclient
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

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

all: $(B)/rdmad $(B)/rdmactl $(B)/librdmad.so $(B)/rdmad.pc \
	$(B)/examples/attach

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/tsan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/rdmad: $(B)/daemon/main.o $(DAEMON_OBJ) $(PROTO_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

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
	$(CC) $(CFLAGS) $(TSAN) $(PKG_CFLAGS) -Itests/unit -o $@ $^ \
		$(PKG_LIBS) -lcmocka

tsan: $(B)/rdmad-tsan $(B)/tsan-tests/test_workers

$(B)/librdmad.so: $(LIB_OBJ) client/librdmad.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,librdmad.so.0 \
		-Wl,--version-script=client/librdmad.map -o $@ $(LIB_OBJ) \
		$(shell pkg-config --libs libibverbs jansson)

# The soname programs load.
$(B)/librdmad.so.0: $(B)/librdmad.so
	ln -sf librdmad.so $@

$(B)/rdmad.pc: client/rdmad.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' $< >$@

$(B)/examples/attach: examples/attach.c $(B)/librdmad.so.0
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< -L$(B) -lrdmad \
		-Wl,-rpath,'$$ORIGIN/..' $(shell pkg-config --libs libibverbs)

$(B)/rdmactl: $(B)/client/rdmactl.o $(CTL_OBJ) $(B)/librdmad.so.0
	$(CC) $(CFLAGS) -o $@ $(B)/client/rdmactl.o $(CTL_OBJ) -L$(B) -lrdmad \
		-Wl,-rpath,'$$ORIGIN' $(PKG_LIBS)

$(B)/tests/%: tests/unit/%.c $(ASAN_DAEMON_OBJ) $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -Itests/unit -o $@ $^ \
		$(PKG_LIBS) -lcmocka

# The fuzz targets replay their seeds and past crashes (tests/fuzz/) as
# unit tests, built with the daemon's compiler.
FUZZ_REPLAY := $(patsubst tests/fuzz/fuzz_%.c,$(B)/tests/test_fuzz_%, \
	$(wildcard tests/fuzz/fuzz_*.c))

$(B)/tests/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c \
		$(ASAN_DAEMON_OBJ) $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -Itests/fuzz \
		-DFUZZ_TARGET='"fuzz_$*"' -o $@ $^ $(PKG_LIBS) -lcmocka

unit: $(UNIT_BIN) $(FUZZ_REPLAY)

# Small programs the integration suite drives (tests/integration/helpers).
HELPERS := $(B)/tests/loopback $(B)/tests/devwatch_probe \
	$(B)/tests/event_client

$(B)/tests/loopback: tests/integration/helpers/loopback.c \
		$(B)/daemon/verbs/qpstate.o $(B)/daemon/verbs/selftest.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/tests/devwatch_probe: tests/integration/helpers/devwatch_probe.c \
		$(B)/daemon/verbs/devwatch.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/tests/event_client: tests/integration/helpers/event_client.c \
		$(B)/librdmad.so.0
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Iclient -o $@ $< -L$(B) -lrdmad \
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
FUZZ_CFLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -DRDMAD_VERSION='"$(VERSION)"' $(DAEMON_INC) -Iproto \
	-Itests/fuzz
FUZZ_ALL := fuzz_config fuzz_api fuzz_http fuzz_proto
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SECONDS ?= 60
FUZZ_OBJ := $(DAEMON_SRC:%.c=$(B)/fuzz/obj/%.o) \
	$(PROTO_OBJ:$(B)/%=$(B)/fuzz/obj/%)

$(B)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
		$(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer $(PKG_CFLAGS) \
		-o $@ $^ $(PKG_LIBS)

fuzz-build: $(FUZZ_ALL:%=$(B)/fuzz/%)

fuzz: $(FUZZ_TARGETS:%=$(B)/fuzz/%)
	tests/fuzz/run $(FUZZ_SECONDS) $(FUZZ_TARGETS)

deps:
	@tests/deps

check: deps
	$(MAKE) all unit helpers $(B)/rdmad-asan tsan
	tests/check

# The load and fault suite at full size (make check runs it small).
stress: deps
	$(MAKE) all helpers
	RDMAD_STRESS=long tests/vm/run /usr/bin/python3 -m pytest -v -s \
		-p no:cacheprovider tests/integration/test_stress.py

# rdmad under a real systemd (PID 1 in a throwaway VM): the unit files,
# readiness, reload, journal fields, watchdog, socket activation.
systemd-check: all
	tests/systemd/run

demo: deps
	$(MAKE) all
	tests/demo

clean:
	rm -rf $(B)

include bench/bench.mk
bench:
	bench/deps
	$(MAKE) all bench-progs
	bench/run --size "$(BENCH_SIZE)"

.PHONY: all unit helpers tsan fuzz fuzz-build deps check stress systemd-check demo clean
-include $(shell find $(B) -name '*.d' 2>/dev/null)
