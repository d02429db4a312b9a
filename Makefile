# gpuprov: GNU make. `make` builds ./gpuprov; `make check` runs every test;
# `make demo` shows the main job against a throwaway sandbox root.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share/gpuprov
MANDIR ?= $(PREFIX)/share/man
DESTDIR ?=

CC ?= cc
PKGS := libcurl libarchive libcjson libkmod libcrypto liblzma sqlite3
BUILD ?= build
CFLAGS ?= -O2 -g
WARNINGS := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
	-Wvla -Wno-unused-parameter
ifeq ($(WERROR),1)
WARNINGS += -Werror
endif
ifeq ($(SANITIZE),1)
CFLAGS += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
ALL_CPPFLAGS = -Iinclude -D_GNU_SOURCE -DGP_VERSION='"$(VERSION)"' \
	-DGP_DATADIR='"$(DATADIR)"' -DGP_SRCDIR='"$(CURDIR)"' $(PKG_CFLAGS) $(CPPFLAGS)
ALL_CFLAGS = -std=gnu11 $(WARNINGS) $(CFLAGS)
VERSION := 0.1.0

# Rebuild everything when the flags change (PREFIX, SANITIZE, CFLAGS...):
# the stamp holds the flags of the last build in this build directory.
FLAGS_NOW := $(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(LDFLAGS)
ifneq ($(FLAGS_NOW),$(file <$(BUILD)/flags.stamp))
$(shell mkdir -p $(BUILD))
$(file >$(BUILD)/flags.stamp,$(FLAGS_NOW))
endif

LIB_SRCS := $(sort $(wildcard src/*.c src/sys/*.c src/stages/*.c src/nv/*.c))
LIB_SRCS := $(filter-out src/main.c,$(LIB_SRCS))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

BUILD_DEPS := gcc make pkg-config libkmod-dev libarchive-dev libcurl4-openssl-dev \
	libcjson-dev libssl-dev liblzma-dev libsqlite3-dev
TEST_DEPS := libcmocka-dev bats busybox-static kmod binutils xz-utils python3 \
	python3-jsonschema clang-format cppcheck openssl debootstrap apt-utils dpkg-dev gnupg

.PHONY: all check check-asan test-run fuzz lint install uninstall clean deps deps-demo demo

all: gpuprov

gpuprov: $(BUILD)/gpuprov
	cp $< $@

$(BUILD)/gpuprov: $(BUILD)/src/main.o $(BUILD)/libgpuprov.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/libgpuprov.a: $(LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/%.o: %.c $(wildcard include/gpuprov/*.h) $(BUILD)/flags.stamp
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c tests/unit/testutil.h $(BUILD)/libgpuprov.a $(BUILD)/flags.stamp
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -Itests/unit -o $@ $< $(BUILD)/libgpuprov.a \
		$(LDFLAGS) $(PKG_LIBS) -lcmocka

# Installs missing build and test packages (Debian/Ubuntu).
deps:
	@sh tests/deps.sh $(BUILD_DEPS) $(TEST_DEPS)
# The demo builds a sandbox root with busybox-static as its shell.
deps-demo:
	@sh tests/deps.sh $(BUILD_DEPS) busybox-static

check: deps
	$(MAKE) test-run

check-asan: deps
	$(MAKE) BUILD=build-asan SANITIZE=1 test-run

test-run: $(BUILD)/gpuprov $(UNIT_BINS) $(BUILD)/killshim.so
	GPUPROV=$(CURDIR)/$(BUILD)/gpuprov UNIT_BINS="$(UNIT_BINS)" \
		KILLSHIM=$(CURDIR)/$(BUILD)/killshim.so sh tests/run.sh

# The kill-point sweep's LD_PRELOAD shim (tests/fixtures/killshim.c). make
# check sweeps every 5th point; `make killsweep` every one (STRIDE=N for
# another stride).
$(BUILD)/killshim.so: tests/fixtures/killshim.c $(BUILD)/flags.stamp
	$(CC) -std=gnu11 $(WARNINGS) -O2 -g -fPIC -shared -o $@ $< -ldl

STRIDE ?= 1
.PHONY: killsweep
killsweep: $(BUILD)/gpuprov $(BUILD)/killshim.so
	GPUPROV=$(CURDIR)/$(BUILD)/gpuprov KILLSHIM=$(CURDIR)/$(BUILD)/killshim.so \
		KILLSWEEP_STRIDE=$(STRIDE) bats tests/e2e/killsweep.bats

demo: deps-demo
	$(MAKE) all
	@sh tests/demo.sh ./gpuprov

# libFuzzer on the profile loader (clang, libclang-rt-14-dev). FUZZ_SECONDS
# bounds the run; the seed corpus is the catalogue plus the broken profiles.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_LIB_SRCS := $(filter-out src/main.c,$(LIB_SRCS))
build-fuzz/fuzz_profile: tests/fuzz/fuzz_profile.c $(FUZZ_LIB_SRCS) $(wildcard include/gpuprov/*.h)
	@mkdir -p build-fuzz
	$(FUZZ_CC) -std=gnu11 $(FUZZ_FLAGS) -Iinclude -D_GNU_SOURCE -DGP_SRCDIR='"$(CURDIR)"' \
		-DGP_DATADIR='"$(DATADIR)"' -DGP_VERSION='"$(VERSION)"' $(PKG_CFLAGS) \
		-o $@ tests/fuzz/fuzz_profile.c $(FUZZ_LIB_SRCS) $(PKG_LIBS)

fuzz: build-fuzz/fuzz_profile
	@rm -rf build-fuzz/corpus && mkdir -p build-fuzz/corpus
	@find profiles tests/fixtures -name '*.json' -exec cp --backup=numbered -t build-fuzz/corpus {} +
	./build-fuzz/fuzz_profile -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-timeout=10 -rss_limit_mb=2048 build-fuzz/corpus

# Benchmark (issue 4): gpuprov installing a >=300 MB cuDNN-shaped .tar.xz over
# loopback HTTPS vs curl + sha256sum -c + tar -xJf; prints times, ratio, peak
# RSS. Needs root; builds the tarball once into $GPUPROV_TEST_CACHE/bench.
# Not part of check.
.PHONY: bench
bench: $(BUILD)/gpuprov
	sh tests/bench/bench.sh $(CURDIR)/$(BUILD)/gpuprov

lint:
	clang-format --dry-run --Werror src/*.c src/*/*.c include/gpuprov/*.h tests/unit/*.c tests/unit/*.h
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
		--suppress=missingIncludeSystem --inline-suppr -Iinclude -D_GNU_SOURCE src

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/profiles $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(MANDIR)/man5
	install -m 0755 gpuprov $(DESTDIR)$(BINDIR)/gpuprov
	cp -R profiles/. $(DESTDIR)$(DATADIR)/profiles/
	install -m 0644 docs/gpuprov.8 $(DESTDIR)$(MANDIR)/man8/gpuprov.8
	install -m 0644 docs/gpuprov-profile.5 $(DESTDIR)$(MANDIR)/man5/gpuprov-profile.5

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/gpuprov $(DESTDIR)$(MANDIR)/man8/gpuprov.8 \
		$(DESTDIR)$(MANDIR)/man5/gpuprov-profile.5
	rm -rf $(DESTDIR)$(DATADIR)

clean:
	rm -rf build build-asan build-fuzz gpuprov
