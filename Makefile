# gpuprov: GNU make. `make` builds ./gpuprov; `make check` runs every test;
# `make demo` shows the main job against a throwaway sandbox root.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share/gpuprov
MANDIR ?= $(PREFIX)/share/man
COMPLETIONSDIR ?= /usr/share/bash-completion/completions
# The source tree whose profiles/ the binary searches last; empty for none
# (the Debian package: dist/debian/rules).
SRCDIR ?= $(CURDIR)
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
	-DGP_DATADIR='"$(DATADIR)"' -DGP_BINDIR='"$(BINDIR)"' -DGP_SRCDIR='"$(SRCDIR)"' $(PKG_CFLAGS) $(CPPFLAGS)
ALL_CFLAGS = -std=gnu11 $(WARNINGS) $(CFLAGS)
VERSION := 0.1.0

# Rebuild everything when the flags change (PREFIX, SANITIZE, CFLAGS...):
# the stamp holds the flags of the last build in this build directory.
FLAGS_NOW := $(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(LDFLAGS)
ifneq ($(FLAGS_NOW),$(file <$(BUILD)/flags.stamp))
$(shell mkdir -p $(BUILD))
$(file >$(BUILD)/flags.stamp,$(FLAGS_NOW))
endif

LIB_SRCS := $(sort $(wildcard src/*.c src/pure/*.c src/sys/*.c src/stages/*.c src/nv/*.c))
LIB_SRCS := $(filter-out src/main.c,$(LIB_SRCS))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

BUILD_DEPS := gcc make pkg-config libkmod-dev libarchive-dev libcurl4-openssl-dev \
	libcjson-dev libssl-dev liblzma-dev libsqlite3-dev
TEST_DEPS := libcmocka-dev bats busybox-static kmod binutils xz-utils python3 \
	python3-jsonschema clang-format cppcheck shellcheck openssl debootstrap apt-utils dpkg-dev gnupg
TEST_DEPS += bash-completion debhelper lintian man-db
TEST_DEPS += ansible ansible-lint cloud-init
# dnf.bats: the stand-in rpm repository (the real dnf runs in its debootstrapped root).
TEST_DEPS += rpm createrepo-c

.PHONY: all check check-asan test-run fuzz fuzz-build fuzz-long deps-fuzz lint install uninstall clean deps deps-demo demo schema-json
.PHONY: install-units uninstall-units

all: gpuprov

gpuprov: $(BUILD)/gpuprov
	cp $< $@

# --as-needed: libcurl, libarchive and libsqlite3 are opened on first use
# (src/sys/lazylib.c defines what gpuprov calls of them), not at start-up.
$(BUILD)/gpuprov: $(BUILD)/src/main.o $(BUILD)/libgpuprov.a
	$(CC) $(LDFLAGS) -o $@ $^ -Wl,--as-needed $(PKG_LIBS)

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

# docs/profile.schema.json's stages, from the stage files' key tables
# (`gpuprov --json stages`); tests/e2e/stages.bats checks it is current.
schema-json: $(BUILD)/gpuprov
	python3 docs/schema-json.py $(BUILD)/gpuprov docs/profile.schema.json > $(BUILD)/profile.schema.json
	mv $(BUILD)/profile.schema.json docs/profile.schema.json

# Installs missing build and test packages (Debian/Ubuntu).
deps:
	@sh tests/deps.sh $(BUILD_DEPS) $(TEST_DEPS)
# The demo builds a sandbox root with busybox-static as its shell.
deps-demo:
	@sh tests/deps.sh $(BUILD_DEPS) busybox-static

check: deps
	$(MAKE) test-run EXTRA_UNIT_BINS=$(TSAN_DIR)/test_xzpar

check-asan: deps
	$(MAKE) BUILD=build-asan SANITIZE=1 test-run

test-run: $(BUILD)/gpuprov $(UNIT_BINS) $(EXTRA_UNIT_BINS) $(BUILD)/killshim.so \
		$(BUILD)/ldcache-dump
	GPUPROV=$(CURDIR)/$(BUILD)/gpuprov UNIT_BINS="$(UNIT_BINS) $(EXTRA_UNIT_BINS)" \
		KILLSHIM=$(CURDIR)/$(BUILD)/killshim.so \
		LDCACHE_DUMP=$(CURDIR)/$(BUILD)/ldcache-dump sh tests/run.sh

# The kill-point sweep's LD_PRELOAD shim (tests/fixtures/killshim.c). make
# check sweeps every 5th point; `make killsweep` every one (STRIDE=N for
# another stride).
$(BUILD)/killshim.so: tests/fixtures/killshim.c $(BUILD)/flags.stamp
	$(CC) -std=gnu11 $(WARNINGS) -O2 -g -fPIC -shared -o $@ $< -ldl

# The linker cache parser's pairs for a file (tests/fixtures/ldcache_dump.c),
# which tests/e2e/ldcache.bats holds against the real ldconfig's.
$(BUILD)/ldcache-dump: tests/fixtures/ldcache_dump.c $(BUILD)/libgpuprov.a $(BUILD)/flags.stamp
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libgpuprov.a $(LDFLAGS) $(PKG_LIBS)

STRIDE ?= 1
.PHONY: killsweep
killsweep: $(BUILD)/gpuprov $(BUILD)/killshim.so
	GPUPROV=$(CURDIR)/$(BUILD)/gpuprov KILLSHIM=$(CURDIR)/$(BUILD)/killshim.so \
		KILLSWEEP_STRIDE=$(STRIDE) bats tests/e2e/killsweep.bats

demo: deps-demo
	$(MAKE) all
	@sh tests/demo.sh ./gpuprov

# libFuzzer targets (clang, libclang-rt-14-dev): tests/fuzz/fuzz_<name>.c,
# one per parser of bytes gpuprov does not control, each with its seed corpus
# tests/fuzz/corpus/fuzz_<name>/ (and tests/fuzz/fuzz_<name>.dict when there
# is one). The library is compiled once into $(FUZZ_DIR)/obj for all of them.
# `make fuzz` runs each for FUZZ_SECONDS; `make fuzz-long` runs each for
# FUZZ_RUNS executions, one after the other, and prints the counts reached.
FUZZ_SECONDS ?= 10
FUZZ_RUNS ?= 10000000
FUZZ_CC ?= clang
FUZZ_DEPS := clang libclang-rt-14-dev
FUZZ_DIR := build-fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
# clang: -Wformat=2 also warns of the printf wrappers (gcc does not).
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer $(WARNINGS) -Wno-format-nonliteral \
	$(FUZZ_SAN)
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES := $(FUZZ_SRCS:tests/fuzz/%.c=%)
FUZZ_BINS := $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(FUZZ_DIR)/obj/%.o)
# The profile loader also starts from the catalogue and the test profiles.
FUZZ_SEEDS_fuzz_profile := profiles tests/fixtures/profiles tests/fixtures/bad-profiles \
	tests/fixtures/broken-profiles
FUZZ_MAXLEN_fuzz_profile := 65536

$(FUZZ_DIR)/obj/%.o: %.c $(wildcard include/gpuprov/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_DIR)/libgpuprov.a: $(FUZZ_LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_DIR)/libgpuprov.a
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< \
		$(FUZZ_DIR)/libgpuprov.a $(PKG_LIBS)

fuzz-build: $(FUZZ_BINS)

# One run of one target; FUZZ_OPT says how long.
FUZZ_OPT = -max_total_time=$(FUZZ_SECONDS)
fuzz-run-%: $(FUZZ_DIR)/%
	@FUZZ_SEEDS="$(FUZZ_SEEDS_$*)" FUZZ_MAXLEN="$(FUZZ_MAXLEN_$*)" \
		sh tests/fuzz/run.sh $(FUZZ_DIR) $* $(FUZZ_OPT)

fuzz: deps-fuzz
	$(MAKE) -k $(FUZZ_NAMES:%=fuzz-run-%)

deps-fuzz:
	@sh tests/deps.sh $(FUZZ_DEPS)

# One target at a time (they would only share the cores otherwise).
fuzz-long: deps-fuzz
	$(MAKE) -j1 -k $(FUZZ_NAMES:%=fuzz-run-%) FUZZ_OPT=-runs=$(FUZZ_RUNS); rc=$$?; \
	sh tests/fuzz/run.sh $(FUZZ_DIR) --summary $(FUZZ_NAMES); exit $$rc

# The xz block decoder's threads (src/sys/xzpar.c) under ThreadSanitizer:
# tests/unit/test_xzpar.c built with the two files it needs ($(CC); `make
# check` runs it with the unit tests), then, built with clang, the
# fuzz_xz_blocks seeds and a short seeded run of that target. xzpar.c has
# no fuzzer coverage there: its workers would race on the counters.
TSAN_DIR := build-tsan
TSAN_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer $(WARNINGS) -fsanitize=thread
TSAN_XZ_SRCS := src/sys/xzpar.c src/pure/xzblocks.c
TSAN_XZ_OBJS := $(TSAN_DIR)/fuzz-xzpar.o $(TSAN_DIR)/fuzz-xzblocks.o
TSAN_RUN := TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
.PHONY: check-tsan-xz
$(TSAN_DIR)/test_xzpar: tests/unit/test_xzpar.c tests/unit/testutil.h $(TSAN_XZ_SRCS) \
		include/gpuprov/xzpar.h include/gpuprov/xzblocks.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(TSAN_CFLAGS) -Itests/unit -o $@ $< $(TSAN_XZ_SRCS) \
		-llzma -lcmocka
$(TSAN_DIR)/fuzz-xzpar.o: src/sys/xzpar.c include/gpuprov/xzpar.h include/gpuprov/xzblocks.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(TSAN_CFLAGS) -c -o $@ $<
$(TSAN_DIR)/fuzz-xzblocks.o: src/pure/xzblocks.c include/gpuprov/xzblocks.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(TSAN_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<
$(TSAN_DIR)/fuzz_xz_blocks: tests/fuzz/fuzz_xz_blocks.c tests/fuzz/fuzz.h $(TSAN_XZ_OBJS)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(TSAN_CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< \
		$(TSAN_XZ_OBJS) -llzma
check-tsan-xz: deps-fuzz $(TSAN_DIR)/test_xzpar $(TSAN_DIR)/fuzz_xz_blocks
	$(TSAN_RUN) $(TSAN_DIR)/test_xzpar
	$(TSAN_RUN) $(TSAN_DIR)/fuzz_xz_blocks -runs=0 tests/fuzz/corpus/fuzz_xz_blocks
	rm -rf $(TSAN_DIR)/corpus && mkdir -p $(TSAN_DIR)/corpus
	$(TSAN_RUN) $(TSAN_DIR)/fuzz_xz_blocks -seed=1 -runs=20000 -timeout=60 \
		$(TSAN_DIR)/corpus tests/fuzz/corpus/fuzz_xz_blocks

# Benchmark (issues 4, 18): gpuprov installing a >=300 MB cuDNN-shaped .tar.xz
# over loopback HTTPS (unthrottled, 100 MB/s, 25 MB/s) vs curl + sha256sum -c
# + tar -xJf; median ratios, peak RSS; a no-op on a provisioned root with a
# strace/perf profile (tests/bench/noop.sh). Needs root; builds the tarball
# once into $GPUPROV_TEST_CACHE/bench. BENCH_QUICK=1: a smoke run (small
# archive, one pair). Not part of check.
.PHONY: bench
bench: $(BUILD)/gpuprov
	sh tests/bench/bench.sh $(CURDIR)/$(BUILD)/gpuprov

# .ci/run is not edited from here: shellcheck skips its cd without || exit
# (SC2164) and its unquoted expansions (SC2086) until it is changed.
lint:
	clang-format --dry-run --Werror src/*.c src/*/*.c src/*/*.h include/gpuprov/*.h tests/unit/*.c tests/unit/*.h \
		tests/fuzz/*.c tests/fuzz/*.h
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
		--suppress=missingIncludeSystem --inline-suppr -Iinclude -D_GNU_SOURCE src
	python3 tests/lint/layers.py
	sh tests/lint/srccheck.sh src
	shellcheck -x tests/*.sh tests/fixtures/*.sh tests/bench/*.sh tests/fuzz/run.sh \
		tests/lint/*.sh dist/*.sh
	shellcheck .ci/run
	shellcheck -s bash dist/bash-completion/gpuprov
	sh tests/lint/manpages.sh docs/gpuprov.8 docs/gpuprov-profile.5

install: all install-units
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/profiles $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(COMPLETIONSDIR)
	install -m 0755 gpuprov $(DESTDIR)$(BINDIR)/gpuprov
	cp -R profiles/. $(DESTDIR)$(DATADIR)/profiles/
	install -m 0644 docs/gpuprov.8 $(DESTDIR)$(MANDIR)/man8/gpuprov.8
	install -m 0644 docs/gpuprov-profile.5 $(DESTDIR)$(MANDIR)/man5/gpuprov-profile.5
	install -m 0644 dist/bash-completion/gpuprov $(DESTDIR)$(COMPLETIONSDIR)/gpuprov

# The Debian package: DEB_BUILD/gpuprov_<version>_<arch>.deb, built by
# dpkg-buildpackage in a copy of the tree (dist/mkdeb.sh, dist/debian/).
# DEB_VERSION=0.1.0+site1 builds a local revision, reusing the last copy.
DEB_BUILD ?= build-deb
DEB_DEPS := debhelper dpkg-dev lintian
.PHONY: deb deps-deb
deb: deps-deb
	sh dist/mkdeb.sh $(DEB_BUILD) $(VERSION) $(DEB_VERSION)

deps-deb:
	@sh tests/deps.sh $(BUILD_DEPS) $(DEB_DEPS)

# The systemd units of dist/systemd/ (docs/operations.md), ExecStart in
# BINDIR; tests/e2e/dist.bats checks them with systemd-analyze verify
# (systemd), the rule file as YAML, and prometheus.bats parses the metrics
# with prometheus_client.
UNITDIR ?= /lib/systemd/system
TEST_DEPS += python3-prometheus-client python3-yaml systemd
install-units:
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' dist/systemd/gpuprov-verify.service.in \
		> $(DESTDIR)$(UNITDIR)/gpuprov-verify.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/gpuprov-verify.service
	install -m 0644 dist/systemd/gpuprov-verify.timer $(DESTDIR)$(UNITDIR)/gpuprov-verify.timer
	sed 's|@BINDIR@|$(BINDIR)|g' dist/systemd/gpuprov-resume.service.in \
		> $(DESTDIR)$(UNITDIR)/gpuprov-resume.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/gpuprov-resume.service

uninstall-units:
	rm -f $(DESTDIR)$(UNITDIR)/gpuprov-verify.service $(DESTDIR)$(UNITDIR)/gpuprov-verify.timer \
		$(DESTDIR)$(UNITDIR)/gpuprov-resume.service

uninstall: uninstall-units
	rm -f $(DESTDIR)$(BINDIR)/gpuprov $(DESTDIR)$(MANDIR)/man8/gpuprov.8 \
		$(DESTDIR)$(MANDIR)/man5/gpuprov-profile.5 $(DESTDIR)$(COMPLETIONSDIR)/gpuprov
	rm -rf $(DESTDIR)$(DATADIR)

clean:
	rm -rf build build-asan build-fuzz build-tsan gpuprov
