#!/usr/bin/env bats
# The linker cache parser (src/pure/ldcache.c, through build/ldcache-dump,
# tests/fixtures/ldcache_dump.c) against the real glibc ldconfig: the caches
# it writes in each of its formats for a throwaway root holding copies of a
# few of the host's libraries must give exactly the pairs `ldconfig -p`
# prints of them; and the cache of the fixture's ldconfig stub (mkroot.sh
# --ldconfig-cache) must read the same in the real `ldconfig -p` as in
# gpuprov. The host's own cache is only read, to find those libraries;
# every cache is written under $BATS_TEST_TMPDIR (ldconfig -r chroots into
# the throwaway root).

load helpers

: "${LDCACHE_DUMP:=$REPO_ROOT/build/ldcache-dump}"
LDCONFIG=/sbin/ldconfig

setup() {
	require_root
	[ -x "$LDCACHE_DUMP" ] ||
		fail "no ldcache-dump at $LDCACHE_DUMP (make build/ldcache-dump, or set LDCACHE_DUMP)"
	if ! "$LDCONFIG" --version 2> /dev/null | grep -qiE 'glibc|gnu libc'; then
		[ -z "${GPUPROV_REQUIRE_REAL:-}" ] || [ "$GPUPROV_REQUIRE_REAL" = 0 ] ||
			fail "no glibc ldconfig at $LDCONFIG and GPUPROV_REQUIRE_REAL is set"
		skip "no glibc ldconfig at $LDCONFIG"
	fi
	T=$BATS_TEST_TMPDIR/real
}

# host_lib NAME: where the host's linker cache has NAME (its first entry).
host_lib() {
	"$LDCONFIG" -p | awk -v n="$1" '$1 == n { sub(/.* => /, ""); print; exit }'
}

# listed_pairs: `ldconfig -p` output on stdin as "NAME<tab>PATH" lines, by
# awk alone (the oracle: nothing of gpuprov's).
listed_pairs() {
	awk '/^[ \t]/ && / => / {
		name = $1
		path = $0
		sub(/^[^=]* => /, "", path)
		print name "\t" path
	}'
}

# real_root: $T with /etc/ld.so.conf listing two directories that hold
# copies of the host's libc, libm and libz (on x86_64 libz also in a
# glibc-hwcaps subdirectory, which ldconfig records with a hwcap in its
# extension data), and the cache that ldconfig -r wrote for it.
real_root() {
	mkdir -p "$T/etc" "$T/opt/first" "$T/opt/second"
	local name path
	for name in libc.so.6 libm.so.6 libz.so.1; do
		path=$(host_lib "$name")
		[ -n "$path" ] && [ -f "$path" ] || fail "the host's linker cache has no $name"
		cp -L "$path" "$T/opt/first/$name"
	done
	mv "$T/opt/first/libm.so.6" "$T/opt/second/"
	if [ "$(uname -m)" = x86_64 ]; then
		mkdir -p "$T/opt/first/glibc-hwcaps/x86-64-v2"
		cp "$T/opt/first/libz.so.1" "$T/opt/first/glibc-hwcaps/x86-64-v2/"
	fi
	printf '/opt/first\n/opt/second\n' > "$T/etc/ld.so.conf"
}

# assert_reads_as_listed CACHE: gpuprov's pairs of CACHE are the ones the
# real `ldconfig -p -C CACHE` prints, in its order, and so are the pairs
# gpuprov's listing parser takes from that output.
assert_reads_as_listed() {
	"$LDCONFIG" -p -C "$1" > "$BATS_TEST_TMPDIR/listing" ||
		fail "ldconfig -p -C $1 failed"
	listed_pairs < "$BATS_TEST_TMPDIR/listing" > "$BATS_TEST_TMPDIR/want"
	[ -s "$BATS_TEST_TMPDIR/want" ] || fail "ldconfig -p listed nothing:" "$(cat "$BATS_TEST_TMPDIR/listing")"
	"$LDCACHE_DUMP" "$1" > "$BATS_TEST_TMPDIR/have" || fail "gpuprov refused $1"
	diff -u "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/have" ||
		fail "gpuprov's pairs differ from ldconfig -p's (diff above: - ldconfig, + gpuprov)"
	"$LDCACHE_DUMP" --listing "$BATS_TEST_TMPDIR/listing" > "$BATS_TEST_TMPDIR/from-listing"
	diff -u "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/from-listing" ||
		fail "the listing parser's pairs differ (diff above: - awk, + gpuprov)"
}

@test "ldcache: a new-format cache the real ldconfig wrote reads as its ldconfig -p lists it" {
	real_root
	"$LDCONFIG" -r "$T" -c new || fail "ldconfig -r $T -c new failed"
	assert_reads_as_listed "$T/etc/ld.so.cache"
	grep -qxF "$(printf 'libm.so.6\t/opt/second/libm.so.6')" "$BATS_TEST_TMPDIR/have" ||
		fail "libm.so.6 is not where it was put:" "$(cat "$BATS_TEST_TMPDIR/have")"
	if [ "$(uname -m)" = x86_64 ]; then
		grep -q 'hwcap: "x86-64-v2"' "$BATS_TEST_TMPDIR/listing" ||
			fail "no hwcap entry to read:" "$(cat "$BATS_TEST_TMPDIR/listing")"
	fi
}

@test "ldcache: a compat cache (old format, then the new) reads as its ldconfig -p lists it" {
	real_root
	"$LDCONFIG" -r "$T" -c compat || fail "ldconfig -r $T -c compat failed"
	[ "$(head -c 11 "$T/etc/ld.so.cache")" = ld.so-1.7.0 ] || fail "not the compat layout"
	assert_reads_as_listed "$T/etc/ld.so.cache"
}

@test "ldcache: an old-format cache, which ldconfig -p still reads, is refused as such" {
	real_root
	"$LDCONFIG" -r "$T" -c old || fail "ldconfig -r $T -c old failed"
	"$LDCONFIG" -p -C "$T/etc/ld.so.cache" | grep -q "libz.so.1 " || fail "ldconfig -p cannot read it"
	run --separate-stderr "$LDCACHE_DUMP" "$T/etc/ld.so.cache"
	[ "$status" = 1 ] || { show_run; fail "expected a refusal"; }
	assert_stderr_has "$T/etc/ld.so.cache: old format"
}

@test "ldcache: the fixture's stub cache reads the same in the real ldconfig -p, the stub's -p and gpuprov" {
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --ldconfig-cache
	mkdir -p "$R/opt/first" "$R/opt/second"
	cp "$(host_lib libz.so.1)" "$R/opt/first/libz.so.1"
	: > "$R/opt/first/libfake.so.2"
	: > "$R/opt/second/libother.so"
	printf '# two directories\n/opt/first\n/opt/second\n' > "$R/etc/ld.so.conf.d/test.conf"
	chroot "$R" /sbin/ldconfig || fail "the stub ldconfig failed"
	assert_reads_as_listed "$R/etc/ld.so.cache"
	printf 'libfake.so.2\t/opt/first/libfake.so.2\nlibz.so.1\t/opt/first/libz.so.1\nlibother.so\t/opt/second/libother.so\n' |
		diff -u - "$BATS_TEST_TMPDIR/have" || fail "the stub's cache lacks what its directories hold"
	grep -q '(libc6,x86-64) => /opt/first/libz.so.1$' "$BATS_TEST_TMPDIR/listing" ||
		fail "the real ldconfig -p does not read the stub's flags as libc6,x86-64:" \
			"$(cat "$BATS_TEST_TMPDIR/listing")"
	# The stub's own -p (gpuprov's fallback) lists the same.
	chroot "$R" /sbin/ldconfig -p | listed_pairs > "$BATS_TEST_TMPDIR/stub"
	diff -u "$BATS_TEST_TMPDIR/have" "$BATS_TEST_TMPDIR/stub" || fail "the stub's -p lists another cache"
}
