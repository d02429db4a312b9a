#!/usr/bin/env bats
# Stage driver end to end, in busybox fixture roots with stub apt-get,
# apt-mark and dnf (mkroot.sh --pkg-stubs), a stand-in NVIDIA runfile served
# over loopback HTTPS, and stand-in libnvidia-ml.so.1 / libcuda.so.1 built
# from tests/fixtures/fakenv/ (driven by the root's /etc/fakenv.conf) for
# verify. The packages go through the real package layer (src/pkg.c), whose
# commands the stubs accept; driver_apt.bats runs real apt and dpkg.

load helpers

FAKENV=$REPO_ROOT/tests/fixtures/fakenv
LIBDIR=usr/lib/x86_64-linux-gnu

setup_file() {
	mkdir -p "$BATS_FILE_TMPDIR/fakenv"
	cc -shared -fPIC -o "$BATS_FILE_TMPDIR/fakenv/libnvidia-ml.so.1" \
		-Wl,-soname,libnvidia-ml.so.1 "$FAKENV/fakenvml.c" ||
		fail "cannot build the fake NVML"
	cc -shared -fPIC -o "$BATS_FILE_TMPDIR/fakenv/libcuda.so.1" \
		-Wl,-soname,libcuda.so.1 "$FAKENV/fakecuda.c" ||
		fail "cannot build the fake libcuda"
	# Two Machine Owner Keys: ours (the profile's) and another one.
	MOK=$BATS_FILE_TMPDIR/mok
	mkdir -p "$MOK"
	for k in MOK other; do
		openssl req -x509 -newkey rsa:2048 -nodes -subj "/CN=test-$k" -days 1 \
			-keyout "$MOK/$k.priv" -outform DER -out "$MOK/$k.der" 2>/dev/null ||
			fail "cannot make a test MOK"
	done
}

MOK=$BATS_FILE_TMPDIR/mok
MOK_DIR=/var/lib/shim-signed/mok
MOK_APT='{ "method": "apt", "branch": "535", "modules": "proprietary", "mok_key": "/var/lib/shim-signed/mok/MOK.priv", "mok_cert": "/var/lib/shim-signed/mok/MOK.der" }'

# mok_root [mkroot options]: drv_root with Secure Boot on and our MOK pair
# at $MOK_DIR/MOK.{priv,der}; the profile $MOK_APT names it.
mok_root() {
	drv_root --secure-boot on "$@"
	mkdir -p "$R$MOK_DIR"
	cp "$MOK/MOK.priv" "$MOK/MOK.der" "$R$MOK_DIR/"
	drv_profile "$MOK_APT"
}

teardown() {
	stop_https_server
}

# drv_profile JSON-OF-THE-DRIVER-STAGE [DISTRO]: $P, a profile with only the
# driver stage on a distro base (no match.gpus: the GPUs present decide).
drv_profile() {
	P=$BATS_TEST_TMPDIR/drv.json
	cat > "$P" <<JSON
{
  "name": "drv-test",
  "extends": "distro/${2:-ubuntu2204}",
  "stages": { "driver": $1 }
}
JSON
}

# drv_root [mkroot options]: $R without nouveau, with package stubs.
drv_root() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau unloaded --pkg-stubs "$@"
}

# apt_lists PACKAGE...: the root's apt lists offer exactly these packages.
apt_lists() {
	mkdir -p "$R/var/lib/apt/lists"
	for p in "$@"; do
		printf 'Package: %s\nVersion: 1\n\n' "$p"
	done > "$R/var/lib/apt/lists/archive_dists_jammy_main_binary-amd64_Packages"
}

# loaded VERSION [open]: the module VERSION is loaded and bound (callers
# that mean a reboot add new_boot_id).
loaded() {
	mkdir -p "$R/proc/driver/nvidia" "$R/sys/bus/pci/drivers/nvidia"
	if [ "${2-}" = open ]; then
		printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build\n' "$1"
	else
		printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Sun Jan 1\n' "$1"
	fi > "$R/proc/driver/nvidia/version"
	echo "nvidia 56000000 0 - Live 0x0" >> "$R/proc/modules"
	ln -sfn ../../../bus/pci/drivers/nvidia "$R/$GPU_DEV/driver"
}

# fake_libs KEY=VALUE...: the stand-in NVML and libcuda in the root, and
# /etc/fakenv.conf with these lines.
fake_libs() {
	mkdir -p "$R/$LIBDIR"
	cp "$BATS_FILE_TMPDIR/fakenv/libnvidia-ml.so.1" "$BATS_FILE_TMPDIR/fakenv/libcuda.so.1" \
		"$R/$LIBDIR/"
	printf '%s\n' "$@" > "$R/etc/fakenv.conf"
}

# The package layer's apt-get install (src/pure/pkg_apt.c).
APT_INSTALL="apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install --no-install-recommends --allow-downgrades --no-remove"

APT535='{ "method": "apt", "branch": "535", "flavor": "server", "modules": "proprietary", "hold": true }'

@test "driver: dry-run lists the exact packages, headers and hold, changes nothing" {
	drv_root
	drv_profile '{ "method": "apt", "branch": "535", "version": "535.183.01", "flavor": "server", "modules": "proprietary", "hold": true }'
	snapshot "$R" before
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "driver: needed - no NVIDIA driver installed; will install nvidia-driver-535-server 535.183.01 (proprietary modules, DKMS)"
	assert_stdout_line "      run apt-get -q -y update"
	# No apt lists in the root yet: the pinned versions resolve in the run.
	assert_stdout_line "      run, by rule: $APT_INSTALL linux-headers-5.15.0-91-generic nvidia-driver-535-server=535.183.01 nvidia-dkms-535-server=535.183.01, each version taken at its newest revision in the lists the refresh fetched, with every package these depend on at exactly that version (the root's apt lists did not offer them before this run's refresh)"
	assert_stdout_line "      run, by rule: apt-mark hold nvidia-dkms-535-server nvidia-driver-535-server, and every package the install above added as an exact dependency"
	assert_stdout_has "reboot required: the nvidia module is not loaded"
	assert_unchanged "$R" before
	assert_untouched_by_gpuprov "$R"
}

@test "driver: install, hold, reboot pending until the module is loaded, then satisfied" {
	drv_root
	drv_profile "$APT535"
	assert_plan_matches_run "$R" --profile "$P"
	assert_status 5
	assert_stderr_has "reboot required (driver: the nvidia module is not loaded"
	grep -qx "/usr/bin/$APT_INSTALL linux-headers-5.15.0-91-generic nvidia-driver-535-server nvidia-dkms-535-server" \
		"$R/var/log/stub-commands.log" || fail "commands: $(stub_log "$R")"
	grep -qx "/usr/bin/apt-mark hold nvidia-dkms-535-server nvidia-driver-535-server" \
		"$R/var/log/stub-commands.log" || fail "commands: $(stub_log "$R")"
	grep -A1 '^Package: nvidia-driver-535-server$' "$R/var/lib/dpkg/status" |
		grep -q 'Status: hold ok installed' || fail "not held: $(cat "$R/var/lib/dpkg/status")"
	# The same boot: still waiting for the reboot.
	gp --root "$R" install --profile "$P"
	assert_status 5
	assert_stdout_has "driver: reboot pending - driver 535.183.01 installed, but the nvidia module is not loaded; reboot to load it"
	loaded 535.183.01
	new_boot_id "$R"
	gp --root "$R" install --profile "$P"
	assert_status 0
	assert_stdout_has "driver: satisfied - driver 535.183.01 (proprietary) installed, held and loaded"
	snapshot "$R" done var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" install --profile "$P"
	assert_status 0
	assert_unchanged "$R" done var/log/gpuprov.log var/lib/gpuprov/state.json
}

@test "driver: a loaded module older than the installed driver is reboot pending, not broken" {
	drv_root
	drv_profile "$APT535"
	gp --root "$R" install --profile "$P"
	loaded 535.104.05
	gp --root "$R" install --profile "$P"
	assert_status 5
	assert_stdout_has "the loaded nvidia module is 535.104.05, the installed driver 535.183.01"
	# A reboot that still loads the old module: blocked, pointing at verify.
	new_boot_id "$R"
	gp --root "$R" install --profile "$P"
	assert_status 4
	assert_stderr_has "the machine has rebooted since gpuprov asked for it"
}

@test "driver: a version change in the profile installs that version" {
	drv_root
	drv_profile "$APT535"
	gp --root "$R" install --profile "$P"
	drv_profile '{ "method": "apt", "branch": "535", "version": "535.216.01", "flavor": "server", "modules": "proprietary", "hold": true }'
	gp --root "$R" plan --profile "$P"
	assert_stdout_has "installed driver 535.183.01, the profile wants nvidia-driver-535-server 535.216.01"
	gp --root "$R" install --profile "$P"
	assert_status 5
	grep -q "nvidia-driver-535-server=535.216.01" "$R/var/log/stub-commands.log" ||
		fail "commands: $(stub_log "$R")"
}

@test "driver: a failed install holds the released set again" {
	drv_root
	drv_profile "$APT535"
	gp --root "$R" install --profile "$P"
	assert_status 5
	grep -qx 'nvidia-driver-535-server' <(chroot "$R" apt-mark showhold) ||
		fail "not held after install: $(chroot "$R" apt-mark showhold)"
	drv_profile '{ "method": "apt", "branch": "535", "version": "535.216.01", "flavor": "server", "modules": "proprietary", "hold": true }'
	echo nvidia-dkms-535-server > "$R/var/lib/stub-pkg/missing"
	gp --root "$R" install --profile "$P"
	assert_status 1
	assert_stderr_has "Unable to locate package nvidia-dkms-535-server"
	# Released for the transaction, held again after it failed.
	grep -q "apt-mark unhold" "$R/var/log/stub-commands.log" || fail "never released"
	[ "$(grep -c 'apt-mark hold' "$R/var/log/stub-commands.log")" -eq 2 ] ||
		fail "not held again: $(stub_log "$R")"
	grep -qx 'nvidia-driver-535-server' <(chroot "$R" apt-mark showhold) ||
		fail "left unheld: $(chroot "$R" apt-mark showhold)"
}

@test "driver: prebuilt signed modules are chosen when the archive has them for the kernel" {
	drv_root --secure-boot on
	apt_lists linux-modules-nvidia-535-server-5.15.0-91-generic \
		linux-modules-nvidia-535-server-generic nvidia-driver-535-server
	drv_profile "$APT535"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "(proprietary modules, prebuilt signed)"
	assert_stdout_has "nvidia-driver-535-server linux-modules-nvidia-535-server-5.15.0-91-generic linux-modules-nvidia-535-server-generic"
	refute_stdout_has "nvidia-dkms"
	refute_stdout_has "linux-headers"
}

@test "driver: modules auto picks open for a Blackwell GPU" {
	drv_root --gpu 2901
	drv_profile '{ "method": "apt", "branch": "580", "flavor": "server", "modules": "auto" }'
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "nvidia-driver-580-server-open (open modules, DKMS)"
}

@test "driver: source nvidia uses NVIDIA's repository names" {
	drv_root
	drv_profile '{ "method": "apt", "source": "nvidia", "branch": "580", "modules": "open" }'
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "create /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list"
	assert_stdout_has "nvidia-open-580"
}

# dnf_root: a rocky9 root with the dnf stub, NVIDIA's repository key as a
# stand-in served over loopback HTTPS ($FPR, $KSHA) and $P for DRIVER-JSON.
dnf_setup() {
	drv_root --distro rocky9
	start_https_server
	FPR=$(stand_in_key "$WWW/RPM-GPG-KEY-test")
	KSHA=$(sha256sum < "$WWW/RPM-GPG-KEY-test" | cut -d' ' -f1)
	P=$BATS_TEST_TMPDIR/drv.json
	cat > "$P" <<JSON
{
  "name": "drv-test",
  "extends": "distro/rocky9",
  "distro": { "keyring_url": "https://127.0.0.1:$PORT/RPM-GPG-KEY-test",
              "keyring_sha256": "$KSHA", "keyring_fingerprint": "$FPR" },
  "stages": { "driver": $1 }
}
JSON
}

@test "driver: dnf installs the module stream and locks the set" {
	dnf_setup '{ "method": "dnf", "branch": "580", "modules": "open", "hold": true }'
	echo '* 3:580.95.05-1.el9' > "$R/var/lib/stub-pkg/candidates"
	k=kernel-devel-5.14.0-362.8.1.el9_3.x86_64
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	assert_stdout_line "      download https://127.0.0.1:$PORT/RPM-GPG-KEY-test"
	assert_stdout_line "      create /etc/yum.repos.d/cuda-rhel9-x86_64.repo (new file, mode 0644)"
	assert_stdout_line "      run dnf -y -q makecache"
	assert_stdout_line "      run dnf -y -q install $k @nvidia-driver:580-open nvidia-driver"
	# What the install adds (kmod-nvidia-open-dkms) is dnf's choice: the
	# lock of the set after it is a rule.
	assert_stdout_line "      run, by rule: dnf -y -q versionlock add nvidia-driver, and every package the install above added as an exact dependency"
	# The transaction's outcome: the rpm database the real dnf would leave.
	rpmdb_write "$R/var/lib/stub-pkg/rpmdb.after" "nvidia-driver 3:580.95.05-1.el9" \
		"kmod-nvidia-open-dkms 3:580.95.05-1.el9" "$k 5.14.0-362.8.1.el9_3"
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 5
	assert_stderr_has "reboot required (driver: the nvidia module is not loaded"
	grep -qx "/usr/bin/dnf -y -q install $k @nvidia-driver:580-open nvidia-driver" \
		"$R/var/log/stub-commands.log" || fail "commands: $(stub_log "$R")"
	grep -qx "/usr/bin/dnf -y -q versionlock add kmod-nvidia-open-dkms nvidia-driver" \
		"$R/var/log/stub-commands.log" || fail "commands: $(stub_log "$R")"
	grep -qx 'nvidia-driver-3:580.95.05-1.el9.\*' "$R/etc/dnf/plugins/versionlock.list" ||
		fail "not locked: $(cat "$R/etc/dnf/plugins/versionlock.list")"
	grep -qx "gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-cuda-rhel9-x86_64" \
		"$R/etc/yum.repos.d/cuda-rhel9-x86_64.repo" || fail "no repository file"
	cmp "$WWW/RPM-GPG-KEY-test" "$R/etc/pki/rpm-gpg/RPM-GPG-KEY-cuda-rhel9-x86_64" ||
		fail "the key was not installed"
	# Rerun, same boot: nothing to install, the stream is not asked for again.
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 5
	assert_stdout_has "driver: reboot pending - driver 580.95.05 installed, but the nvidia module is not loaded"
	[ "$(grep -c ' install ' "$R/var/log/stub-commands.log")" = 1 ] ||
		fail "installed twice: $(stub_log "$R")"
}

@test "driver preflight: NVIDIA's dnf repository without a keyring sha256" {
	drv_root --distro rocky9
	# distro/rocky9 pins the key's sha256: a distro of its own without it.
	P=$BATS_TEST_TMPDIR/drv.json
	cat > "$P" <<'JSON'
{ "name": "drv-test",
  "match": { "os_id": "rocky", "version_id": "9", "arch": "x86_64" },
  "distro": { "id": "rhel9", "package_manager": "dnf", "nvidia_repo": "rhel9",
              "keyring_url": "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub",
              "keyring_fingerprint": "610C7B14E068A878070DA4E99CD0A493D42D0685",
              "initramfs": ["dracut", "--force"], "kernel_headers": "kernel-devel-{kernel}" },
  "stages": { "driver": { "method": "dnf", "branch": "580", "modules": "open" } } }
JSON
	assert_blocked "cannot add NVIDIA's repository: no sha256 for the keyring https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub (set distro.keyring_sha256)"
}

# --- preflight: blocked before any change (exit 4, tree unchanged) ---------

# blocked MESSAGE: install is blocked with MESSAGE and changes nothing (the
# engine's lock file aside), no command ran.
assert_blocked() {
	snapshot "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P"
	assert_status 4
	assert_stderr_has "$1"
	assert_unchanged "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	[ ! -e "$R/var/log/stub-commands.log" ] || fail "a command ran: $(stub_log "$R")"
}

@test "driver preflight: Secure Boot on with DKMS names the ways out" {
	drv_root --secure-boot on
	drv_profile "$APT535"
	assert_blocked "Secure Boot is on and DKMS would build unsigned kernel modules"
	assert_stderr_has "linux-modules-nvidia-*"
	assert_stderr_has "\"mok_key\" and \"mok_cert\""
	assert_stderr_has "mokutil --import CERT"
}

@test "driver preflight: Secure Boot with an enrolled MOK configures DKMS signing" {
	mok_root --mok-enrolled "$MOK/MOK.der"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	refute_stdout_has "could not be checked"
	gp --root "$R" install --profile "$P"
	assert_status 5
	grep -qx "mok_signing_key=$MOK_DIR/MOK.priv" \
		"$R/etc/dkms/framework.conf.d/gpuprov-mok.conf" || fail "no MOK configuration"
	grep -qx "mok_certificate=$MOK_DIR/MOK.der" \
		"$R/etc/dkms/framework.conf.d/gpuprov-mok.conf" || fail "no MOK certificate"
}

@test "driver preflight: an enrolled MOK certificate given as PEM" {
	mok_root --mok-enrolled "$MOK/MOK.der"
	openssl x509 -inform DER -in "$MOK/MOK.der" -out "$R$MOK_DIR/MOK.pem"
	drv_profile '{ "method": "apt", "branch": "535", "modules": "proprietary", "mok_key": "/var/lib/shim-signed/mok/MOK.priv", "mok_cert": "/var/lib/shim-signed/mok/MOK.pem" }'
	gp --root "$R" install --profile "$P"
	assert_status 5
	grep -qx "mok_certificate=$MOK_DIR/MOK.pem" \
		"$R/etc/dkms/framework.conf.d/gpuprov-mok.conf" || fail "no MOK configuration"
}

@test "driver preflight: Secure Boot with a MOK that is not enrolled" {
	mok_root --mok-enrolled "$MOK/other.der"
	assert_blocked "Secure Boot is on and the MOK certificate $MOK_DIR/MOK.der is not enrolled in the firmware's MOK list (MokListRT)"
	assert_stderr_has "Key was rejected by service"
	assert_stderr_has "run 'mokutil --import $MOK_DIR/MOK.der', reboot and confirm the enrolment in the MOK manager on the console, then run gpuprov install again"
}

@test "driver preflight: the runfile with a MOK that is not enrolled" {
	mok_root --mok-enrolled "$MOK/other.der"
	drv_profile '{ "method": "runfile", "version": "580.95.05", "modules": "open", "sha256": "0000000000000000000000000000000000000000000000000000000000000000", "mok_key": "/var/lib/shim-signed/mok/MOK.priv", "mok_cert": "/var/lib/shim-signed/mok/MOK.der" }'
	assert_blocked "the MOK certificate $MOK_DIR/MOK.der is not enrolled"
}

@test "driver preflight: Secure Boot with a revoked MOK" {
	mok_root --mok-enrolled "$MOK/MOK.der" --mok-revoked "$MOK/MOK.der"
	assert_blocked "Secure Boot is on and the MOK certificate $MOK_DIR/MOK.der is revoked (listed in the firmware's forbidden MOK list, MokListXRT)"
	assert_stderr_has "create a new key pair"
}

@test "driver preflight: MOK enrolment that cannot be checked does not block" {
	mok_root
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "whether the MOK certificate $MOK_DIR/MOK.der is enrolled could not be checked (no readable MokListRT under /sys/firmware/efi in the root)"
	gp --root "$R" install --profile "$P"
	assert_status 5
	grep -qx "mok_signing_key=$MOK_DIR/MOK.priv" \
		"$R/etc/dkms/framework.conf.d/gpuprov-mok.conf" || fail "no MOK configuration"
	gp --root "$R" verify --profile "$P"
	assert_stdout_has "MOK enrolment"
	assert_stdout_has "is enrolled could not be checked"
}

@test "driver preflight: a MOK certificate that is not a certificate" {
	mok_root --mok-enrolled "$MOK/MOK.der"
	echo cert > "$R$MOK_DIR/MOK.der"
	assert_blocked "the MOK certificate $MOK_DIR/MOK.der named by the profile is not an X.509 certificate (DER, or PEM with a CERTIFICATE block)"
}

@test "driver preflight: MOK key named but missing" {
	drv_root --secure-boot on
	drv_profile '{ "method": "apt", "branch": "535", "modules": "proprietary", "mok_key": "/root/mok.key", "mok_cert": "/root/mok.der" }'
	assert_blocked "the MOK signing key /root/mok.key named by the profile does not exist"
}

@test "driver preflight: headers missing for the running kernel" {
	drv_root
	apt_lists nvidia-driver-535-server
	drv_profile "$APT535"
	assert_blocked "kernel headers for the running kernel 5.15.0-91-generic are not installed and linux-headers-5.15.0-91-generic is not in the root's package lists"
}

@test "driver preflight: a newer installed kernel without headers" {
	drv_root
	k=5.15.0-101-generic
	mkdir -p "$R/lib/modules/$k"
	echo "vmlinuz $k" > "$R/boot/vmlinuz-$k"
	apt_lists nvidia-driver-535-server linux-headers-5.15.0-91-generic
	drv_profile "$APT535"
	assert_blocked "kernel headers for the newer installed kernel $k are not installed"
	# With its headers installed, both kernels are covered.
	mkdir -p "$R/usr/src/linux-headers-$k"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "linux-headers-5.15.0-91-generic nvidia-driver-535-server"
}

@test "driver preflight: Blackwell with proprietary modules" {
	drv_root --gpu 2901
	drv_profile '{ "method": "apt", "branch": "580", "modules": "proprietary" }'
	assert_blocked "proprietary kernel modules cannot drive the B200 at 0000:17:00.0 (10de:2901, Blackwell), which needs the open modules; use \"modules\": \"open\""
}

@test "driver preflight: Volta with open modules" {
	drv_root --gpu 1db1
	drv_profile '{ "method": "apt", "branch": "580", "modules": "open" }'
	assert_blocked "open kernel modules cannot drive the V100"
	assert_stderr_has "which needs the proprietary modules; use \"modules\": \"proprietary\""
}

@test "driver preflight: a V100 past its last branch (R580), and on R580" {
	drv_root --gpu 1db1
	drv_profile '{ "method": "apt", "branch": "595", "modules": "proprietary" }'
	assert_blocked "driver branch 595 no longer supports the V100 at 0000:17:00.0 (10de:1db1, Volta): branch 580 is the last for Maxwell, Pascal and Volta; use \"branch\": \"580\""
	drv_profile '{ "method": "apt", "branch": "580", "modules": "proprietary" }'
	gp --root "$R" plan --profile "$P"
	assert_status 5
	refute_stderr_has "no longer supports"
}

@test "driver preflight: modules auto with Volta and Blackwell together" {
	drv_root --gpu 1db1 --gpu 2901
	drv_profile '{ "method": "apt", "branch": "580", "modules": "auto" }'
	assert_blocked "\"modules\": \"auto\": no single flavor drives"
}

@test "driver preflight: no NVIDIA GPU" {
	drv_root --vga-only
	drv_profile "$APT535"
	assert_blocked "no NVIDIA GPU in $R/sys/bus/pci/devices"
}

@test "driver preflight: the runfile without a sha256" {
	drv_root
	drv_profile '{ "method": "runfile", "version": "580.95.05", "modules": "open" }'
	assert_blocked "stages.driver.sha256 is not set"
}

# --- runfile ---------------------------------------------------------------

@test "driver: the runfile is downloaded, checked and run silently with DKMS and the module type" {
	drv_root
	start_https_server
	ver=580.95.05
	cat > "$WWW/NVIDIA-Linux-x86_64-$ver.run" <<EOF
#!/bin/sh
echo "runfile \$*" >> /var/log/stub-commands.log
mkdir -p /$LIBDIR
echo stand-in > /$LIBDIR/libnvidia-ml.so.$ver
EOF
	sha=$(sha256sum < "$WWW/NVIDIA-Linux-x86_64-$ver.run" | cut -d' ' -f1)
	drv_profile "{ \"method\": \"runfile\", \"version\": \"$ver\", \"modules\": \"open\", \"url\": \"https://127.0.0.1:$PORT/NVIDIA-Linux-x86_64-$ver.run\", \"sha256\": \"$sha\" }"
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	assert_stdout_has "download https://127.0.0.1:$PORT/NVIDIA-Linux-x86_64-$ver.run"
	assert_stdout_has "run /bin/sh /var/cache/gpuprov/$sha --silent --dkms --kernel-module-type=open --no-nouveau-check"
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 5
	line=$(grep '^runfile ' "$R/var/log/stub-commands.log") || fail "the runfile did not run"
	[ "$line" = "runfile --silent --dkms --kernel-module-type=open --no-nouveau-check --no-disable-nouveau --no-x-check" ] ||
		fail "runfile argv: $line"
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 5
	assert_stdout_has "driver: reboot pending - driver $ver installed, but the nvidia module is not loaded"
	[ "$(grep -c '^runfile ' "$R/var/log/stub-commands.log")" = 1 ] || fail "the runfile ran twice"
}

# --- verify through the stand-in NVML and libcuda ---------------------------

verify_root() {
	drv_root
	drv_profile "$APT535"
	gp --root "$R" install --profile "$P"
	loaded 535.183.01
}

@test "driver verify: all good" {
	verify_root
	fake_libs mode=ok version=535.183.01 cuda=12020 count=1 persistence=1 "name=NVIDIA A100-SXM4-40GB"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stdout_has "NVML driver version"
	assert_stdout_has "1: NVIDIA A100-SXM4-40GB"
	assert_stdout_has "cuDriverGetVersion: CUDA 12.2"
	assert_stdout_has "cuInit ok, 1 device(s)"
	assert_stdout_has "bound to nvidia"
}

# The probe's child sees the root read-only: a library that writes when it
# is loaded fails with EROFS, the root stays as it was, and what the
# libraries say is still read.
@test "driver verify: the probe runs on a read-only root" {
	verify_root
	fake_libs mode=ok version=535.183.01 cuda=12020 count=1 persistence=1 \
		"name=NVIDIA A100-SXM4-40GB" write=/etc/written-by-nvml
	snapshot "$R" before
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stderr_has "fakenvml: cannot write /etc/written-by-nvml: Read-only file system"
	refute_stderr_has "warning"
	assert_stdout_has "1: NVIDIA A100-SXM4-40GB"
	assert_stdout_has "cuInit ok, 1 device(s)"
	assert_unchanged "$R" before
}

# A /dev that is a mount of its own stays writable for the probe: libcuda's
# first use after a boot creates /dev/nvidia-uvm there (nvidia-modprobe),
# and cuInit fails without it. The rest of the root stays read-only.
@test "driver verify: the probe may create device nodes in a /dev mount, nothing else" {
	command -v unshare > /dev/null || skip "no unshare(1)"
	verify_root
	mkdir -p "$R/dev"
	local dev=$BATS_TEST_TMPDIR/dev-copy
	cp -a "$R/dev" "$dev"
	for target in /dev/nvidia-uvm-made-by-probe /etc/written-by-nvml; do
		fake_libs mode=ok version=535.183.01 cuda=12020 count=1 persistence=1 \
			"name=NVIDIA A100-SXM4-40GB" "write=$target"
		# shellcheck disable=SC2016 # expanded by the inner sh
		run --separate-stderr unshare --mount --propagation private sh -c '
			mount -t tmpfs gpuprov-test-dev "$1/dev" && cp -a "$2/." "$1/dev/" || exit 99
			shift 2
			exec "$@"' sh "$R" "$dev" "$GPUPROV" --root "$R" verify --profile "$P"
		[ "$status" -ne 99 ] || skip "cannot mount a tmpfs in a mount namespace here"
		assert_status 0
		assert_stdout_has "cuInit ok, 1 device(s)"
		case $target in
		/dev/*) assert_stderr_has "fakenvml: wrote $target" ;;
		*) assert_stderr_has "fakenvml: cannot write $target: Read-only file system" ;;
		esac
	done
	# The node was made in the namespace's /dev; the root got neither file.
	[ ! -e "$R/dev/nvidia-uvm-made-by-probe" ] && [ ! -e "$R/etc/written-by-nvml" ] ||
		fail "the probe wrote into the root"
}

# Where no mount namespace can be made: the one warning the read-only
# commands give, and the probe runs on the writable root.
@test "driver verify: without a mount namespace, one warning, then the probe runs" {
	command -v unshare > /dev/null || skip "no unshare(1)"
	verify_root
	fake_libs mode=ok version=535.183.01 cuda=12020 count=1 persistence=1 \
		"name=NVIDIA A100-SXM4-40GB" write=/etc/written-by-nvml
	# shellcheck disable=SC2016 # expanded by the inner sh
	run --separate-stderr unshare --user --map-root-user sh -c '
		echo 0 > /proc/sys/user/max_mnt_namespaces &&
		echo 0 > /proc/sys/user/max_user_namespaces || exit 99
		exec "$@"' sh "$GPUPROV" --root "$R" verify --profile "$P"
	[ "$status" -ne 99 ] || skip "cannot limit namespaces in a user namespace here"
	assert_status 0
	[ "$(printf '%s\n' "$stderr" | grep -c 'warning: cannot mount .* read-only in a private mount namespace')" -eq 1 ] ||
		fail "expected one warning:" "$stderr"
	assert_stdout_has "1: NVIDIA A100-SXM4-40GB"
	# Documented: without the namespace the library could write.
	[ -e "$R/etc/written-by-nvml" ] || fail "the probe did not run"
}

@test "driver verify: driver not loaded" {
	verify_root
	rm -rf "$R/proc/driver" "$R/$GPU_DEV/driver"
	sed -i '/^nvidia /d' "$R/proc/modules"
	fake_libs mode=not_loaded
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "the nvidia module is not loaded"
	assert_stdout_has "nvmlInit_v2: 9 (Driver Not Loaded)"
	assert_stdout_has "kernel headers for 5.15.0-91-generic are missing"
	assert_stdout_has "not bound to any driver"
}

@test "driver verify: Secure Boot rejected the module" {
	verify_root
	mkdir -p "$R/usr/src/linux-headers-5.15.0-91-generic" "$R/sys/firmware/efi/efivars"
	printf '\006\000\000\000\001' > "$R/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	rm -rf "$R/proc/driver"
	fake_libs mode=not_loaded
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "Key was rejected by service"
}

@test "driver verify: Secure Boot rejected the module signed with a MOK that is not enrolled" {
	mok_root
	gp --root "$R" install --profile "$P"
	assert_status 5
	# After the reboot the firmware lists another key only.
	mkroot "$BATS_TEST_TMPDIR/other" --mok-enrolled "$MOK/other.der"
	cp "$BATS_TEST_TMPDIR/other/sys/firmware/efi/efivars/MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23" \
		"$R/sys/firmware/efi/efivars/"
	mkdir -p "$R/usr/src/linux-headers-5.15.0-91-generic"
	fake_libs mode=not_loaded
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "the nvidia module is not loaded"
	assert_stdout_has "the MOK certificate $MOK_DIR/MOK.der that signs the module is not enrolled (not in MokListRT)"
	assert_stdout_has "run 'mokutil --import $MOK_DIR/MOK.der', reboot and confirm the enrolment"
}

@test "driver verify: user space and module differ (library mismatch)" {
	verify_root
	loaded 535.104.05
	fake_libs mode=mismatch version=535.183.01
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "loaded module 535.104.05, installed user space 535.183.01"
	assert_stdout_has "nvmlInit_v2: 18"
	assert_stdout_has "Driver/library version mismatch"
	assert_stdout_has "cuInit: 803"
}

@test "driver verify: no device" {
	verify_root
	fake_libs mode=no_device
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "NVML sees 0 GPU(s), PCI has 1"
	assert_stdout_has "cuInit: 100 (no CUDA-capable device is detected)"
}

@test "driver verify: a driver library that crashes costs only the probe, and the finding says how it ended" {
	verify_root
	fake_libs mode=crash
	gp --root "$R" verify --profile "$P" --only driver
	assert_status 3
	assert_stdout_has "the probe crashed in the driver libraries (signal 6"
}

@test "driver verify: insufficient driver for the toolkit" {
	verify_root
	fake_libs mode=insufficient version=535.183.01 cuda=12020
	P2=$BATS_TEST_TMPDIR/drv-cuda.json
	sed 's/"stages": {/"stages": { "cuda": { "method": "repo", "version": "12.4" },/' "$P" > "$P2"
	gp --root "$R" verify --profile "$P2" --only driver
	assert_status 3
	assert_stdout_has "the driver supports CUDA 12.2, the profile's toolkit is 12.4"
	assert_stdout_has "cuInit: 35"
}

@test "driver verify: libcuda is the toolkit's stub" {
	verify_root
	fake_libs mode=stub version=535.183.01
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "cuInit: 34 (CUDA driver is a stub library)"
	assert_stdout_has "lib64/stubs"
}

@test "driver verify: libraries missing" {
	verify_root
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "libnvidia-ml.so.1: cannot open shared object file"
	refute_stdout_has "libnvidia-ml.so.1: libnvidia-ml.so.1"
	assert_stdout_has "libcuda.so.1: cannot open shared object file"
	refute_stdout_has "libcuda.so.1: libcuda.so.1"
}

@test "driver verify: nothing installed says so instead of guessing why the module is missing" {
	drv_root
	drv_profile '{ "method": "apt", "branch": "535", "flavor": "server", "modules": "proprietary" }'
	gp --root "$R" verify --profile "$P" --only driver
	assert_status 3
	assert_stdout_has "hint: no NVIDIA driver is installed: run 'gpuprov install --profile $P --only driver --root "
	refute_stdout_has "DKMS could not build"
}

# --- preflight while nouveau is loaded (every fresh server) ---------------

# nouveau_drv_profile JSON-OF-THE-DRIVER-STAGE: $P with the nouveau stage
# before the driver, as every real profile has it.
nouveau_drv_profile() {
	P=$BATS_TEST_TMPDIR/drv.json
	cat > "$P" <<JSON
{
  "name": "drv-test",
  "extends": "distro/ubuntu2204",
  "stages": { "nouveau": {}, "driver": $1 }
}
JSON
}

@test "driver preflight: with nouveau loaded, a driver blocker stops install before nouveau changes" {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau loaded --pkg-stubs --secure-boot on --mok-enrolled "$MOK/other.der"
	mkdir -p "$R$MOK_DIR"
	cp "$MOK/MOK.priv" "$MOK/MOK.der" "$R$MOK_DIR/"
	nouveau_drv_profile "$MOK_APT"
	assert_blocked "driver: Secure Boot is on and the MOK certificate $MOK_DIR/MOK.der is not enrolled"
	[ ! -e "$R/etc/modprobe.d/blacklist-nouveau.conf" ] || fail "the nouveau blacklist was written"
	# The plan says so too, instead of "runs after the pending reboot".
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "driver: blocked - Secure Boot is on and the MOK certificate"
}

@test "driver preflight: with nouveau loaded and no blocker, nouveau goes first and the driver waits for the reboot" {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau loaded --pkg-stubs
	nouveau_drv_profile "$APT535"
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "driver: waiting for reboot - runs after the pending reboot"
	gp --root "$R" install --profile "$P"
	assert_status 5
	[ -e "$R/etc/modprobe.d/blacklist-nouveau.conf" ] || fail "no nouveau blacklist"
	[ "$(json_get "$R/var/lib/gpuprov/state.json" 'd["stages"]["driver"]["state"]')" != done ] ||
		fail "the driver was installed before the reboot"
}
