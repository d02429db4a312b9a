#!/usr/bin/env bats
# Bad input: each case asserts the exit code, the message on stderr and that
# the target tree is unchanged.

load helpers

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --cuda
	BAD=$(cd "$BATS_TEST_DIRNAME/../fixtures/bad-profiles" && pwd)
	snapshot "$R" before
}

# The tree is as mkroot left it, and gpuprov left no trace.
assert_tree_unchanged() {
	assert_unchanged "$R" before
	assert_untouched_by_gpuprov "$R"
}

# --- command line ----------------------------------------------------------

@test "bad input: unknown command -> exit 2 with usage" {
	gp --root "$R" frobnicate
	assert_status 2
	assert_stderr_has "unknown command 'frobnicate'"
	assert_usage_on_stderr
	assert_stdout_empty
	assert_tree_unchanged
}

@test "bad input: no command -> exit 2 with usage" {
	gp --root "$R"
	assert_status 2
	assert_usage_on_stderr
	assert_tree_unchanged
}

@test "bad input: unknown option -> exit 2 with usage" {
	gp --root "$R" install --profile "$PROFILE" --frobnicate
	assert_status 2
	assert_stderr_has "unknown option '--frobnicate'"
	assert_usage_on_stderr
	assert_stdout_empty
	gp --root "$R" --bogus status
	assert_status 2
	assert_stderr_has "unknown option '--bogus'"
	assert_usage_on_stderr
	assert_tree_unchanged
}

@test "bad input: option that does not apply to the command -> exit 2" {
	gp --root "$R" status --dry-run
	assert_status 2
	assert_stderr_has "--dry-run"
	assert_usage_on_stderr
	gp --root "$R" plan --profile "$PROFILE" --dry-run
	assert_status 2
	gp --root "$R" status extra-argument
	assert_status 2
	assert_stderr_has "extra-argument"
	assert_tree_unchanged
}

@test "bad input: --only / --skip with an unknown stage -> exit 2 listing the stages" {
	gp --root "$R" install --profile "$PROFILE" --only nouveau,gpu
	assert_status 2
	assert_stderr_has "'gpu'"
	assert_stderr_has "$(stage_names ', ')"
	gp --root "$R" plan --profile "$PROFILE" --skip cudaa
	assert_status 2
	assert_stderr_has "'cudaa'"
	assert_stderr_has "$(stage_names ', ')"
	gp --root "$R" verify --profile "$PROFILE" --only nvidia
	assert_status 2
	assert_stderr_has "'nvidia'"
	assert_tree_unchanged
}

@test "bad input: install and plan without --profile -> exit 2" {
	gp --root "$R" install --only "$ONLY"
	assert_status 2
	assert_stderr_has "--profile"
	assert_stderr_has "usage: gpuprov install"
	gp --root "$R" plan
	assert_status 2
	assert_stderr_has "--profile"
	assert_tree_unchanged
}

@test "bad input: an option missing its argument -> exit 2" {
	gp --root "$R" install --profile
	assert_status 2
	assert_stderr_has "--profile"
	assert_stderr_has "needs an argument"
	assert_tree_unchanged
}

@test "bad input: --root missing -> exit 2 naming it" {
	gp --root "$BATS_TEST_TMPDIR/no-such-root" install --profile "$PROFILE" --only "$ONLY"
	assert_status 2
	assert_stderr_has "$BATS_TEST_TMPDIR/no-such-root"
	assert_stderr_has "No such file or directory"
	[ ! -e "$BATS_TEST_TMPDIR/no-such-root" ] || fail "the missing root was created"
	gp --root "$BATS_TEST_TMPDIR/no-such-root" status
	assert_status 2
	# --root without a directory at all.
	gp install --profile "$PROFILE" --root
	assert_status 2
	assert_stderr_has "--root"
	# A file is not a root.
	: > "$BATS_TEST_TMPDIR/a-file"
	gp --root "$BATS_TEST_TMPDIR/a-file" status
	assert_status 2
	assert_stderr_has "$BATS_TEST_TMPDIR/a-file"
	[ ! -s "$BATS_TEST_TMPDIR/a-file" ]
	assert_tree_unchanged
}

@test "bad input: root not writable (unprivileged user) -> exit 4 \"not writable\"" {
	# The fixture root is owned by root; nobody can read it but not write it.
	# Open the way to it through the bats temporary directories only.
	d=$BATS_TEST_TMPDIR
	while [ -n "$d" ] && [ "$d" != / ]; do
		case $d in
		"$BATS_RUN_TMPDIR" | "$BATS_RUN_TMPDIR"/*) chmod o+x "$d" ;;
		*) break ;;
		esac
		d=$(dirname "$d")
	done
	if command -v setpriv > /dev/null; then
		as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	elif command -v su > /dev/null; then
		as_nobody() {
			local q
			q=$(printf '%q ' "$@")
			su nobody -s /bin/sh -c "$q"
		}
	else
		skip "neither setpriv nor su is available to run as an unprivileged user"
	fi
	as_nobody test -x "$R" ||
		skip "the unprivileged user cannot reach $BATS_TEST_TMPDIR (a parent directory is closed)"
	! as_nobody test -w "$R" || fail "nobody can write the root; the test needs it read-only"
	# The build tree may sit in a private directory (a fresh clone under
	# mktemp): give nobody its own copy of the binary and the profiles.
	cp "$GPUPROV" "$BATS_TEST_TMPDIR/gpuprov"
	cp -R "$REPO_ROOT/profiles" "$BATS_TEST_TMPDIR/profiles"
	chmod -R o+rX "$BATS_TEST_TMPDIR/gpuprov" "$BATS_TEST_TMPDIR/profiles"
	nobody_gp() { as_nobody "$BATS_TEST_TMPDIR/gpuprov" --profile-dir "$BATS_TEST_TMPDIR/profiles" "$@"; }
	as_nobody test -x "$BATS_TEST_TMPDIR/gpuprov" || fail "nobody cannot run its copy of gpuprov"
	snapshot "$R" before

	run --separate-stderr nobody_gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 4
	assert_stderr_has "not writable"
	assert_stderr_has "$R"
	assert_tree_unchanged
	# The dry run still works for the unprivileged user.
	run --separate-stderr nobody_gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	assert_documented_status
	[ "$status" -eq 5 ] || [ "$status" -eq 0 ] || fail "plan as nobody exited $status: $stderr"
	assert_tree_unchanged
}

# --- profiles ----------------------------------------------------------------

@test "bad input: profile not found -> exit 65 naming every directory searched" {
	mkdir "$BATS_TEST_TMPDIR/my-profiles"
	gp --root "$R" --profile-dir "$BATS_TEST_TMPDIR/my-profiles" install --profile no-such-profile
	assert_status 65
	assert_stderr_has "no-such-profile"
	assert_stderr_has "$BATS_TEST_TMPDIR/my-profiles"
	assert_stderr_has "/etc/gpuprov/profiles"
	assert_stderr_matches "/share/gpuprov/profiles"
	assert_stderr_has "$REPO_ROOT/profiles"
	# In the search order.
	assert_stderr_matches "$BATS_TEST_TMPDIR/my-profiles.*/etc/gpuprov/profiles.*share/gpuprov/profiles.*$REPO_ROOT/profiles"
	gp --root "$R" plan --profile no-such-profile
	assert_status 65
	assert_stderr_has "/etc/gpuprov/profiles"
	# A path that does not exist.
	gp --root "$R" plan --profile "$BATS_TEST_TMPDIR/nothing-here.json"
	assert_status 65
	assert_stderr_has "$BATS_TEST_TMPDIR/nothing-here.json"
	assert_tree_unchanged
}

# bad_profile FILE REGEX [GLOBAL-OPTIONS...]: install and plan with that
# profile exit 65 with one line on stderr matching REGEX (FILE:LINE:COL: ...).
bad_profile() {
	local file=$1 re=$2 cmd
	shift 2
	for cmd in "install --only $ONLY" plan; do
		# shellcheck disable=SC2086
		gp --root "$R" "$@" $cmd --profile "$file"
		assert_status 65
		assert_one_stderr_line
		assert_stderr_matches "$re"
	done
	assert_tree_unchanged
}

@test "bad profile: syntax error -> exit 65 with FILE:LINE:COL" {
	bad_profile "$BAD/syntax.json" "$BAD/syntax.json:5:[0-9]+: .*syntax error"
}

@test "bad profile: unknown key -> exit 65 with FILE:LINE:COL and did you mean" {
	bad_profile "$BAD/unknown-key.json" \
		"$BAD/unknown-key.json:4:[0-9]+: unknown key \"cuda_hoem\"; did you mean \"cuda_home\"\\?"
}

@test "bad profile: wrong type -> exit 65 with FILE:LINE:COL" {
	bad_profile "$BAD/wrong-type.json" "$BAD/wrong-type.json:6:15: \"path\" must be an array of strings"
}

@test "bad profile: duplicate key -> exit 65 with FILE:LINE:COL" {
	bad_profile "$BAD/duplicate.json" "$BAD/duplicate.json:5:5: duplicate key \"nouveau\""
}

@test "bad profile: extends cycle -> exit 65 naming the cycle" {
	d=$BATS_TEST_TMPDIR/cycle
	mkdir "$d"
	printf '{\n  "name": "cycle-a",\n  "extends": "cycle-b",\n  "stages": { "nouveau": {} }\n}\n' \
		> "$d/cycle-a.json"
	printf '{\n  "name": "cycle-b",\n  "extends": "cycle-a"\n}\n' > "$d/cycle-b.json"
	bad_profile cycle-a "cycle.*cycle-a\\.json.*cycle-b\\.json.*cycle-a\\.json" --profile-dir "$d"
	# A profile that extends itself.
	printf '{\n  "name": "selfish",\n  "extends": "selfish"\n}\n' > "$d/selfish.json"
	bad_profile selfish "cycle.*selfish\\.json" --profile-dir "$d"
}

@test "bad profile: extends a profile that does not exist -> exit 65 with FILE:LINE:COL" {
	printf '{\n  "name": "orphan",\n  "extends": "distro/no-such-base"\n}\n' \
		> "$BATS_TEST_TMPDIR/orphan.json"
	gp --root "$R" plan --profile "$BATS_TEST_TMPDIR/orphan.json"
	assert_status 65
	assert_stderr_matches "$BATS_TEST_TMPDIR/orphan.json:3:[0-9]+: .*distro/no-such-base.*not found"
	assert_tree_unchanged
}

# --- the target ----------------------------------------------------------------

@test "bad input: profile for another distro -> exit 4 naming both, nothing changed" {
	rm -rf "$R"
	mkroot "$R" --cuda --distro rocky9
	snapshot "$R" before
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 4
	assert_one_stderr_line
	assert_stderr_has "ubuntu"
	assert_stderr_has "rocky"
	assert_tree_unchanged
}

@test "bad input: no GPU the profile is for -> exit 4, nothing changed" {
	rm -rf "$R"
	mkroot "$R" --cuda --no-gpu
	snapshot "$R" before
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 4
	assert_one_stderr_line
	assert_stderr_has "GPU"
	assert_tree_unchanged
}


@test "bad input: initramfs tool missing in the root -> fails naming it; rerun completes" {
	rm -rf "$R"
	mkroot "$R" --cuda --nouveau unloaded
	cp -p "$R/usr/sbin/update-initramfs" "$BATS_TEST_TMPDIR/update-initramfs"
	rm "$R/usr/sbin/update-initramfs"
	snapshot "$R" no-tool
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	# Either found out before any change (4, blocked by a precondition) or
	# when the command could not run (1, apply failed).
	case $status in
	4)
		# "Nothing was changed": at most the lock was taken.
		assert_unchanged "$R" no-tool var/lib/gpuprov var/lib/gpuprov/lock
		;;
	1) ;;
	*) assert_status 1 ;;
	esac
	assert_stderr_has "update-initramfs"
	assert_one_stderr_line
	[ ! -e "$R/var/log/stub-commands.log" ] || fail "a command ran: $(stub_log "$R")"
	# The journal does not claim the initramfs was rebuilt, nor the stage done.
	j=$R/var/lib/gpuprov/state.json
	if [ -e "$j" ]; then
		[ "$(json_get "$j" 'd.get("stages", {}).get("nouveau", {}).get("initramfs_rebuilt_for")')" = null ] ||
			fail "the journal claims the initramfs was rebuilt: $(cat "$j")"
		state=$(json_get "$j" 'd.get("stages", {}).get("nouveau", {}).get("state")')
		case $state in
		done | satisfied | reboot*) fail "the journal says nouveau is $state: $(cat "$j")" ;;
		esac
	fi
	# status shows it as not done either.
	gp --root "$R" status
	assert_status 0
	! printf '%s\n' "$output" | grep -Eq '^  nouveau +(done|satisfied)' || fail "status: $output"
	# verify finds the work not done.
	gp --root "$R" verify --profile "$PROFILE" --only nouveau
	assert_status 3
	assert_stdout_has "fail  initramfs"

	# Restore the tool: the rerun completes and rebuilds the initramfs.
	cp -p "$BATS_TEST_TMPDIR/update-initramfs" "$R/usr/sbin/update-initramfs"
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$R/var/log/stub-commands.log"
	assert_same_file "$EXPECTED/ubuntu2204/initrd.img" "$R/boot/initrd.img-5.15.0-91-generic"
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.sh" "$R/etc/profile.d/gpuprov-cuda.sh"
	gp --root "$R" verify --only "$ONLY"
	assert_status 0
}

@test "bad input: initramfs tool failing -> exit 1 with its output; not recorded as rebuilt" {
	rm -rf "$R"
	mkroot "$R" --cuda --nouveau unloaded
	cat > "$R/usr/sbin/update-initramfs" <<-'EOF'
	#!/bin/sh
	echo "$0 $*" >> /var/log/stub-commands.log
	echo "update-initramfs: no space left on /boot" >&2
	exit 3
	EOF
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 1
	assert_stderr_has "update-initramfs -u"
	assert_stderr_has "no space left on /boot"
	j=$R/var/lib/gpuprov/state.json
	[ "$(json_get "$j" 'd.get("stages", {}).get("nouveau", {}).get("initramfs_rebuilt_for")')" = null ] ||
		fail "the journal claims the initramfs was rebuilt: $(cat "$j")"
}

# corrupt_journal PRINTF-FORMAT: writes that as the journal, then every
# command that reads the journal must stop with 65 and change nothing.
corrupt_journal() {
	mkdir -p "$R/var/lib/gpuprov"
	# shellcheck disable=SC2059 # the argument is the format
	printf "$1" > "$R/var/lib/gpuprov/state.json"
	snapshot "$R" corrupt
	for cmd in "install --profile $PROFILE --only $ONLY" status "verify --only $ONLY" \
		"plan --profile $PROFILE --only $ONLY"; do
		# shellcheck disable=SC2086
		gp --root "$R" $cmd
		assert_status 65
		assert_one_stderr_line
		assert_stderr_has "$R/var/lib/gpuprov/state.json"
		assert_stderr_has "move it aside"
		assert_unchanged "$R" corrupt
	done
	[ ! -e "$R/var/log/stub-commands.log" ] || fail "a command ran: $(stub_log "$R")"
	[ ! -e "$R/var/log/gpuprov.log" ] || fail "the run log was created"
	[ ! -e "$R/var/lib/gpuprov/lock" ] || fail "the lock file was created"
}

@test "bad input: journal is garbage -> exit 65 naming the file, no crash, no change" {
	corrupt_journal 'this is {not json'
}

@test "bad input: journal is binary junk -> exit 65 naming the file, no crash" {
	corrupt_journal '\001\002\377\376garbage\000\n'
	[ "$(wc -c < "$R/var/lib/gpuprov/state.json")" -eq 13 ]
}

@test "bad input: journal is JSON but not a gpuprov journal -> exit 65" {
	corrupt_journal '[1, 2, 3]'
}

@test "bad input: journal cut short -> exit 65" {
	corrupt_journal '{"gpuprov_state": 1, "profile": {"name": "a100-ubuntu22'
}

# --- help and version ----------------------------------------------------------

@test "help: --help for the tool and each command exits 0 on stdout" {
	gp --help
	assert_status 0
	assert_stdout_has "usage: gpuprov"
	for c in install plan verify status profiles; do
		assert_stdout_has "$c"
	done
	assert_stderr_empty
	gp -h
	assert_status 0
	assert_stdout_has "usage: gpuprov"
	for c in install plan verify status profiles; do
		gp "$c" --help
		assert_status 0
		assert_stdout_has "usage: gpuprov $c"
		assert_stderr_empty
		gp --help "$c"
		assert_status 0
		assert_stdout_has "usage: gpuprov $c"
	done
	# --help wins over missing arguments and does not touch the root.
	gp --root "$R" install --help
	assert_status 0
	assert_tree_unchanged
}

@test "help: --version prints the version and exits 0" {
	gp --version
	assert_status 0
	[[ $output =~ ^gpuprov\ [0-9]+\.[0-9]+\.[0-9]+ ]] || fail "--version printed: $output"
	[ "${#lines[@]}" -eq 1 ]
	assert_stderr_empty
}

@test "bad input: env.conda_init without a conda prefix blocks instead of silently doing nothing" {
	mkdir "$BATS_TEST_TMPDIR/p"
	printf '{"name": "ci", "extends": "a100-ubuntu2204", "stages": {"pytorch": {"method": "venv"}, "env": {"conda_init": true}}}\n' \
		> "$BATS_TEST_TMPDIR/p/ci.json"
	gp --root "$R" --profile-dir "$BATS_TEST_TMPDIR/p" install --profile ci --only env
	assert_status 4
	assert_stderr_has "stages.env.conda_init needs stages.pytorch with method conda"
	assert_stderr_has "nothing was changed"
	# false is fine.
	printf '{"name": "ci", "extends": "a100-ubuntu2204", "stages": {"env": {"conda_init": false}}}\n' \
		> "$BATS_TEST_TMPDIR/p/ci.json"
	gp --root "$R" --profile-dir "$BATS_TEST_TMPDIR/p" plan --profile ci --only env
	assert_status 0
}

# --- a journal gpuprov cannot read is never overwritten ------------------------

@test "bad input: journal members of the wrong type or form -> exit 65, the journal kept byte for byte" {
	local text
	for text in '{"gpuprov_state": 1, "files": []}' \
		'{"gpuprov_state": 1, "files": {"/etc/x.conf": "written"}}' \
		'{"gpuprov_state": 1, "files": {"/etc/x.conf": {"sha256": 12}}}' \
		'{"gpuprov_state": 1, "files": {"/etc/x.conf": {"sha256": "not hex"}}}' \
		'{"gpuprov_state": 1, "files": {"etc/x.conf": {}}}' \
		'{"gpuprov_state": 1, "stages": {"nouveau": "done"}}' \
		'{"gpuprov_state": 1, "stages": {"nouveau": {"state": 1}}}' \
		'{"gpuprov_state": 1, "profile": {"name": ["a100"]}}' \
		'{"gpuprov_state": 1, "profile": {"name": "a100", "overrides": "none"}}' \
		'{"gpuprov_state": 1, "reboot": ["nouveau"]}' \
		'{"gpuprov_state": "1"}'; do
		corrupt_journal "$text"
		assert_stderr_has "is corrupt"
	done
}

@test "bad input: the wrong-type member is named with its line and column" {
	corrupt_journal '{\n  "gpuprov_state": 1,\n  "files": {\n    "/etc/x.conf": {"sha256": 12}\n  }\n}\n'
	assert_stderr_has "state.json:4:31: \"/files/~1etc~1x.conf/sha256\" must be a string, not a number"
}

@test "bad input: journal of a newer format -> exit 65, never replaced" {
	corrupt_journal '{"gpuprov_state": 99, "files": {"/etc/x.conf": "a later shape"}}\n'
	assert_stderr_has "format 99, newer than this gpuprov reads (1)"
}

@test "bad input: a real journal with one member changed to the wrong type -> exit 65, kept" {
	gp --root "$R" install --profile "$PROFILE" --only env
	assert_status 0
	j=$R/var/lib/gpuprov/state.json
	"$PYTHON" - "$j" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
d["stages"]["env"]["state"] = ["done"]
with open(sys.argv[1], "w") as f:
    json.dump(d, f)
PY
	sum=$(sha256sum < "$j")
	gp --root "$R" install --profile "$PROFILE" --only env
	assert_status 65
	assert_stderr_has "\"/stages/env/state\" must be a string, not an array"
	assert_stderr_has "move it aside"
	gp --root "$R" status
	assert_status 65
	assert_stderr_has "move it aside"
	[ "$(sha256sum < "$j")" = "$sum" ] || fail "the journal was changed: $(cat "$j")"
}
