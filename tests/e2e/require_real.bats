#!/usr/bin/env bats
# GPUPROV_REQUIRE_REAL (.ci/run sets it): a test that needs a real Debian
# root (debootstrap, real apt and dpkg, real pip) may not skip; where the
# root cannot be built it fails, saying why. Made unavailable here with an
# empty test cache and a mirror nothing listens on.

load helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	require_root
	export GPUPROV_TEST_CACHE=$BATS_TEST_TMPDIR/cache
	export GPUPROV_DEBIAN_MIRROR=http://127.0.0.1:9/debian
}

@test "require real: without GPUPROV_REQUIRE_REAL an unavailable Debian root is a skip (77)" {
	run -77 env -u GPUPROV_REQUIRE_REAL sh "$REPO_ROOT/tests/fixtures/debroot.sh" "$BATS_TEST_TMPDIR/root"
	[[ "$output" == *"debroot: SKIP: "* ]]
}

@test "require real: with GPUPROV_REQUIRE_REAL=1 it is a failure that says why" {
	GPUPROV_REQUIRE_REAL=1 run -1 sh "$REPO_ROOT/tests/fixtures/debroot.sh" "$BATS_TEST_TMPDIR/root"
	[[ "$output" == *"debroot: FAIL: "*"GPUPROV_REQUIRE_REAL is set"* ]]
	GPUPROV_REQUIRE_REAL=0 run -77 sh "$REPO_ROOT/tests/fixtures/debroot.sh" "$BATS_TEST_TMPDIR/root"
}

@test "require real: a missing tool of aptrepo.sh fails under GPUPROV_REQUIRE_REAL" {
	# A compiler that is not there is the forced absence.
	CC=no-such-cc run -77 env -u GPUPROV_REQUIRE_REAL sh "$REPO_ROOT/tests/fixtures/aptrepo.sh" "$BATS_TEST_TMPDIR/ar"
	CC=no-such-cc GPUPROV_REQUIRE_REAL=1 run -1 sh "$REPO_ROOT/tests/fixtures/aptrepo.sh" "$BATS_TEST_TMPDIR/ar"
	[[ "$output" == *"aptrepo.sh: FAIL: no-such-cc is not installed"* ]]
}

@test "require real: a test using the debroot helper fails instead of skipping" {
	# A test file of its own, in a copy of the tree's layout, run by bats.
	local t=$BATS_TEST_TMPDIR/tree
	mkdir -p "$t/tests/e2e"
	ln -s "$REPO_ROOT/tests/fixtures" "$t/tests/fixtures"
	ln -s "$REPO_ROOT/tests/e2e/helpers.bash" "$t/tests/e2e/helpers.bash"
	printf '%s\n' 'load helpers' '@test "needs a Debian root" {' \
		'	debroot "$BATS_TEST_TMPDIR/root"' '}' > "$t/tests/e2e/inner.bats"
	run env -u GPUPROV_REQUIRE_REAL bats --tap "$t/tests/e2e/inner.bats"
	[ "$status" -eq 0 ]
	[[ "$output" == *"ok 1 needs a Debian root # skip"* ]]
	GPUPROV_REQUIRE_REAL=1 run bats --tap "$t/tests/e2e/inner.bats"
	[ "$status" -ne 0 ]
	[[ "$output" == *"not ok 1 needs a Debian root"* ]]
	[[ "$output" == *"GPUPROV_REQUIRE_REAL is set"* ]]
}
