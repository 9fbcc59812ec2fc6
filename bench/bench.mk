# make bench: build rules for the benchmark programs (bench/*.c ->
# build/bench/). Included by the top Makefile, which defines B, CFLAGS
# and PKG_CFLAGS; `make bench-progs` builds them, `make bench` runs
# bench/run (see bench/README.md).

BENCH_BINS := $(patsubst bench/%.c,$(B)/bench/%,$(wildcard bench/*.c))

# What each program links beyond libc.
BENCH_LIBS_cfgwalk := $(shell pkg-config --libs libconfig 2>/dev/null)
BENCH_LIBS_bare := $(shell pkg-config --libs libibverbs libsystemd 2>/dev/null) -lpthread
BENCH_LIBS_attachb := $(shell pkg-config --libs libibverbs 2>/dev/null) \
	-L$(B) -lrdmad -Wl,-rpath,'$$ORIGIN/..'
BENCH_LIBS_ctlload := $(shell pkg-config --libs jansson 2>/dev/null) -lpthread
BENCH_LIBS_probe := $(shell pkg-config --libs jansson 2>/dev/null) -lpthread
BENCH_LIBS_regserve := $(shell pkg-config --libs libibverbs 2>/dev/null) -lpthread

# popb times the daemon's own population code.
BENCH_LIBS_popb := -lpthread
$(B)/bench/popb: $(B)/daemon/verbs/populate.o

# Programs that speak rdmad's control protocol link its codec.
BENCH_PROTO_USERS := $(B)/bench/ctlload $(B)/bench/probe
$(BENCH_PROTO_USERS): $(B)/proto/proto.o $(B)/proto/frames.o
$(B)/bench/attachb: $(B)/librdmad.so.0

$(B)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(call inc,$<) $(PKG_CFLAGS) -MMD -MP -o $@ $< \
		$(filter %.o,$^) $(BENCH_LIBS_$*)

bench-progs: $(BENCH_BINS)

.PHONY: bench bench-progs
