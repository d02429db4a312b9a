#!/bin/sh
# Runs every test and prints one closing line "N passed, N failed, N skipped".
# Unit tests are cmocka binaries run in TAP mode; end-to-end tests are bats
# files. Environment: GPUPROV (the binary under test), UNIT_BINS (the unit
# test binaries), GPUPROV_TEST_CACHE (defaults to ~/.cache/gpuprov-tests).
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${GPUPROV:?set GPUPROV to the gpuprov binary}"
: "${GPUPROV_TEST_CACHE:=${HOME:-/tmp}/.cache/gpuprov-tests}"
export GPUPROV GPUPROV_TEST_CACHE
mkdir -p "$GPUPROV_TEST_CACHE"

out=$(mktemp)
failures=$(mktemp)
trap 'rm -f "$out" "$failures"' EXIT
passed=0 failed=0 skipped=0

# Counts TAP lines from a file: "ok", "not ok", and "# skip" directives.
count_tap() {
	p=$(grep -cE '^ok ' "$1" | tail -n1)
	s=$(grep -ciE '^(not )?ok .*# skip' "$1" | tail -n1)
	f=$(grep -cE '^not ok ' "$1" | tail -n1)
	fs=$(grep -ciE '^not ok .*# skip' "$1" | tail -n1)
	passed=$((passed + p - (s - fs)))
	failed=$((failed + f - fs))
	skipped=$((skipped + s))
}

# Runs one TAP-producing command, prefixes its lines with [label], counts
# them. A crash before any TAP line still counts as a failure.
run_tap() {
	label=$1
	shift
	"$@" > "$out" 2>&1
	rc=$?
	sed "s/^/[$label] /" "$out"
	count_tap "$out"
	# Each failure with the diagnostics that follow it, kept for the end.
	awk -v label="$label" '
		/^not ok / && !/# [Ss][Kk][Ii][Pp]/ { keep = 1; n = 0; print "[" label "] " $0; next }
		/^(ok|not ok) / { keep = 0 }
		keep && /^#/ && n < 60 { n++; print "[" label "] " $0 }
	' "$out" >> "$failures"
	if [ "$rc" -ne 0 ] && ! grep -q '^not ok ' "$out"; then
		echo "[$label] exited with status $rc"
		echo "[$label] exited with status $rc" >> "$failures"
		tail -n 20 "$out" | sed "s/^/[$label] /" >> "$failures"
		failed=$((failed + 1))
	fi
}

export CMOCKA_MESSAGE_OUTPUT=TAP
for bin in ${UNIT_BINS:-}; do
	run_tap "$(basename "$bin")" "$bin"
done
if ls "$here"/e2e/*.bats > /dev/null 2>&1; then
	run_tap e2e bats --tap "$here"/e2e
fi

# The failures again at the end, where a truncated log still shows them.
if [ -s "$failures" ]; then
	echo "=== failed tests"
	cat "$failures"
	echo "=== end of failed tests"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
