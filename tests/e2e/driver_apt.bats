#!/usr/bin/env bats
# The driver stage against real apt and dpkg: one debootstrapped Debian 12
# root for the whole file (tests/fixtures/debroot.sh; unpacking one costs
# seconds), posing as Ubuntu 22.04 (os-release, a 5.15.0-91-generic kernel
# with its headers, an A100 in sys/) so that Canonical's package names
# apply, with the signed stand-in repository of tests/fixtures/aptrepo.sh as
# its only apt source (nvidia-driver-535-server and nvidia-dkms-535-server in
# 535.104.05 and 535.183.01). The tests run in order on that root: plan,
# install 535.104.05 and hold it, apt-get upgrade leaves it, rerun, reboot,
# the operator adds and holds libnvidia-decode-535-server (outside the
# driver pin's exact closure), a held libnvidia-fbc1-535-server that the
# archive has in 535.104.05 only blocks the move to 535.183.01 before any
# change, then the profile moves to 535.183.01 (the whole held set released,
# libnvidia-decode pinned at the driver's version, not its newer candidate,
# and held again), then Secure Boot turns on and kernel_modules auto picks
# Canonical's signed prebuilt modules (and nvidia-dkms-535-server goes).

load helpers

KVER=5.15.0-91-generic
APT_INSTALL="apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install --no-install-recommends --allow-downgrades --no-remove"

setup_file() {
	R=$BATS_FILE_TMPDIR/root
	export R
	# The stand-in repository is the archive (source canonical); the GPU.
	ubuntu_archive_root "$R" || return 0
	a100_dev "$R"
}

setup() {
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	P=$BATS_TEST_TMPDIR/p.json
	profile 535.104.05
}

# profile VERSION: $P installs nvidia-driver-535-server VERSION with DKMS,
# held.
profile() {
	canonical_driver_profile drv-apt 535 "$1"
}

# versions: "STATUS VERSION" of the driver and its DKMS package, one line.
versions() {
	echo "$(dpkg_status "$R" nvidia-driver-535-server) / $(dpkg_status "$R" nvidia-dkms-535-server)"
}

# assert_set_at VERSION: every NVIDIA package installed in the root is at
# VERSION and held (apt-mark showhold inside the root says so).
assert_set_at() {
	local all held p bad=
	all=$(chroot "$R" dpkg-query -W -f '${db:Status-Status} ${Package}\n' 'nvidia-*' \
		'libnvidia-*' 'linux-modules-nvidia-*' 2>/dev/null | awk '$1 == "installed" { print $2 }')
	held=$(chroot "$R" apt-mark showhold | sort)
	[ -n "$all" ] || fail "no NVIDIA package is installed"
	for p in $all; do
		[[ "$(dpkg_status "$R" "$p")" == *" installed $1" ]] || bad="$bad $p=$(dpkg_status "$R" "$p")"
		printf '%s\n' "$held" | grep -Fxq "$p" || bad="$bad $p(not held)"
	done
	[ -z "$bad" ] || fail "not at $1 and held:$bad" "apt-mark showhold: $held"
}

@test "driver apt: the plan names the exact packages and the hold, and changes nothing" {
	snapshot "$R" before
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "driver: needed - no NVIDIA driver installed; will install nvidia-driver-535-server 535.104.05 (proprietary modules, DKMS)"
	assert_stdout_line "      run apt-get -q -y update"
	# The root's apt lists are not refreshed yet: the full versions and the
	# packages pinned with them are known to the run only, and the plan
	# says so, in words the run records too.
	assert_stdout_line "      run, by rule: $APT_INSTALL nvidia-driver-535-server=535.104.05 nvidia-dkms-535-server=535.104.05, each version taken at its newest revision in the lists the refresh fetched, with every package these depend on at exactly that version (the root's apt lists did not offer them before this run's refresh)"
	assert_stdout_line "      run, by rule: apt-mark hold nvidia-dkms-535-server nvidia-driver-535-server, and every package the install above added as an exact dependency"
	gp --root "$R" plan --json --profile "$P"
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	JSON=$BATS_TEST_TMPDIR/plan.json
	jeq '[e["makes"] for e in d["stages"][1]["effects"] if e["type"] == "rule"]' '["run", "run"]'
	assert_unchanged "$R" before
}

@test "driver apt: installs the exact version, older than the candidate, and holds the set; the plan's effects are the run's" {
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_stderr_has "reboot required (driver: the nvidia module is not loaded"
	# The upstream version was resolved to the archive's full one, and the
	# packages the named ones depend on at exactly that version are pinned
	# with them (else apt takes the newest and stops: "held broken packages"):
	# the run's own command lines, in its log.
	local v=535.104.05-0ubuntu1
	grep -Fq "driver: run $APT_INSTALL nvidia-driver-535-server=$v nvidia-dkms-535-server=$v nvidia-utils-535-server=$v libnvidia-compute-535-server=$v nvidia-kernel-common-535-server=$v nvidia-kernel-source-535-server=$v" "$R/var/log/gpuprov.log" ||
		fail "the install's command line is not in the run log:" "$(grep 'run apt' "$R/var/log/gpuprov.log")"
	grep -q "driver: run apt-mark hold libnvidia-compute-535-server nvidia-dkms-535-server nvidia-driver-535-server nvidia-kernel-common-535-server nvidia-kernel-source-535-server nvidia-utils-535-server" "$R/var/log/gpuprov.log" ||
		fail "the hold's command line is not in the run log:" "$(grep 'run apt' "$R/var/log/gpuprov.log")"
	[ "$(versions)" = "hold ok installed 535.104.05-0ubuntu1 / hold ok installed 535.104.05-0ubuntu1" ] ||
		fail "installed: $(versions)"
	assert_set_at 535.104.05-0ubuntu1
	run chroot "$R" nvidia-smi
	[[ "$output" == *"Driver Version: 535.104.05"* ]] || fail "nvidia-smi: $output"
}

@test "driver apt: a later apt-get upgrade in the root does not move the held set" {
	run chroot "$R" apt-cache policy nvidia-driver-535-server
	[[ "$output" == *"Candidate: 535.183.01-0ubuntu1"* ]] ||
		fail "the archive should offer a newer version: $output"
	run chroot "$R" apt-get -q -y upgrade
	[ "$status" -eq 0 ] || fail "apt-get upgrade: $output"
	[ "$(versions)" = "hold ok installed 535.104.05-0ubuntu1 / hold ok installed 535.104.05-0ubuntu1" ] ||
		fail "moved: $(versions)"
}

@test "driver apt: a rerun before the reboot changes nothing and still asks for it" {
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P"
	assert_status 5
	assert_stdout_has "driver: reboot pending - driver 535.104.05 installed, but the nvidia module is not loaded; reboot to load it"
	refute_stdout_has "apt-get"
	refute_stdout_has "apt-mark"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
}

@test "driver apt: after the reboot the loaded module is the installed one: satisfied" {
	mkdir -p "$R/proc/driver/nvidia"
	printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sun Jan 1\n' \
		> "$R/proc/driver/nvidia/version"
	echo "nvidia 56000000 0 - Live 0x0" >> "$R/proc/modules"
	new_boot_id "$R"
	gp --root "$R" install --profile "$P"
	assert_status 0
	assert_stdout_has "driver: satisfied - driver 535.104.05 (proprietary) installed, held and loaded"
}

@test "driver apt: an NVIDIA package the operator added and held is part of the held set" {
	# libnvidia-decode depends on libnvidia-compute (= its version), and no
	# driver package depends on it: it lies outside the exact closure of
	# the driver pin, so only releasing the whole held set lets it move.
	local v=535.104.05-0ubuntu1
	run chroot "$R" apt-get -y -q install --no-install-recommends "libnvidia-decode-535-server=$v"
	[ "$status" -eq 0 ] || fail "apt-get install: $output"
	run chroot "$R" apt-mark hold libnvidia-decode-535-server
	[ "$status" -eq 0 ] || fail "apt-mark hold: $output"
	gp --root "$R" install --profile "$P"
	assert_status 0
	assert_stdout_has "driver: satisfied - driver 535.104.05 (proprietary) installed, held and loaded"
	assert_set_at "$v"
}

@test "driver apt: a held NVIDIA package the archive lacks at the new version blocks before any change" {
	# libnvidia-fbc1 depends on libnvidia-compute at exactly its version
	# and the archive has it in 535.104.05 only: held, it would have to
	# move with the set, and no version of it can.
	local v=535.104.05-0ubuntu1 fbc=libnvidia-fbc1-535-server
	run chroot "$R" apt-get -y -q install --no-install-recommends "$fbc=$v"
	[ "$status" -eq 0 ] || fail "apt-get install: $output"
	run chroot "$R" apt-mark hold "$fbc"
	[ "$status" -eq 0 ] || fail "apt-mark hold: $output"
	profile 535.183.01
	local why="$fbc is held at $v, of the NVIDIA driver release that moves to 535.183.01-0ubuntu1, but the root's apt lists offer it only at $v; set stages.driver.version to a release it is offered at, or release it yourself (apt-mark unhold $fbc) to let apt move or remove it with the driver"
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "driver: blocked - $why"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P"
	assert_status 4
	assert_stderr_has "install: nothing was changed: driver: $why"
	refute_stdout_has "apt-get"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
	# The operator's way out, here: remove it.
	run chroot "$R" apt-mark unhold "$fbc"
	[ "$status" -eq 0 ] || fail "apt-mark unhold: $output"
	run chroot "$R" apt-get -y -q purge "$fbc"
	[ "$status" -eq 0 ] || fail "apt-get purge: $output"
}

@test "driver apt: a version change in the profile unholds, installs and holds again" {
	profile 535.183.01
	run chroot "$R" apt-cache policy libnvidia-decode-535-server
	[[ "$output" == *"Candidate: 535.183.01-0ubuntu2"* ]] ||
		fail "the archive should offer a newer libnvidia-decode: $output"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "driver: needed - installed driver 535.104.05, the profile wants nvidia-driver-535-server 535.183.01 (proprietary modules, DKMS)"
	# The whole held set is released for the transaction, not only the
	# named packages: their held exact dependencies must move with them,
	# and so must a held NVIDIA package outside the pin's exact closure
	# (libnvidia-decode, of the same release: it moves with the set),
	# pinned at the driver's version too (its candidate is the newer
	# 535.183.01-0ubuntu2), and held again after.
	local set="nvidia-driver-535-server nvidia-dkms-535-server nvidia-utils-535-server libnvidia-compute-535-server nvidia-kernel-common-535-server nvidia-kernel-source-535-server libnvidia-decode-535-server"
	local v=535.183.01-0ubuntu1
	assert_stdout_line "      run apt-mark unhold $set"
	assert_stdout_line "      run $APT_INSTALL nvidia-driver-535-server=$v nvidia-dkms-535-server=$v nvidia-utils-535-server=$v libnvidia-compute-535-server=$v nvidia-kernel-common-535-server=$v nvidia-kernel-source-535-server=$v libnvidia-decode-535-server=$v"
	assert_stdout_line "      run apt-mark hold $set"
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_stderr_has "the loaded nvidia module is 535.104.05, the installed driver 535.183.01"
	[ "$(versions)" = "hold ok installed 535.183.01-0ubuntu1 / hold ok installed 535.183.01-0ubuntu1" ] ||
		fail "installed: $(versions)"
	[ "$(dpkg_status "$R" libnvidia-decode-535-server)" = "hold ok installed 535.183.01-0ubuntu1" ] ||
		fail "libnvidia-decode: $(dpkg_status "$R" libnvidia-decode-535-server)"
	assert_set_at 535.183.01-0ubuntu1
}

@test "driver apt: with Secure Boot on, auto picks the signed prebuilt modules from the archive" {
	profile 535.183.01
	sed -i 's/"kernel_modules": "dkms"/"kernel_modules": "auto"/' "$P"
	mkdir -p "$R/sys/firmware/efi/efivars"
	printf '\006\000\000\000\001' \
		> "$R/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "(proprietary modules, prebuilt signed)"
	assert_stdout_has "linux-modules-nvidia-535-server-$KVER"
	refute_stdout_has "nvidia-dkms-535-server="
	# The DKMS package goes (released first), not left installed and held.
	assert_stdout_line "      run apt-mark unhold nvidia-dkms-535-server"
	assert_stdout_line "      run apt-get -y -q remove --purge nvidia-dkms-535-server"
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	[[ "$(dpkg_status "$R" "linux-modules-nvidia-535-server-$KVER")" == "hold ok installed 535.183.01-0ubuntu1" ]] ||
		fail "prebuilt modules: $(dpkg_status "$R" "linux-modules-nvidia-535-server-$KVER")"
	[[ "$(dpkg_status "$R" linux-modules-nvidia-535-server-generic)" == *" installed 535.183.01-0ubuntu1" ]] ||
		fail "flavour meta package: $(dpkg_status "$R" linux-modules-nvidia-535-server-generic)"
	[ "$(dpkg_status "$R" nvidia-dkms-535-server)" = "not-installed" ] ||
		fail "the DKMS package is still there: $(dpkg_status "$R" nvidia-dkms-535-server)"
	assert_set_at 535.183.01-0ubuntu1
}
