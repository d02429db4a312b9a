#!/usr/bin/env bats
# The fabric_manager stage. Against real apt and dpkg: one debootstrapped
# Debian 12 root for the whole file (tests/fixtures/debroot.sh), posing as
# Ubuntu 22.04 on an HGX H100 board (8 H100 SXM5 GPUs, 10de:2330, and the
# board's 4 NVSwitch bridges, 10de:22a3, class 0x068000, in sys/), with the
# signed stand-in repository of tests/fixtures/aptrepo.sh as its only apt
# source (nvidia-fabricmanager-535 at 535.104.05 and 535.129.03) and
# nvidia-driver-535-server 535.104.05 installed and held by apt itself
# before the tests. The tests run in order on that root: plan, install the
# fabric manager at the driver's version, verify with the stand-in NVML of
# tests/fixtures/fakenv (fabric state Completed, then In Progress), and a
# driver pin that the repository has no fabric manager for, refused before
# any change. The tests named "(stub root)" use busybox roots of their own
# (tests/fixtures/mkroot.sh).

load helpers

KVER=5.15.0-91-generic
FAKENV=$REPO_ROOT/tests/fixtures/fakenv
LINK=/etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service
UNIT=/lib/systemd/system/nvidia-fabricmanager.service

setup_file() {
	R=$BATS_FILE_TMPDIR/root
	export R
	local i
	ubuntu_archive_root "$R" || return 0
	# The HGX H100 board: 8 GPUs and 4 NVSwitch bridges.
	for i in 0 1 2 3 4 5 6 7; do
		pci_dev "$R" "0000:$(printf '%02x' $((0x17 + i))):00.0" 0x2330 0x030200
	done
	for i in 0 1 2 3; do
		pci_dev "$R" "0000:$(printf '%02x' $((0xc5 + i))):00.0" 0x22a3 0x068000
	done
	# The driver, installed and held as an operator (or the driver stage)
	# left it.
	local v=535.104.05-0ubuntu1
	chroot "$R" apt-get -q -y update > "$BATS_FILE_TMPDIR/apt.log" 2>&1 &&
		chroot "$R" apt-get -q -y install --no-install-recommends nvidia-driver-535-server=$v \
			nvidia-utils-535-server=$v libnvidia-compute-535-server=$v \
			nvidia-kernel-common-535-server=$v >> "$BATS_FILE_TMPDIR/apt.log" 2>&1 &&
		chroot "$R" apt-mark hold nvidia-driver-535-server >> "$BATS_FILE_TMPDIR/apt.log" 2>&1 ||
		fail "cannot install the stand-in driver:" "$(cat "$BATS_FILE_TMPDIR/apt.log")"
	# The stand-in NVML with its fabric calls.
	cc -shared -fPIC -o "$BATS_FILE_TMPDIR/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 \
		"$FAKENV/fakenvml.c" "$FAKENV/fakenvml_fabric.c" ||
		fail "cannot build the fake NVML"
}

setup() {
	if [[ "$BATS_TEST_DESCRIPTION" == *"(stub root)"* ]]; then
		require_root
		return 0
	fi
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	P=$BATS_TEST_TMPDIR/p.json
	profile
}

# profile [VERSION]: $P, the driver of branch 535 (pinned at VERSION when
# given) from the stand-in archive, held, and the fabric manager.
profile() {
	cat > "$P" <<JSON
{
  "name": "fm-apt",
  "extends": "distro/ubuntu2204",
  "stages": {
    "driver": { "method": "apt", "source": "canonical", "branch": "535",${1:+ \"version\": \"$1\",}
      "flavor": "server", "modules": "proprietary", "kernel_modules": "dkms", "hold": true },
    "fabric_manager": {}
  }
}
JSON
}

# fake_nvml ROOT LINES...: the stand-in NVML in ROOT, /etc/fakenv.conf with
# these lines.
fake_nvml() {
	local root=$1
	shift
	cp "$BATS_FILE_TMPDIR/libnvidia-ml.so.1" "$root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
	printf '%s\n' "$@" > "$root/etc/fakenv.conf"
}

@test "fabric_manager: the plan pins nvidia-fabricmanager-535 at exactly the installed driver's version, holds it and enables its service, and changes nothing" {
	snapshot "$R" before
	gp --root "$R" plan --profile "$P" --only fabric_manager
	assert_status 0
	assert_stdout_has "fabric_manager: needed - nvidia-fabricmanager-535 is not installed; nvidia-fabricmanager.service is not enabled"
	assert_stdout_has "install --no-install-recommends --allow-downgrades --no-remove nvidia-fabricmanager-535=535.104.05-0ubuntu1"
	refute_stdout_has "535.129.03"
	assert_stdout_has "run apt-mark hold nvidia-fabricmanager-535"
	assert_stdout_line "      symlink $LINK -> $UNIT"
	assert_unchanged "$R" before
}

@test "fabric_manager: a driver pin the repository has no fabric manager for is refused before any change" {
	# The driver would move to 535.183.01; the lists offer the fabric
	# manager at 535.104.05 and 535.129.03 only.
	profile 535.183.01
	snapshot "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P"
	assert_status 4
	assert_stdout_has "fabric_manager: blocked - the root's apt lists offer nvidia-fabricmanager-535 at 535.129.03-0ubuntu1, 535.104.05-0ubuntu1, not at the driver's version 535.183.01"
	assert_unchanged "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	[ "$(dpkg_status "$R" nvidia-driver-535-server)" = "hold ok installed 535.104.05-0ubuntu1" ] ||
		fail "driver: $(dpkg_status "$R" nvidia-driver-535-server)"
}

@test "fabric_manager: install puts it at the driver's version, held, the service enabled; a rerun is satisfied" {
	gp --root "$R" install --profile "$P" --only fabric_manager
	assert_status 0
	[ "$(dpkg_status "$R" nvidia-fabricmanager-535)" = "hold ok installed 535.104.05-0ubuntu1" ] ||
		fail "fabric manager: $(dpkg_status "$R" nvidia-fabricmanager-535)"
	[ "$(readlink "$R$LINK")" = "$UNIT" ] || fail "link: $(readlink "$R$LINK")"
	[ -f "$R$UNIT" ] || fail "the package's unit is missing"
	# The driver's hold is still there (the install released and held the set).
	chroot "$R" apt-mark showhold | grep -Fxq nvidia-driver-535-server || fail "driver not held"
	gp --root "$R" plan --profile "$P" --only fabric_manager
	assert_status 0
	assert_stdout_has "fabric_manager: satisfied - nvidia-fabricmanager-535 535.104.05, held, nvidia-fabricmanager.service enabled"
}

@test "fabric_manager: verify passes with every GPU's fabric state Completed through NVML" {
	fake_nvml "$R" mode=ok version=535.104.05 count=8 fabric=completed
	gp --root "$R" --json verify --profile "$P" --only fabric_manager
	assert_status 0
	local i
	for i in 0 1 2 3 4 5 6 7; do
		[ "$(json_finding "$output" "fabric_manager.fabric_state.gpu$i")" = "pass GPU $i: Completed (status 0)" ] ||
			fail "gpu$i:" "$output"
	done
	[ "$(json_finding "$output" fabric_manager.package)" = "pass nvidia-fabricmanager-535 535.104.05-0ubuntu1; the driver is 535.104.05" ] ||
		fail "package:" "$output"
	[ "$(json_finding "$output" fabric_manager.hold | cut -d' ' -f1)" = pass ] || fail "hold:" "$output"
	[ "$(json_finding "$output" fabric_manager.service | cut -d' ' -f1)" = pass ] || fail "service:" "$output"
}

@test "fabric_manager: verify fails a GPU whose fabric state is In Progress, with the hint for CUDA error 802" {
	fake_nvml "$R" mode=ok version=535.104.05 count=8 fabric=completed,completed,in_progress,completed
	gp --root "$R" verify --profile "$P" --only fabric_manager
	assert_status 3
	assert_stdout_has "GPU 2: In Progress (status 0)"
	assert_stdout_has "error 802 (cudaErrorSystemNotReady, \"system not yet initialized\")"
	assert_stdout_has "GPU 3: Completed"
}

@test "fabric_manager: once installed and held, the fabric manager keeps the driver from moving to a version it is not offered at" {
	profile 535.183.01
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P"
	assert_status 4
	assert_stdout_has "driver: blocked - nvidia-fabricmanager-535 is held at 535.104.05-0ubuntu1, of the NVIDIA driver release that moves to 535.183.01-0ubuntu1, but the root's apt lists offer it only at 535.129.03-0ubuntu1, 535.104.05-0ubuntu1"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
}

# fresh_host: the root as a fresh host has it: no NVIDIA package, nothing of
# gpuprov's, apt's lists never refreshed; apt kept off the archive's newest
# driver, 535.183.01, which has no fabric manager (an operator's pin, read
# by apt only: the profile's branch-only driver resolves to 535.104.05).
fresh_host() {
	local pkgs
	pkgs=$(chroot "$R" dpkg-query -W -f '${db:Status-Status} ${Package}\n' 'nvidia-*' \
		'libnvidia-*' 2>/dev/null | awk '$1 == "installed" { print $2 }')
	if [ -n "$pkgs" ]; then
		# shellcheck disable=SC2086 # a list of names
		chroot "$R" apt-mark unhold $pkgs > /dev/null &&
			chroot "$R" apt-get -q -y purge $pkgs > "$BATS_TEST_TMPDIR/purge.log" 2>&1 ||
			fail "cannot purge the NVIDIA packages:" "$(cat "$BATS_TEST_TMPDIR/purge.log")"
	fi
	rm -rf "$R$LINK" "$R/var/lib/gpuprov" "$R/etc/modprobe.d/"*gpuprov*
	find "$R/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -delete
	printf '%s\n' 'Package: *-535-server' 'Pin: version 535.183.01*' 'Pin-Priority: -1' \
		> "$R/etc/apt/preferences.d/no-535-183"
}

@test "fabric_manager: on a fresh host a branch-only driver pin plans the fabric manager's install as the rule the run records" {
	fresh_host
	assert_plan_matches_run "$R" --profile "$P"
	assert_stdout_has 'install nvidia-fabricmanager-535 at exactly the upstream version of the driver the driver stage installed'
	# The run's own command lines, at the version the driver resolved to,
	# are in its log.
	grep -Fq "fabric_manager: run apt-get" "$R/var/log/gpuprov.log" &&
		grep -F "fabric_manager: run apt-get" "$R/var/log/gpuprov.log" | grep -Fq "nvidia-fabricmanager-535=535.104.05" ||
		fail "the install's command line is not in the run log:" "$(grep 'run apt' "$R/var/log/gpuprov.log")"
	[ "$(dpkg_status "$R" nvidia-fabricmanager-535)" = "hold ok installed 535.104.05-0ubuntu1" ] ||
		fail "fabric manager: $(dpkg_status "$R" nvidia-fabricmanager-535)"
	[ "$(dpkg_status "$R" nvidia-driver-535-server)" = "hold ok installed 535.104.05-0ubuntu1" ] ||
		fail "driver: $(dpkg_status "$R" nvidia-driver-535-server)"
}

@test "fabric_manager: on a fresh host an exact driver pin plans the fabric manager's install as the run makes it" {
	fresh_host
	profile 535.104.05
	assert_plan_matches_run "$R" --profile "$P"
	[ "$(dpkg_status "$R" nvidia-fabricmanager-535)" = "hold ok installed 535.104.05-0ubuntu1" ] ||
		fail "fabric manager: $(dpkg_status "$R" nvidia-fabricmanager-535)"
}

@test "fabric_manager: on the live host the service is started once the loaded module is the driver's version, and only then" {
	cp "$P" "$R/tmp/p.json"
	# A stand-in systemctl: it logs its argv, and start makes is-active say
	# active.
	local started=/var/lib/fm-stand-in-started log=/var/log/systemctl-stand-in.log
	cat > "$R/usr/bin/systemctl" <<SH
#!/bin/sh
echo "\$*" >> $log
case "\$*" in
"is-active nvidia-fabricmanager.service") [ -e $started ] && echo active && exit 0; echo inactive; exit 3 ;;
"start nvidia-fabricmanager.service") : > $started ;;
esac
SH
	chmod 0755 "$R/usr/bin/systemctl"
	# No nvidia module loaded: the driver's reboot starts the service.
	as_live_host "$R" plan --profile /tmp/p.json --only fabric_manager
	assert_status 0
	assert_stdout_has "fabric_manager: satisfied - nvidia-fabricmanager-535 535.104.05, held"
	refute_stdout_has "systemctl start"
	# The module of the driver's version is loaded: started now.
	local proc=$BATS_TEST_TMPDIR/proc-driver
	mkdir -p "$proc/nvidia"
	printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sun Jan 1\n' > "$proc/nvidia/version"
	LIVE_PROC_DRIVER=$proc as_live_host "$R" plan --profile /tmp/p.json --only fabric_manager
	assert_status 0
	assert_stdout_has "fabric_manager: needed - nvidia-fabricmanager.service is not running, and the loaded nvidia module is the driver's version 535.104.05: it is started now"
	assert_stdout_line "      run systemctl start nvidia-fabricmanager.service"
	LIVE_PROC_DRIVER=$proc as_live_host "$R" install --profile /tmp/p.json --only fabric_manager
	assert_status 0
	[ "$(grep -v '^is-active ' "$R$log")" = "start nvidia-fabricmanager.service" ] ||
		fail "systemctl ran as:" "$(cat "$R$log")"
	LIVE_PROC_DRIVER=$proc as_live_host "$R" install --profile /tmp/p.json --only fabric_manager
	assert_status 0
	assert_stdout_has "fabric_manager: satisfied"
	[ "$(grep -c '^start ' "$R$log")" = 1 ] || fail "started again:" "$(cat "$R$log")"
	rm -f "$R/usr/bin/systemctl" "$R$log" "$R$started"
}

# json_finding JSON ID: "LEVEL EVIDENCE" of the finding ID in a verify --json.
json_finding() {
	"$PYTHON" -c 'import json, sys
for f in json.loads(sys.argv[1])["findings"]:
    if f["id"] == sys.argv[2]:
        print(f["level"], f["evidence"])' "$1" "$2"
}

@test "fabric_manager: an HGX H100 board whose profile has no fabric_manager stage is refused at the preflight (stub root)" {
	local root=$BATS_TEST_TMPDIR/hgx prof=$BATS_TEST_TMPDIR/nofm.json
	mkroot "$root" --distro ubuntu2204 --gpu 2330 --gpu 2330 --gpu 2330 --gpu 2330 \
		--gpu 2330 --gpu 2330 --gpu 2330 --gpu 2330 --nvswitch 4 --pkg-stubs
	cat > "$prof" <<'JSON'
{ "name": "hgx-no-fm", "extends": "distro/ubuntu2204",
  "stages": { "nouveau": {}, "driver": { "method": "apt", "branch": "580", "flavor": "server", "modules": "open", "hold": true } } }
JSON
	snapshot "$root" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$root" install --profile "$prof"
	assert_status 4
	assert_stdout_has "driver: blocked - this is an NVSwitch system (4 NVSwitch bridges, the first at 0000:c5:00.0) and the profile has no stages.fabric_manager"
	assert_stdout_has "add \"fabric_manager\": {} to the profile's stages"
	assert_unchanged "$root" before var/lib/gpuprov var/lib/gpuprov/lock
	[ ! -e "$root/var/log/stub-commands.log" ] || fail "a command ran:" "$(cat "$root/var/log/stub-commands.log")"
	gp --root "$root" verify --profile "$prof"
	assert_stdout_has "this is an NVSwitch system (4 NVSwitch bridges"
}

@test "fabric_manager: on a host without NVSwitch the stage has nothing to do and says why, unless the profile says it is one (stub root)" {
	local root=$BATS_TEST_TMPDIR/pcie prof=$BATS_TEST_TMPDIR/fm.json
	mkroot "$root" --distro ubuntu2204 --pkg-stubs
	cat > "$prof" <<'JSON'
{ "name": "pcie-fm", "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "branch": "580", "flavor": "server", "modules": "open", "hold": true },
    "fabric_manager": {} } }
JSON
	gp --root "$root" plan --profile "$prof"
	assert_status 5
	assert_stdout_has "fabric_manager: satisfied - no NVSwitch in $root/sys/bus/pci/devices (no NVIDIA bridge of an NVSwitch id, no NVLink 5 HGX GPU): the fabric manager is not needed"
	refute_stdout_has "fabricmanager"
	gp --root "$root" --json verify --profile "$prof" --only fabric_manager
	assert_status 0
	[ "$(json_finding "$output" fabric_manager.nvswitch | cut -d' ' -f1)" = skip ] || fail "$output"
	# An image for an HGX board says so itself.
	sed -i 's/"fabric_manager": {}/"fabric_manager": { "nvswitch": "nvlink4" }/' "$prof"
	gp --root "$root" plan --profile "$prof" --only fabric_manager
	assert_status 0
	assert_stdout_has "fabric_manager: needed - nvidia-fabricmanager-580 is not installed"
	refute_stdout_has "nvlsm"
}

@test "fabric_manager: an HGX B200 (NVLink 5) plan adds nvlsm and loads mlx5_ib and ib_umad at boot (stub root)" {
	local root=$BATS_TEST_TMPDIR/b200 prof=$BATS_TEST_TMPDIR/b200.json
	mkroot "$root" --distro ubuntu2404 --gpu 2901 --gpu 2901 --pkg-stubs
	cat > "$prof" <<'JSON'
{ "name": "b200-fm", "extends": "distro/ubuntu2404",
  "stages": { "driver": { "method": "apt", "version": "580.95.05", "flavor": "server", "modules": "open", "hold": true },
    "fabric_manager": {} } }
JSON
	gp --root "$root" plan --profile "$prof" --only fabric_manager
	assert_status 0
	assert_stdout_has "nvidia-fabricmanager-580=580.95.05 nvlsm"
	assert_stdout_has "apt-mark hold nvidia-fabricmanager-580 nvlsm"
	assert_stdout_line "      create /etc/modules-load.d/gpuprov-fabric.conf (new file, mode 0644)"
	assert_stdout_line "        +mlx5_ib"
	assert_stdout_line "        +ib_umad"
	# NVLink 5 switches are not on PCI: a B200 alone does not block the
	# driver of a profile without the stage (a virtual machine's GPU), and a
	# profile says "none" for one.
	sed -i 's/"fabric_manager": {}/"fabric_manager": { "nvswitch": "none" }/' "$prof"
	gp --root "$root" plan --profile "$prof"
	assert_status 5
	assert_stdout_has "fabric_manager: satisfied - stages.fabric_manager.nvswitch is none: the fabric is not managed here"
	sed -i 's/"fabric_manager": { "nvswitch": "none" }/"env": false/' "$prof"
	gp --root "$root" plan --profile "$prof"
	assert_status 5
	assert_stdout_has "fabric_manager: disabled"
	refute_stdout_has "NVSwitch system"
}
