# Shared helpers for the end-to-end tests: `load helpers` from a .bats file.
#
# The binary under test is $GPUPROV (tests/run.sh sets it; default: the
# repository's ./gpuprov). Every root is built with tests/fixtures/mkroot.sh
# under $BATS_TEST_TMPDIR; nothing outside it is touched. Commands inside the
# roots run chrooted, so these tests need root.

bats_require_minimum_version 1.5.0

REPO_ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
: "${GPUPROV:=$REPO_ROOT/gpuprov}"
MKROOT=$REPO_ROOT/tests/fixtures/mkroot.sh
FIXTURE_PROFILES=$REPO_ROOT/tests/fixtures/profiles
EXPECTED=$BATS_TEST_DIRNAME/expected
PROFILE=a100-ubuntu2204
ONLY=nouveau,env
STAGES="nouveau driver cuda cudnn pytorch env"
GPU_DEV=sys/bus/pci/devices/0000:17:00.0
# The system python (a version-manager shim costs ~0.1 s a call).
if [ -z "${PYTHON:-}" ]; then
	PYTHON=python3
	[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
fi

# Prints its arguments (one per line) on stderr and fails.
fail() {
	printf '%s\n' "$@" >&2
	return 1
}

require_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (commands run chrooted into the fixture root)"
	[ -x "$GPUPROV" ] || fail "no gpuprov binary at $GPUPROV (run make, or set GPUPROV)"
}

# mkroot DIR [mkroot.sh options]: a fixture root.
mkroot() {
	sh "$MKROOT" "$@" || fail "mkroot.sh $* failed"
}

# gp ARGS...: runs gpuprov with bats' run; stdout in $output, stderr in
# $stderr, exit status in $status.
gp() {
	run --separate-stderr "$GPUPROV" "$@"
}

show_run() {
	printf '%s\n' "exit status: $status" "--- stdout:" "$output" "--- stderr:" "${stderr-}" >&2
}

assert_status() {
	[ "$status" -eq "$1" ] && return 0
	show_run
	fail "expected exit status $1, got $status"
}

# A status that is a documented exit code, not a crash or a signal.
assert_documented_status() {
	case $status in
	0 | 1 | 2 | 3 | 4 | 5 | 6 | 65) return 0 ;;
	esac
	show_run
	fail "exit status $status is not one of gpuprov's exit codes (a crash?)"
}

_has() {
	case $1 in
	*"$2"*) return 0 ;;
	esac
	return 1
}

assert_stdout_has() {
	_has "$output" "$1" && return 0
	show_run
	fail "stdout lacks: $1"
}

assert_stderr_has() {
	_has "${stderr-}" "$1" && return 0
	show_run
	fail "stderr lacks: $1"
}

refute_stdout_has() {
	_has "$output" "$1" || return 0
	show_run
	fail "stdout should not contain: $1"
}

refute_stderr_has() {
	_has "${stderr-}" "$1" || return 0
	show_run
	fail "stderr should not contain: $1"
}

assert_stderr_matches() {
	printf '%s\n' "${stderr-}" | grep -Eq -- "$1" && return 0
	show_run
	fail "stderr does not match the regex: $1"
}

assert_stdout_empty() {
	[ -z "$output" ] && return 0
	show_run
	fail "stdout should be empty"
}

assert_stderr_empty() {
	[ -z "${stderr-}" ] && return 0
	show_run
	fail "stderr should be empty"
}

# Exactly one line on stderr.
assert_one_stderr_line() {
	[ "${#stderr_lines[@]}" -eq 1 ] && return 0
	show_run
	fail "expected exactly one line on stderr, got ${#stderr_lines[@]}"
}

# The usage text: on stderr for errors.
assert_usage_on_stderr() {
	assert_stderr_has "usage: gpuprov"
}

# manifest ROOT [EXCLUDE...]: every entry's path, type, mode, owner, size and
# link target, then the sha256 of every regular file; mtimes are left out.
# EXCLUDE entries are paths relative to ROOT ("var/log/gpuprov.log").
manifest() {
	local root=$1
	shift
	local ex=" "
	for p in "$@"; do
		ex="$ex./$p "
	done
	(
		cd "$root" || exit 1
		find . -printf '%p %y %m %U:%G %s %l\n' | LC_ALL=C sort
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
	) | awk -v ex="$ex" '{
		p = (length($1) == 64 && $1 ~ /^[0-9a-f]+$/) ? $2 : $1
		if (index(ex, " " p " ")) next
		print
	}'
}

# snapshot ROOT NAME [EXCLUDE...]: saves ROOT's manifest as NAME.
snapshot() {
	local root=$1 name=$2
	shift 2
	manifest "$root" "$@" > "$BATS_TEST_TMPDIR/$name.manifest"
}

# assert_unchanged ROOT NAME [EXCLUDE...]: ROOT still matches snapshot NAME.
assert_unchanged() {
	local root=$1 name=$2
	shift 2
	manifest "$root" "$@" > "$BATS_TEST_TMPDIR/$name.now"
	diff -u "$BATS_TEST_TMPDIR/$name.manifest" "$BATS_TEST_TMPDIR/$name.now" >&2 && return 0
	fail "the tree under $root changed (diff above: - before, + after)"
}

# No trace of a real run: no stub command ran, no journal, no run log.
assert_untouched_by_gpuprov() {
	local root=$1
	[ ! -e "$root/var/log/stub-commands.log" ] ||
		fail "a stub command ran:" "$(cat "$root/var/log/stub-commands.log")"
	[ ! -e "$root/var/lib/gpuprov" ] || fail "$root/var/lib/gpuprov was created"
	[ ! -e "$root/var/log/gpuprov.log" ] || fail "$root/var/log/gpuprov.log was created"
}

# assert_same_file EXPECTED ACTUAL
assert_same_file() {
	[ -f "$2" ] || fail "missing: $2"
	cmp -s "$1" "$2" && return 0
	diff -u "$1" "$2" >&2
	fail "$2 differs from $1"
}

# The stub command log of ROOT (empty when none ran).
stub_log() {
	cat "$1/var/log/stub-commands.log" 2>/dev/null || true
}

# json_get FILE PYTHON-EXPR: prints the expression evaluated with the parsed
# document as `d` (strings as is, everything else as JSON).
json_get() {
	"$PYTHON" - "$1" "$2" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
v = eval(sys.argv[2], {"d": d})
print(v if isinstance(v, str) else json.dumps(v))
PY
}

# What a reboot does to the fixture: nouveau is gone (the blacklist worked)
# and the kernel has a new boot id.
simulate_reboot() {
	local root=$1
	sed -i '/^nouveau /d' "$root/proc/modules"
	rm -rf "$root/sys/module/nouveau" "$root/sys/bus/pci/drivers/nouveau"
	rm -f "$root/$GPU_DEV/driver"
	new_boot_id "$root"
}

# A reboot after which nouveau is loaded again: only the boot id changes.
new_boot_id() {
	echo 99999999-aaaa-4bbb-8ccc-dddddddddddd > "$1/proc/sys/kernel/random/boot_id"
}
