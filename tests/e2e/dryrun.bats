#!/usr/bin/env bats
# DRY-RUN INVARIANT: for every fixture, `install --dry-run`, `plan` and
# `verify` (text and --json) leave the tree byte-identical, run no command
# that changes it and create no journal or run log. Read-only commands run
# with the root mounted read-only. Plus the shape of the text and JSON plans.

load helpers

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
}

# A --json plan is one JSON document; only a run refused before planning
# (4, blocked: the profile does not fit) may print none, with its reason on
# stderr.
assert_json_plan() {
	assert_documented_status
	if [ -z "$output" ] && [ "$status" -eq 4 ] && [ -n "$stderr" ]; then
		return 0
	fi
	printf '%s\n' "$output" | "$PYTHON" -m json.tool > /dev/null ||
		fail "the --json plan is not JSON (exit $status):" "$output" "--- stderr:" "$stderr"
}

# dry_runs ROOT PROFILE-ARGS...: every read-only planning command, with and
# without --only; the tree must not change and nothing may run.
dry_runs() {
	local root=$1
	shift
	snapshot "$root" before
	local had_log=no
	[ -e "$root/var/log/stub-commands.log" ] && had_log=yes
	local sel
	for sel in "--only $ONLY" "--skip driver,cuda,cudnn,pytorch" ""; do
		# shellcheck disable=SC2086 # $sel is two words or none
		gp --root "$root" install --dry-run "$@" $sel
		assert_documented_status
		local dry_status=$status dry_out=$output
		case $status in
		1 | 2 | 65) fail "install --dry-run $* $sel failed" ;;
		esac
		# shellcheck disable=SC2086
		gp --root "$root" plan "$@" $sel
		assert_documented_status
		[ "$status" -eq "$dry_status" ] ||
			fail "plan exits $status but install --dry-run exits $dry_status ($sel)"
		[ "$output" = "${dry_out/gpuprov install:/gpuprov plan:}" ] || [ "$output" = "$dry_out" ] ||
			fail "plan and install --dry-run print different plans ($sel)" \
				"--- install --dry-run:" "$dry_out" "--- plan:" "$output"
		# shellcheck disable=SC2086
		gp --root "$root" --json plan "$@" $sel
		assert_json_plan
		# shellcheck disable=SC2086
		gp --root "$root" --json install --dry-run "$@" $sel
		assert_json_plan
		assert_unchanged "$root" before
	done
	if [ "$had_log" = no ]; then
		assert_untouched_by_gpuprov "$root"
	fi
	verify_runs "$root" "$@"
}

# verify_runs ROOT PROFILE-ARGS...: verify (text and --json), with and
# without --only, with the arguments of dry_runs but --force (a verify
# option it is not); the tree must not change (the stub command log
# included) and no journal or run log may appear.
verify_runs() {
	local root=$1
	shift
	local args=() a
	for a in "$@"; do
		[ "$a" = --force ] || args+=("$a")
	done
	snapshot "$root" before-verify
	local had_log=no
	[ -e "$root/var/log/stub-commands.log" ] && had_log=yes
	local sel
	for sel in "--only $ONLY" "--skip driver,cuda,cudnn,pytorch" ""; do
		# shellcheck disable=SC2086 # $sel is two words or none
		gp --root "$root" verify "${args[@]}" $sel
		assert_documented_status
		case $status in
		0 | 3 | 4) ;;
		*) show_run && fail "verify ${args[*]} $sel exits $status" ;;
		esac
		# shellcheck disable=SC2086
		gp --root "$root" --json verify "${args[@]}" $sel
		assert_documented_status
		printf '%s\n' "$output" | "$PYTHON" -m json.tool > /dev/null ||
			fail "the --json report is not JSON (exit $status):" "$output" "--- stderr:" "$stderr"
		assert_unchanged "$root" before-verify
	done
	if [ "$had_log" = no ]; then
		assert_untouched_by_gpuprov "$root"
	fi
}

@test "dry-run: ubuntu, nouveau loaded: tree unchanged, nothing run" {
	mkroot "$R" --cuda
	dry_runs "$R" --profile "$PROFILE"
}

@test "dry-run: ubuntu, nouveau unloaded: tree unchanged, nothing run" {
	mkroot "$R" --cuda --nouveau unloaded
	dry_runs "$R" --profile "$PROFILE"
}

@test "dry-run: ubuntu, no /proc/modules: tree unchanged, nothing run" {
	mkroot "$R" --cuda --no-proc-modules --nouveau unloaded
	dry_runs "$R" --profile "$PROFILE"
	# A missing /proc/modules is "unknown", never "not loaded".
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	refute_stdout_has "not loaded"
}

@test "dry-run: ubuntu, no GPU: tree unchanged, nothing run" {
	mkroot "$R" --cuda --no-gpu
	dry_runs "$R" --profile "$PROFILE"
	# Planned anyway (when the tool can be told to go ahead on a host that
	# does not match the profile).
	if "$GPUPROV" --help | grep -q -- '--force'; then
		dry_runs "$R" --profile "$PROFILE" --force
	fi
}

@test "dry-run: rocky9: tree unchanged, nothing run; the plan uses dracut --force" {
	mkroot "$R" --cuda --distro rocky9
	dry_runs "$R" --profile-dir "$FIXTURE_PROFILES" --profile a100-rocky9
	gp --root "$R" --profile-dir "$FIXTURE_PROFILES" plan --profile a100-rocky9
	assert_stdout_has "run dracut --force"
	refute_stdout_has "update-initramfs"
}

@test "dry-run: already-installed root (reboot pending): tree unchanged, nothing run" {
	mkroot "$R" --cuda
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	dry_runs "$R" --profile "$PROFILE"
}

@test "dry-run: already-installed root (done): tree unchanged, nothing run, all satisfied" {
	mkroot "$R" --cuda --nouveau unloaded
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	dry_runs "$R" --profile "$PROFILE"
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	assert_stdout_has "nouveau: satisfied"
	assert_stdout_has "env: satisfied"
	refute_stdout_has "run "
	refute_stdout_has "+++ "
}

@test "dry-run: root with a foreign file in place: tree unchanged; the plan diffs against it" {
	mkroot "$R" --cuda
	printf 'export PATH=/opt/other/bin:$PATH\n' > "$R/etc/profile.d/gpuprov-cuda.sh"
	dry_runs "$R" --profile "$PROFILE"
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	assert_stdout_has "replace /etc/profile.d/gpuprov-cuda.sh (backed up first"
	assert_stdout_has "--- /etc/profile.d/gpuprov-cuda.sh"
	assert_stdout_has '-export PATH=/opt/other/bin:$PATH'
	assert_stdout_has "+CUDA_HOME='/usr/local/cuda-11.8'"
	[ ! -e "$R/var/lib/gpuprov/backup" ] || fail "the dry run made a backup"
}

@test "plan (text): shows the unified diff, the commands and the reboot" {
	mkroot "$R" --cuda
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	assert_documented_status
	assert_stdout_has "create /etc/modprobe.d/blacklist-nouveau.conf"
	assert_stdout_has "--- /etc/modprobe.d/blacklist-nouveau.conf (absent)"
	assert_stdout_has "+++ /etc/modprobe.d/blacklist-nouveau.conf (planned)"
	assert_stdout_has "@@ -0,0 +1,6 @@"
	assert_stdout_has "+blacklist nouveau"
	assert_stdout_has "+options nouveau modeset=0"
	assert_stdout_has "+++ /etc/profile.d/gpuprov-cuda.sh (planned)"
	assert_stdout_has "+++ /etc/ld.so.conf.d/gpuprov-cuda.conf (planned)"
	assert_stdout_has "run update-initramfs -u"
	assert_stdout_has "run ldconfig"
	assert_stdout_has "reboot required"
	# The diff is against the real file: every line of the expected file
	# appears as an added line.
	while IFS= read -r line; do
		assert_stdout_has "+$line"
	done < "$EXPECTED/ubuntu2204/blacklist-nouveau.conf"
	# Stages in order.
	order=$(printf '%s\n' "$output" | sed -n 's/^\[[0-9]*\/[0-9]*\] \([a-z_]*\):.*/\1/p' | tr '\n' ' ')
	[ "$order" = "$(stage_names) " ] || fail "stage order: $order"
}

@test "plan --json: parses, stages in order with their states and effects" {
	mkroot "$R" --cuda
	gp --root "$R" --json plan --profile "$PROFILE" --only "$ONLY"
	assert_documented_status
	j=$BATS_TEST_TMPDIR/plan.json
	printf '%s\n' "$output" > "$j"
	"$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$j" || fail "not JSON: $output"
	[ "$(json_get "$j" '[s["name"] for s in d["stages"]]')" = "$(stage_names_json)" ]
	[ "$(json_get "$j" '[s["state"].replace("_", " ") for s in d["stages"]]')" = \
		'["needed", "skipped", "skipped", "skipped", "skipped", "skipped", "skipped", "needed", "skipped"]' ]
	[ "$(json_get "$j" 'd["dry_run"]')" = true ]
	[ "$(json_get "$j" 'd["reboot_required"]')" = true ]
	[ "$(json_get "$j" 'd["profile"]["name"]')" = "$PROFILE" ]
	[ "$(json_get "$j" '[e["type"] for e in d["stages"][0]["effects"]]')" = \
		'["write", "run", "write", "write", "reboot"]' ]
	[ "$(json_get "$j" 'd["stages"][0]["effects"][0]["path"]')" = \
		/etc/modprobe.d/blacklist-nouveau.conf ]
	[ "$(json_get "$j" 'd["stages"][0]["effects"][1]["argv"]')" = '["update-initramfs", "-u"]' ]
	want=$(sha256sum < "$EXPECTED/ubuntu2204/blacklist-nouveau.conf" | cut -d' ' -f1)
	[ "$(json_get "$j" 'd["stages"][0]["effects"][0]["sha256"]')" = "$want" ]
	json_get "$j" 'd["stages"][0]["effects"][0]["diff"]' | grep -qx '+blacklist nouveau'
	[ "$(json_get "$j" '[e["type"] for e in d["stages"][7]["effects"]]')" = \
		'["write", "write", "run"]' ]
	[ "$(json_get "$j" 'd["stages"][7]["effects"][2]["argv"]')" = '["ldconfig"]' ]
}

@test "plan --json without --only: every stage has its state" {
	mkroot "$R" --cuda --nouveau unloaded
	gp --root "$R" --json plan --profile "$PROFILE"
	assert_status 5
	j=$BATS_TEST_TMPDIR/plan.json
	printf '%s\n' "$output" > "$j"
	[ "$(json_get "$j" '[s["state"].replace("_", " ") for s in d["stages"]]')" = \
		'["needed", "needed", "disabled", "disabled", "needed", "needed", "needed", "needed", "disabled"]' ]
	assert_untouched_by_gpuprov "$R"
}

@test "verify: a read-only command that tries to write fails with EROFS; the tree stays byte-identical" {
	mkroot "$R" --cuda --nouveau unloaded
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	# verify sources the profile script in the root's sh.
	echo 'touch /etc/written-by-a-probe' >> "$R/etc/profile.d/gpuprov-cuda.sh"
	snapshot "$R" before
	gp --root "$R" verify --only "$ONLY"
	assert_status 3
	assert_stdout_has "touch: /etc/written-by-a-probe: Read-only file system"
	refute_stderr_has "warning"
	assert_unchanged "$R" before
}

@test "verify: where no mount namespace can be made, one warning, then the read-only commands run" {
	command -v unshare > /dev/null || skip "no unshare(1)"
	mkroot "$R" --cuda --nouveau unloaded
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	echo 'touch /etc/written-by-a-probe' >> "$R/etc/profile.d/gpuprov-cuda.sh"
	# A user namespace (ids mapped to themselves) that allows no further
	# mount or user namespace: both of gpuprov's tries fail there.
	# shellcheck disable=SC2016 # expanded by the inner sh
	run --separate-stderr unshare --user --map-root-user sh -c '
		echo 0 > /proc/sys/user/max_mnt_namespaces &&
		echo 0 > /proc/sys/user/max_user_namespaces || exit 99
		exec "$@"' sh "$GPUPROV" --root "$R" verify --only "$ONLY"
	[ "$status" -ne 99 ] || skip "cannot limit namespaces in a user namespace here"
	assert_status 0
	[ "$(printf '%s\n' "$stderr" | grep -c 'warning: cannot mount .* read-only in a private mount namespace')" -eq 1 ] ||
		fail "expected one warning:" "$stderr"
	assert_stderr_has "read-only commands run on the writable root"
	# Documented: without the namespace the command could write.
	[ -e "$R/etc/written-by-a-probe" ] || fail "the read-only command did not run"
}

@test "plan: libkmod's complaints about bad modprobe.d lines stay off stderr unless KMOD_LOG asks for them" {
	mkroot "$R" --cuda
	printf 'frobnicate nouveau\noptions\n' > "$R/etc/modprobe.d/bad.conf"
	gp --root "$R" plan --profile "$PROFILE" --only nouveau
	assert_documented_status
	refute_stderr_has "libkmod"
	# A KMOD_LOG of the operator's (debugging libkmod) is left alone.
	run --separate-stderr env KMOD_LOG=3 "$GPUPROV" --root "$R" plan --profile "$PROFILE" --only nouveau
	assert_stderr_has "libkmod: ERROR"
}
