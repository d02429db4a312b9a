#!/usr/bin/env bats
# libcurl, libarchive and libsqlite3 are opened on first use
# (src/sys/lazylib.c), not at start-up: a run that downloads and extracts
# nothing maps none of them nor what they pull in (TLS, Kerberos, ICU...),
# which was most of a no-op run's time and memory (tests/bench/noop.sh).

load helpers

VER=8.9.7.29

setup() {
	setup_cudnn_root
}

teardown() {
	stop_https_server
}

# The libraries the dynamic loader opened for the last `gp` (LD_DEBUG on
# its stderr).
loaded() {
	printf '%s\n' "${stderr-}" | sed -n 's/.*file=\([^ ]*\) \[0\];  *\(needed\|dynamically loaded\) by.*/\1/p' | sort -u
}

@test "lazylib: gpuprov does not link libcurl, libarchive or libsqlite3" {
	run ldd "$GPUPROV"
	assert_status 0
	if printf '%s\n' "$output" | grep -E 'libcurl|libarchive|libsqlite3'; then
		fail "linked at start-up: $output"
	fi
}

@test "lazylib: an install that downloads and extracts opens libcurl and libarchive; a no-op install, plan and verify then open neither" {
	LD_DEBUG=files gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	loaded | grep -qx 'libcurl.so.4' || fail "libcurl not loaded: $(loaded | tr '\n' ' ')"
	loaded | grep -qx 'libarchive.so.13' || fail "libarchive not loaded: $(loaded | tr '\n' ' ')"
	[ -f "$R/usr/local/cuda-11.8/cudnn-$VER/include/cudnn_version.h" ] || fail "not extracted"
	for cmd in install plan verify; do
		ca=(--ca-file "$CA")
		[ "$cmd" != verify ] || ca=()
		LD_DEBUG=files gp --root "$R" "${ca[@]}" "$cmd" --profile "$P" --only cudnn
		assert_status 0
		[ "$cmd" = verify ] || assert_stdout_has "cudnn: satisfied"
		if loaded | grep -E 'libcurl|libarchive|libsqlite3'; then
			fail "a no-op $cmd loaded them: $(loaded | tr '\n' ' ')"
		fi
	done
}
