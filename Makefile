# rdmad: declarative RDMA resource daemon.
#   make          build build/rdmad, build/rdmactl, build/librdmad.so
#   make check    install what is missing, build, run every test
#   make demo     install what is missing, run the daemon on soft-RoCE
#   make deps     install the Debian packages the build and tests need

VERSION := 0.1.0
B := build

CC ?= cc
PKGS := libibverbs libconfig libmicrohttpd jansson libsystemd
WARN := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 $(WARN) -fPIC -D_GNU_SOURCE -DRDMAD_VERSION='"$(VERSION)"' \
	-Idaemon -Iproto -Iclient
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

DAEMON_SRC := $(filter-out daemon/main.c,$(wildcard daemon/*.c))
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(B)/%.o)
LIB_SRC := $(wildcard client/lib*.c) $(wildcard proto/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
# rdmactl's own pieces (everything in client/ outside the library).
CTL_SRC := $(filter-out client/lib% client/rdmactl.c,$(wildcard client/*.c))
CTL_OBJ := $(CTL_SRC:%.c=$(B)/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

# Unit tests run under AddressSanitizer and UBSan.
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer
ASAN_DAEMON_OBJ := $(DAEMON_SRC:%.c=$(B)/asan/%.o)
ASAN_LIB_OBJ := $(LIB_SRC:%.c=$(B)/asan/%.o) $(CTL_SRC:%.c=$(B)/asan/%.o)

all: $(B)/rdmad $(B)/rdmactl $(B)/librdmad.so

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/rdmad: $(B)/daemon/main.o $(DAEMON_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/librdmad.so: $(LIB_OBJ) client/librdmad.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,librdmad.so.0 \
		-Wl,--version-script=client/librdmad.map -o $@ $(LIB_OBJ) \
		$(PKG_LIBS)

$(B)/rdmactl: $(B)/client/rdmactl.o $(CTL_OBJ) $(B)/librdmad.so
	$(CC) $(CFLAGS) -o $@ $(B)/client/rdmactl.o $(CTL_OBJ) -L$(B) -lrdmad \
		-Wl,-rpath,'$$ORIGIN' $(PKG_LIBS)

$(B)/tests/%: tests/unit/%.c $(ASAN_DAEMON_OBJ) $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -Itests/unit -o $@ $^ \
		$(PKG_LIBS) -lcmocka

unit: $(UNIT_BIN)

deps:
	@tests/deps

check: deps
	$(MAKE) all unit
	tests/check

demo: deps
	$(MAKE) all
	tests/demo

clean:
	rm -rf $(B)

.PHONY: all unit deps check demo clean
-include $(shell find $(B) -name '*.d' 2>/dev/null)
