#!/usr/bin/env bats
# Driver upgrades (an ordinary install of a changed profile) against real apt
# and dpkg: the Ubuntu-posing Debian 12 root of ubuntu_archive_root
# (helpers.bash) with an A100 in sys/, whose archive is the stand-in
# repository of tests/fixtures/aptrepo.sh with the 580 branch too (--branch580:
# nvidia-driver-535-server in 535.104.05 and 535.183.01, -580-server in
# 580.65.06 and 580.82.07, nvidia-driver-580 in 580.82.07, Canonical's
# exact-version dependencies between the split packages). The tests run in
# order on that root: install 535.104.05 with DKMS, held; upgrade within the branch to 535.183.01; across branches to
# 580.65.06, first with a postinst that fails (the 535 set is put back and
# held), then for real (the 535 packages go, the 580 set is held, no 535
# hold is left);
# an upgrade to 580.82.07 whose nvidia-dkms postinst fails (the 580.65.06 set
# is put back and held, the run fails, verify says what it said before); the
# same upgrade killed in the middle (history shows it interrupted, the rerun
# converges); the switch to Canonical's prebuilt signed modules with Secure
# Boot on at the older 580.65.06 (nvidia-dkms-580-server goes, the modules
# are pinned with the driver, not taken at the archive's newest); the move to
# the desktop (plain) flavor of 580 (the -server packages gpuprov installed
# go); uninstall --only driver blocked by another stage's package that
# depends on the driver's; last, Secure Boot off, a rollback across branches
# to the 535.183.01 entry, its reboot as an install's (exit 5, --reboot=auto
# arms the resume); after that boot the resume, then uninstall: every
# package of every branch and flavor gpuprov installed on the way goes, the
# root is as before the first install. After each: the installed NVIDIA packages (dpkg status)
# and apt-mark showhold against the expected set, and the plan's effects
# against the run's.

load helpers

KVER=5.15.0-91-generic
A535=535.104.05-0ubuntu1
B535=535.183.01-0ubuntu1
A580=580.65.06-0ubuntu1
B580=580.82.07-0ubuntu1

setup_file() {
	R=$BATS_FILE_TMPDIR/root
	export R
	ubuntu_archive_root "$R" --branch580 || return 0
	a100_dev "$R"
	state "$R" > "$BATS_FILE_TMPDIR/before.state"
}

setup() {
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	P=$BATS_TEST_TMPDIR/p.json
}

# profile BRANCH VERSION [KERNEL_MODULES]: $P installs the -server driver of
# BRANCH at VERSION, proprietary modules (dkms unless told), held.
profile() {
	canonical_driver_profile upgrade "$@"
}

# dkms_set BRANCH VERSION: the packages a DKMS driver of BRANCH installs, as
# "name=version" lines, sorted.
dkms_set() {
	local p
	for p in nvidia-driver nvidia-dkms nvidia-utils libnvidia-compute \
		nvidia-kernel-common nvidia-kernel-source; do
		echo "$p-$1-server=$2"
	done | sort
}

# journal_packages: the journal's recorded packages, "name=version" lines.
journal_packages() {
	"$PYTHON" -c 'import json, sys
for n, p in sorted(json.load(open(sys.argv[1]))["packages"].items()):
    print(n + "=" + p["version"])' "$R/var/lib/gpuprov/state.json"
}


@test "upgrade: install 535.104.05 with DKMS, held" {
	profile 535 535.104.05
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_nvidia_set "$(dkms_set 535 "$A535")"
	loaded 535.104.05
}

@test "upgrade: within the branch, each package's old -> new version, the hold released and set again, the reboot" {
	profile 535 535.183.01
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "driver: needed - installed driver 535.104.05, the profile wants nvidia-driver-535-server 535.183.01 (proprietary modules, DKMS); nvidia-driver-535-server $A535 -> 535.183.01, nvidia-dkms-535-server $A535 -> 535.183.01"
	local set="nvidia-driver-535-server nvidia-dkms-535-server nvidia-utils-535-server libnvidia-compute-535-server nvidia-kernel-common-535-server nvidia-kernel-source-535-server"
	assert_stdout_line "      run apt-mark unhold $set"
	assert_stdout_has "nvidia-driver-535-server=$B535 nvidia-dkms-535-server=$B535"
	assert_stdout_line "      run apt-mark hold $set"
	assert_stdout_has "reboot"
	refute_stdout_has "remove --purge"
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_stderr_has "the loaded nvidia module is 535.104.05, the installed driver 535.183.01"
	assert_nvidia_set "$(dkms_set 535 "$B535")"
	loaded 535.183.01
}

@test "upgrade: across branches, a postinst that fails puts the removed branch back, held" {
	profile 580 580.65.06
	echo "nvidia-dkms-580-server=$A580" > "$R/etc/stand-in-failing-postinst"
	gp --root "$R" install --profile "$P"
	rm -f "$R/etc/stand-in-failing-postinst"
	assert_status 1
	assert_stderr_has "gpuprov put the packages back as this run found them (reinstalled at their previous versions: libnvidia-compute-535-server=$B535,"
	assert_stderr_has "; removed: nvidia-driver-580-server, nvidia-dkms-580-server,"
	assert_nvidia_set "$(dkms_set 535 "$B535")"
	[ "$(journal_packages)" = "$(dkms_set 535 "$B535")" ] ||
		fail "journal packages:" "$(journal_packages)"
}

@test "upgrade: across branches, the old branch's packages go, the new set is held, no old hold is left" {
	profile 580 580.65.06
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "nvidia-driver-580-server (none) -> 580.65.06, nvidia-dkms-580-server (none) -> 580.65.06, libnvidia-compute-535-server $B535 -> removed"
	local old="libnvidia-compute-535-server nvidia-dkms-535-server nvidia-driver-535-server nvidia-kernel-common-535-server nvidia-kernel-source-535-server nvidia-utils-535-server"
	assert_stdout_line "      run apt-mark unhold $old"
	assert_stdout_line "      run apt-get -y -q remove --purge $old"
	assert_stdout_has "nvidia-driver-580-server=$A580 nvidia-dkms-580-server=$A580"
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_nvidia_set "$(dkms_set 580 "$A580")"
	# The journal and the history entry have the packages as after the run.
	[ "$(journal_packages)" = "$(dkms_set 580 "$A580")" ] ||
		fail "journal packages:" "$(journal_packages)"
	gp --root "$R" history --json
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/history.json"
	JSON=$BATS_TEST_TMPDIR/history.json
	jeq 'sorted(d["entries"][0]["record"]["packages"])' \
		"$("$PYTHON" -c 'import json, sys; print(json.dumps(sys.argv[1].split()))' "$(dkms_set 580 "$A580" | sed 's/=.*//')")"
	loaded 580.65.06
}

@test "upgrade: a package whose postinst fails leaves the previous set installed and held, the run failed, verify as before" {
	# After the reboot the install finds it done (the journal's reboot is
	# over); what verify says now is what it must say after the failure.
	profile 580 580.65.06
	gp --root "$R" install --profile "$P"
	assert_status 0
	gp --root "$R" verify --profile "$P" --only driver
	local vstatus=$status vout=$output
	profile 580 580.82.07
	gp --root "$R" plan --json --profile "$P"
	assert_status 5
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	echo "nvidia-dkms-580-server=$B580" > "$R/etc/stand-in-failing-postinst"
	gp --root "$R" install --json --profile "$P"
	rm -f "$R/etc/stand-in-failing-postinst"
	printf '%s\n' "$stderr" > "$BATS_TEST_TMPDIR/events"
	assert_status 1
	grep -Fq "nvidia-dkms-580-server=$B580 failed to configure" "$R/var/log/gpuprov.log" ||
		fail "the postinst's failure is not in the run log"
	assert_stderr_has "gpuprov put the packages back as this run found them (reinstalled at their previous versions: libnvidia-compute-580-server=$A580, nvidia-dkms-580-server=$A580,"
	assert_nvidia_set "$(dkms_set 580 "$A580")"
	[ "$(journal_packages)" = "$(dkms_set 580 "$A580")" ] ||
		fail "journal packages:" "$(journal_packages)"
	# The plan's effects, up to the install that failed, are the run's; the
	# putting back follows (the plan's error path).
	"$PYTHON" - "$BATS_TEST_TMPDIR/plan.json" "$BATS_TEST_TMPDIR/events" <<'PY'
import json, sys
plan = [s for s in json.load(open(sys.argv[1]))["stages"] if s["name"] == "driver"][0]["effects"]
ran = [e["effect"] for e in map(json.loads, (l for l in open(sys.argv[2]) if l.startswith("{")))
       if e.get("event") == "effect" and e.get("stage") == "driver"]
i = next(i for i, e in enumerate(plan) if "install" in e.get("argv", []))
assert ran[:i + 1] == plan[:i + 1], (plan, ran)
assert len(ran) > i + 1, ran
PY
	gp --root "$R" verify --profile "$P" --only driver
	profile 580 580.65.06
	gp --root "$R" verify --profile "$P" --only driver
	[ "$status" = "$vstatus" ] && [ "$output" = "$vout" ] ||
		fail "verify before ($vstatus):" "$vout" "after ($status):" "$output"
}

@test "upgrade: killed in the middle, history shows the entry interrupted and a rerun converges" {
	profile 580 580.82.07
	echo "nvidia-driver-580-server=$B580" > "$R/etc/stand-in-killing-postinst"
	# exec keeps the pid the postinst kills.
	# shellcheck disable=SC2016 # the inner shell's own arguments
	run --separate-stderr sh -c 'echo $$ > "$1/etc/stand-in-kill-pid"; shift; exec "$@"' \
		sh "$R" "$GPUPROV" --root "$R" install --profile "$P"
	rm -f "$R/etc/stand-in-killing-postinst" "$R/etc/stand-in-kill-pid"
	[ "$status" -eq 137 ] || fail "not killed ($status):" "$output" "$stderr"
	local p
	for p in $(procs_in_root "$R"); do
		timeout 60 tail --pid="$p" -f /dev/null || fail "pid $p still runs in the root"
	done
	gp --root "$R" history --json
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/history.json"
	JSON=$BATS_TEST_TMPDIR/history.json
	jeq 'd["entries"][0]["result"]' interrupted
	# dpkg was killed with its postinst: the rerun finishes it first.
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_nvidia_set "$(dkms_set 580 "$B580")"
	gp --root "$R" history --json
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/history.json"
	jeq 'd["entries"][0]["result"]' reboot_pending
	loaded 580.82.07
}

@test "upgrade: DKMS -> Canonical's prebuilt signed modules at an older pin with Secure Boot on removes nvidia-dkms, the modules at the pin" {
	# The archive's newest linux-modules-nvidia-* depend on the newest
	# nvidia-kernel-common: unpinned, they would drag the set there.
	profile 580 580.65.06 auto
	mkdir -p "$R/sys/firmware/efi/efivars"
	printf '\006\000\000\000\001' \
		> "$R/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_line "      run apt-mark unhold nvidia-dkms-580-server"
	assert_stdout_line "      run apt-get -y -q remove --purge nvidia-dkms-580-server"
	assert_stdout_has " linux-modules-nvidia-580-server-$KVER=$A580 "
	assert_stdout_has " linux-modules-nvidia-580-server-generic=$A580"
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_nvidia_set "$({ dkms_set 580 "$A580" | grep -v nvidia-dkms
		printf '%s\n' "linux-modules-nvidia-580-server-$KVER=$A580" \
			"linux-modules-nvidia-580-server-generic=$A580"; } | sort)"
	loaded 580.65.06
	gp --root "$R" install --profile "$P"
	assert_status 0
	refute_stdout_has " remove "
}

@test "upgrade: -server -> desktop flavor of the branch, the -server packages gpuprov installed go, released first" {
	profile 580 580.82.07 auto
	sed -i 's/"flavor": "server"/"flavor": "desktop"/' "$P"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "installed driver of another branch or flavor, the profile wants nvidia-driver-580 580.82.07 (proprietary modules, prebuilt signed); nvidia-driver-580 (none) -> 580.82.07,"
	assert_stdout_has "libnvidia-compute-580-server $A580 -> removed, linux-modules-nvidia-580-server-$KVER $A580 -> removed,"
	local old="libnvidia-compute-580-server linux-modules-nvidia-580-server-$KVER linux-modules-nvidia-580-server-generic nvidia-driver-580-server nvidia-kernel-common-580-server nvidia-kernel-source-580-server nvidia-utils-580-server"
	assert_stdout_line "      run apt-mark unhold $old"
	assert_stdout_line "      run apt-get -y -q remove --purge $old"
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_nvidia_set "$(printf '%s\n' "libnvidia-compute-580=$B580" \
		"linux-modules-nvidia-580-$KVER=$B580" "linux-modules-nvidia-580-generic=$B580" \
		"nvidia-driver-580=$B580" "nvidia-kernel-common-580=$B580" "nvidia-utils-580=$B580" | sort)"
	loaded 580.82.07
	gp --root "$R" install --profile "$P"
	assert_status 0
}

@test "upgrade: uninstall --only driver blocks, naming it, when another stage's package depends on a driver package, and changes nothing" {
	# A package of another stage's (recorded as the fabric manager stage
	# records its own) that depends on the driver's nvidia-kernel-common.
	local d=$R/tmp/fm
	mkdir -p "$d/DEBIAN"
	printf 'Package: nvidia-fabricmanager-580\nVersion: %s\nArchitecture: all\nMaintainer: t <t@gpuprov.invalid>\nDepends: nvidia-kernel-common-580 (= %s)\nDescription: stand-in\n' \
		"$B580" "$B580" > "$d/DEBIAN/control"
	chroot "$R" dpkg-deb --build /tmp/fm /tmp/fm.deb > /dev/null
	chroot "$R" dpkg -i /tmp/fm.deb > /dev/null
	rm -rf "$d" "$d.deb"
	"$PYTHON" - "$R/var/lib/gpuprov/state.json" "$B580" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["packages"]["nvidia-fabricmanager-580"] = {"version": sys.argv[2], "stage": "fabric_manager"}
json.dump(j, open(sys.argv[1], "w"))
PY
	snapshot "$R" installed var/log/gpuprov.log var/lib/gpuprov/lock
	gp --root "$R" uninstall --only driver --dry-run
	assert_status 4
	assert_stdout_has "driver: blocked - nothing changed: removing "
	assert_stdout_has " would take along nvidia-fabricmanager-580 (stage fabric_manager), which gpuprov installed for that stage and which depends on them"
	assert_stdout_has "or keep this stage (--skip driver)"
	gp --root "$R" uninstall --only driver
	assert_status 4
	assert_stdout_has "driver: blocked - nothing changed"
	assert_unchanged "$R" installed var/log/gpuprov.log var/lib/gpuprov/lock
	# The stand-in goes again, so the rollback below meets gpuprov's set only.
	chroot "$R" dpkg --purge nvidia-fabricmanager-580 > /dev/null
	"$PYTHON" - "$R/var/lib/gpuprov/state.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
del j["packages"]["nvidia-fabricmanager-580"]
json.dump(j, open(sys.argv[1], "w"))
PY
}

@test "upgrade: rollback across branches to 535.183.01 with DKMS: the 580 set goes, the 535 set is back and held, the reboot follows as for an install (exit 5, --reboot=auto arms the resume)" {
	rm -f "$R/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	# --reboot=auto needs the resume unit in the root (make install-units).
	mkdir -p "$R/usr/local/lib/systemd/system"
	cp "$REPO_ROOT/dist/systemd/gpuprov-resume.service.in" \
		"$R/usr/local/lib/systemd/system/gpuprov-resume.service"
	gp --root "$R" history --json
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/history.json"
	local id
	id=$("$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print([e["id"] for e in d["entries"]
       if e["record"]["packages"].get("nvidia-driver-535-server", {}).get("version") == sys.argv[2]][0])' \
		"$BATS_TEST_TMPDIR/history.json" "$B535")
	gp --root "$R" rollback --to "$id" --dry-run
	assert_status 5
	assert_stdout_has "rollback: needed - back to history entry $id: installs "
	assert_stdout_has "nvidia-driver-535-server=$B535"
	assert_stdout_has "removes "
	assert_stdout_has "reboot"
	PLAN_CMD="rollback --dry-run" RUN_CMD=rollback assert_plan_matches_run "$R" --to "$id" --reboot=auto
	assert_status 5
	assert_stderr_has "reboot required ("
	assert_stderr_has "armed, not rebooted (the root is not the host's /)"
	[ -s "$R/var/lib/gpuprov/resume" ] || fail "the resume marker is not armed"
	# After the boot an install of the rollback's entry goes on: a rollback
	# again would go back one entry more, and install takes no --to.
	grep -q install "$R/var/lib/gpuprov/resume" && ! grep -q -e --to "$R/var/lib/gpuprov/resume" ||
		fail "resume marker:" "$(cat "$R/var/lib/gpuprov/resume")"
	[ -L "$R/etc/systemd/system/multi-user.target.wants/gpuprov-resume.service" ] ||
		fail "the resume unit is not wanted"
	assert_nvidia_set "$(dkms_set 535 "$B535")"
}

@test "upgrade: after the rollback's reboot, uninstall removes what the upgrades and the rollback installed, as planned: the root as before the first install, the reboot that unloads the module asked for" {
	loaded 535.183.01
	# The resumed install ends with verify --textfile, as at boot.
	mkdir -p "$R/var/lib/prometheus/node-exporter"
	# The marker's install names no profile: it goes on with the rollback's
	# entry and finds it done, then verify fails only where the stand-in
	# packages ship no libraries and bind no GPU (exit 3).
	gp --root "$R" resume
	assert_status 3
	assert_stderr_has "resume: running '"
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/resume.json"
	"$PYTHON" - "$BATS_TEST_TMPDIR/resume.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
install, end = json.JSONDecoder().raw_decode(text)
verify = json.JSONDecoder().raw_decode(text[end:].lstrip())[0]
driver = [s for s in install["stages"] if s["name"] == "driver"][0]
assert driver["state"] == "satisfied" and not driver["effects"], driver
failed = sorted(f["id"] for f in verify["findings"] if f["level"] == "fail")
assert failed == ["driver.binding.0000_17_00_0", "driver.libcuda", "driver.nvml"], failed
# The entry has no profile file: the hint's install names none.
hint = [f["hint"] for f in verify["findings"] if f["id"] == "driver.nvml"][0]
assert "run 'gpuprov install --only driver --root " in hint, hint
PY
	[ ! -e "$R/var/lib/gpuprov/resume" ] || fail "the resume marker is still armed"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 5
	assert_stderr_has "reboot required ("
	[ -z "$(chroot "$R" dpkg-query -W -f '${db:Status-Status} ${Package}\n' 'nvidia-*' \
		'libnvidia-*' 'linux-modules-nvidia-*' 2> /dev/null | grep -v '^not-installed ')" ] ||
		fail "NVIDIA packages are left:" "$(chroot "$R" dpkg -l 'nvidia-*' 'libnvidia-*' 'linux-modules-nvidia-*')"
	# What the tests made themselves (the loaded module, the EFI variables'
	# directory, the resume unit) is not gpuprov's to remove.
	local made='^\./(proc|sys/firmware)(/| )|^[0-9a-f]{64} +\./proc/|gpuprov-resume\.service|^\./usr/local/lib/systemd|/var/lib/prometheus'
	state "$R" | grep -Ev "$made" > "$BATS_TEST_TMPDIR/after.state"
	grep -Ev "$made" "$BATS_FILE_TMPDIR/before.state" > "$BATS_TEST_TMPDIR/before.state"
	diff -u "$BATS_TEST_TMPDIR/before.state" "$BATS_TEST_TMPDIR/after.state" ||
		fail "the root differs from before the first install (diff above: - before, + after)"
	gp --root "$R" history --json
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/history.json"
	JSON=$BATS_TEST_TMPDIR/history.json
	jeq 'd["entries"][0]["result"]' uninstalled
}
