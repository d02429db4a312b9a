#!/usr/bin/env bats
# Drift (src/stages/drift.c, docs/findings.md "Drift"): verify reports how a
# root moved away from what the last install left there, each finding with
# its id "<stage>.drift_<kind>[.<subject>]" and a hint naming the repair;
# install repairs it, marks those changes corrective in its plan (the
# profile's own changes intentional) and backs a hand-edited file up first.
# Busybox fixture roots (mkroot.sh), stub apt for packages and holds, and
# the loopback cuDNN tarball of cudnn.bats.

load helpers

teardown() {
	stop_https_server
}

# drift_ids ARGS...: the drift findings of 'gpuprov ARGS... --json verify',
# one "ID LEVEL" a line, into $output (exit status of verify in $status).
drift_ids() {
	gp "$@" --json
	assert_documented_status
	JSON=$BATS_TEST_TMPDIR/verify.json
	printf '%s\n' "$output" > "$JSON"
	output=$("$PYTHON" -c 'import json, sys
for f in json.load(open(sys.argv[1]))["findings"]:
    if ".drift_" in f["id"]:
        print(f["id"], f["level"])' "$JSON")
}

# drift_hint ID: the hint of finding ID in the last drift_ids report.
drift_hint() {
	"$PYTHON" -c 'import json, sys
print(*[f["hint"] for f in json.load(open(sys.argv[1]))["findings"] if f["id"] == sys.argv[2]])' \
		"$JSON" "$1"
}

assert_no_drift() {
	[ -z "$output" ] || fail "drift on a clean root:" "$output"
}

# The nouveau and env stages installed on the Ubuntu fixture.
installed_root() {
	setup_ubuntu_root
	install_ubuntu
	assert_status 5
}

VERIFY_UBUNTU=(verify --profile "$PROFILE" --only "$ONLY")

@test "drift: a fresh root and a root just installed report none" {
	setup_ubuntu_root
	drift_ids --root "$R" "${VERIFY_UBUNTU[@]}"
	assert_no_drift
	install_ubuntu
	drift_ids --root "$R" "${VERIFY_UBUNTU[@]}"
	assert_no_drift
}

@test "drift: a file edited, removed, or given another mode is reported with its id and hint" {
	installed_root
	echo "# a colleague was here" >> "$R/etc/modprobe.d/blacklist-nouveau.conf"
	rm "$R/etc/ld.so.conf.d/gpuprov-cuda.conf"
	chmod 0600 "$R/etc/profile.d/gpuprov-cuda.sh"
	drift_ids --root "$R" "${VERIFY_UBUNTU[@]}"
	assert_status 3
	[ "$output" = "nouveau.drift_file_edited.etc_modprobe_d_blacklist_nouveau_conf warn
env.drift_file_mode.etc_profile_d_gpuprov_cuda_sh warn
env.drift_file_removed.etc_ld_so_conf_d_gpuprov_cuda_conf fail" ] || fail "drift findings:" "$output"
	local repair="gpuprov install --profile $PROFILE --only nouveau --root $R"
	[ "$(drift_hint nouveau.drift_file_edited.etc_modprobe_d_blacklist_nouveau_conf)" = \
		"'$repair' restores it; the edited copy is backed up to /var/lib/gpuprov/backup first" ] ||
		fail "hint: $(drift_hint nouveau.drift_file_edited.etc_modprobe_d_blacklist_nouveau_conf)"
	drift_hint env.drift_file_removed.etc_ld_so_conf_d_gpuprov_cuda_conf |
		grep -qF "'gpuprov install --profile $PROFILE --only env --root $R' writes it again" ||
		fail "hint: $(drift_hint env.drift_file_removed.etc_ld_so_conf_d_gpuprov_cuda_conf)"
	drift_hint env.drift_file_mode.etc_profile_d_gpuprov_cuda_sh | grep -qF "sets them back" ||
		fail "hint: $(drift_hint env.drift_file_mode.etc_profile_d_gpuprov_cuda_sh)"
}

@test "drift: install after a hand edit plans it as corrective, backs the edited copy up and restores the file" {
	installed_root
	local f=etc/modprobe.d/blacklist-nouveau.conf
	cp "$R/$f" "$BATS_TEST_TMPDIR/written"
	echo "# a colleague was here" >> "$R/$f"
	cp "$R/$f" "$BATS_TEST_TMPDIR/edited"
	chmod 0600 "$R/etc/profile.d/gpuprov-cuda.sh"
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	assert_stdout_has "nouveau: needed - "
	assert_stdout_has "drift: /$f edited since gpuprov wrote it"
	assert_stdout_has "      corrective: drift back to the profile the last install applied"
	assert_stdout_line "      replace /$f (corrective: edited since gpuprov wrote it; the edited copy is backed up first, mode 0644)"
	assert_stdout_has "env: needed - drift: /etc/profile.d/gpuprov-cuda.sh changed mode or owner since gpuprov wrote it"
	gp --root "$R" --json plan --profile "$PROFILE" --only "$ONLY"
	JSON=$BATS_TEST_TMPDIR/plan.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[e["change"] for s in d["stages"] for e in s["effects"] if e.get("path") == "/'"$f"'"]' '["corrective"]'
	jeq '[e.get("edited") for s in d["stages"] for e in s["effects"] if e.get("path") == "/'"$f"'"]' '[true]'
	jeq 'sorted({e["change"] for s in d["stages"] for e in s["effects"]})' '["corrective"]'
	install_ubuntu
	assert_status 5
	cmp -s "$R/$f" "$BATS_TEST_TMPDIR/written" || fail "not restored:" "$(cat "$R/$f")"
	cmp -s "$R/var/lib/gpuprov/backup/$f" "$BATS_TEST_TMPDIR/edited" ||
		fail "the edited copy is not in the backup:" "$(ls -lR "$R/var/lib/gpuprov/backup")"
	[ "$(stat -c %a "$R/etc/profile.d/gpuprov-cuda.sh")" = 644 ] || fail "mode not restored"
	drift_ids --root "$R" "${VERIFY_UBUNTU[@]}"
	assert_no_drift
}

@test "drift: a changed profile makes its changes intentional, not corrective" {
	installed_root
	P=$BATS_TEST_TMPDIR/vars.json
	cat > "$P" <<JSON
{ "name": "vars", "extends": "$PROFILE",
  "stages": { "env": { "vars": { "NCCL_DEBUG": "INFO" } } } }
JSON
	gp --root "$R" plan --profile "$P" --only env
	assert_status 0
	assert_stdout_has "      intentional: the profile changed since the last install"
	refute_stdout_has "corrective"
	gp --root "$R" --json plan --profile "$P" --only env
	JSON=$BATS_TEST_TMPDIR/plan.json
	printf '%s\n' "$output" > "$JSON"
	jeq 'sorted({e["change"] for s in d["stages"] for e in s["effects"]})' '["intentional"]'
}

@test "drift: a journal without the drift records (an older gpuprov) still loads and reports no mode drift" {
	installed_root
	"$PYTHON" - "$R/var/lib/gpuprov/state.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for f in j["files"].values():
    f.pop("mode", None); f.pop("owner", None); f.pop("stat", None)
for s in j["stages"].values():
    s.pop("settings_sha256", None)
j.pop("packages", None)
json.dump(j, open(sys.argv[1], "w"), indent=1)
EOF
	chmod 0600 "$R/etc/profile.d/gpuprov-cuda.sh"
	drift_ids --root "$R" "${VERIFY_UBUNTU[@]}"
	assert_no_drift
	echo "# edited" >> "$R/etc/ld.so.conf.d/gpuprov-cuda.conf"
	drift_ids --root "$R" "${VERIFY_UBUNTU[@]}"
	[ "$output" = "env.drift_file_edited.etc_ld_so_conf_d_gpuprov_cuda_conf warn" ] ||
		fail "drift findings:" "$output"
	# Same profile digest as recorded: corrective without settings_sha256 too.
	gp --root "$R" plan --profile "$PROFILE" --only env
	assert_stdout_has "corrective: drift back to the profile"
}

@test "drift: a journal's package record of the wrong type is refused as corrupt" {
	installed_root
	"$PYTHON" - "$R/var/lib/gpuprov/state.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["packages"] = {"nvidia-driver-535-server": {"version": "1", "stage": "driver", "held": "yes"}}
json.dump(j, open(sys.argv[1], "w"), indent=1)
EOF
	gp --root "$R" status
	assert_status 65
	assert_stderr_has '"/packages/nvidia-driver-535-server/held" must be true or false, not a string'
}

# --- packages and holds (stub apt and apt-mark) -----------------------------

drv_root() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau unloaded --pkg-stubs
	P=$BATS_TEST_TMPDIR/drv.json
	cat > "$P" <<'JSON'
{ "name": "drv-test", "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "branch": "535", "flavor": "server",
                          "modules": "proprietary", "hold": true } } }
JSON
	gp --root "$R" install --profile "$P"
	assert_status 5
}

@test "drift: a driver package moved by an upgrade and a lifted hold are reported; install holds it again; a removed one fails" {
	drv_root
	drift_ids --root "$R" verify --profile "$P"
	assert_no_drift
	# An unattended upgrade: unheld, then a newer version.
	chroot "$R" apt-mark unhold nvidia-driver-535-server >/dev/null
	sed -i '/^Package: nvidia-driver-535-server$/,/^$/s/^Version: .*/Version: 535.216.01-0ubuntu1/' \
		"$R/var/lib/dpkg/status"
	drift_ids --root "$R" verify --profile "$P"
	[ "$output" = "driver.drift_package_version.nvidia_driver_535_server warn
driver.drift_hold_lifted.nvidia_driver_535_server warn" ] || fail "drift findings:" "$output"
	drift_hint driver.drift_package_version.nvidia_driver_535_server |
		grep -qF "'gpuprov install --profile $P --only driver --root $R' brings nvidia-driver-535-server back to the profile" ||
		fail "hint: $(drift_hint driver.drift_package_version.nvidia_driver_535_server)"
	drift_hint driver.drift_hold_lifted.nvidia_driver_535_server | grep -qF "holds it again" ||
		fail "hint: $(drift_hint driver.drift_hold_lifted.nvidia_driver_535_server)"
	grep -q '"version": "535.216.01' "$R/var/lib/gpuprov/state.json" &&
		fail "verify changed the journal"
	# install holds it again; the branch's newer release is what the
	# profile accepts, so it is the next verify's baseline.
	gp --root "$R" install --profile "$P"
	assert_documented_status
	assert_stdout_has "not held: nvidia-driver-535-server"
	grep -A1 '^Package: nvidia-driver-535-server$' "$R/var/lib/dpkg/status" |
		grep -q 'Status: hold ok installed' || fail "not held again: $(cat "$R/var/lib/dpkg/status")"
	drift_ids --root "$R" verify --profile "$P"
	assert_no_drift
	# Removed altogether: that fails.
	sed -i '/^Package: nvidia-dkms-535-server$/,/^$/d' "$R/var/lib/dpkg/status"
	drift_ids --root "$R" verify --profile "$P"
	assert_status 3
	echo "$output" | grep -qx "driver.drift_package_version.nvidia_dkms_535_server fail" ||
		fail "drift findings:" "$output"
}

# --- the driver across kernels and libraries --------------------------------

KVER=5.15.0-91-generic
NEWER=5.15.0-94-generic

@test "drift: a newer kernel without an NVIDIA module fails with the DKMS hint; none once it has one" {
	setup_ubuntu_root
	local verify=(verify --profile "$PROFILE" --only driver)
	mkdir -p "$R/lib/modules/$KVER/updates/dkms"
	: > "$R/lib/modules/$KVER/updates/dkms/nvidia.ko.zst"
	drift_ids --root "$R" "${verify[@]}"
	assert_no_drift
	mkdir -p "$R/lib/modules/$NEWER/kernel/drivers"
	echo vmlinuz > "$R/boot/vmlinuz-$NEWER"
	drift_ids --root "$R" "${verify[@]}"
	assert_status 3
	[ "$output" = "driver.drift_kernel_module_missing.5_15_0_94_generic fail" ] ||
		fail "drift findings:" "$output"
	drift_hint driver.drift_kernel_module_missing.5_15_0_94_generic |
		grep -qF "dkms autoinstall -k $NEWER" || fail "hint: $(drift_hint driver.drift_kernel_module_missing.5_15_0_94_generic)"
	# Ubuntu's prebuilt module package puts it under kernel/.
	mkdir -p "$R/lib/modules/$NEWER/kernel/nvidia-535srv"
	: > "$R/lib/modules/$NEWER/kernel/nvidia-535srv/nvidia.ko"
	drift_ids --root "$R" "${verify[@]}"
	assert_no_drift
	# An older kernel without one is not the next boot.
	mkdir -p "$R/lib/modules/5.15.0-80-generic"
	echo vmlinuz > "$R/boot/vmlinuz-5.15.0-80-generic"
	drift_ids --root "$R" "${verify[@]}"
	assert_no_drift
}

@test "drift: install builds the DKMS module for a newer kernel before the reboot into it" {
	drv_root
	# The driver works for the running kernel: module built and loaded.
	mkdir -p "$R/lib/modules/$KVER/updates/dkms" "$R/sys/bus/pci/drivers/nvidia"
	: > "$R/lib/modules/$KVER/updates/dkms/nvidia.ko"
	nvidia_driver 535.183.01
	echo "nvidia 56000000 0 - Live 0x0" >> "$R/proc/modules"
	ln -sfn ../../../bus/pci/drivers/nvidia "$R/$GPU_DEV/driver"
	new_boot_id "$R"
	gp --root "$R" install --profile "$P"
	assert_status 0
	# An unattended upgrade installs a newer kernel, with its headers.
	mkdir -p "$R/lib/modules/$NEWER" "$R/usr/src/linux-headers-$NEWER"
	echo vmlinuz > "$R/boot/vmlinuz-$NEWER"
	cat > "$R/usr/sbin/dkms" <<'SH'
#!/bin/sh
echo "/usr/sbin/dkms $*" >> /var/log/stub-commands.log
[ "$1 $2" = "autoinstall -k" ] || exit 2
mkdir -p "/lib/modules/$3/updates/dkms" && : > "/lib/modules/$3/updates/dkms/nvidia.ko"
SH
	chmod 0755 "$R/usr/sbin/dkms"
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "driver: needed - driver 535.183.01 installed, but no nvidia module for the newer kernel $NEWER; DKMS builds it"
	assert_stdout_line "      corrective: drift back to the profile the last install applied"
	assert_stdout_line "      run dkms autoinstall -k $NEWER"
	gp --root "$R" install --profile "$P"
	assert_status 0
	grep -qx "/usr/sbin/dkms autoinstall -k $NEWER" "$R/var/log/stub-commands.log" ||
		fail "dkms did not run: $(stub_log "$R")"
	drift_ids --root "$R" verify --profile "$P" --only driver
	assert_no_drift
}

@test "drift: the loaded module and the user-space libraries at different versions fail; the hint is the reboot" {
	setup_ubuntu_root
	local verify=(verify --profile "$PROFILE" --only driver) lib=$R/usr/lib/x86_64-linux-gnu
	nvidia_driver 535.183.01
	mkdir -p "$lib"
	: > "$lib/libnvidia-ml.so.535.183.01"
	ln -s libnvidia-ml.so.535.183.01 "$lib/libnvidia-ml.so.1"
	drift_ids --root "$R" "${verify[@]}"
	assert_no_drift
	rm "$lib/libnvidia-ml.so.535.183.01" "$lib/libnvidia-ml.so.1"
	: > "$lib/libnvidia-ml.so.535.216.01"
	ln -s libnvidia-ml.so.535.216.01 "$lib/libnvidia-ml.so.1"
	drift_ids --root "$R" "${verify[@]}"
	assert_status 3
	[ "$output" = "driver.drift_driver_library_mismatch fail" ] || fail "drift findings:" "$output"
	drift_hint driver.drift_driver_library_mismatch | grep -q "^reboot to load the new module" ||
		fail "hint: $(drift_hint driver.drift_driver_library_mismatch)"
}

# --- cuDNN ------------------------------------------------------------------

@test "drift: a cuDNN library replaced or removed fails as cudnn_file" {
	setup_cudnn_root
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	local verify=(verify --profile "$P" --only cudnn) dir=$R/usr/local/cuda-11.8/cudnn-8.9.7.29
	drift_ids --root "$R" "${verify[@]}"
	assert_no_drift
	[ -f "$dir/lib/libcudnn.so.8.9.7" ] || fail "no library at $dir/lib: $(ls -R "$dir")"
	echo "replaced" > "$dir/lib/libcudnn.so.8.9.7"
	rm "$dir/include/cudnn.h"
	drift_ids --root "$R" "${verify[@]}"
	assert_status 3
	echo "$output" | grep -qx "cudnn.drift_cudnn_file.usr_local_cuda_11_8_cudnn_8_9_7_29_lib_libcudnn_so_8_9_7 fail" ||
		fail "drift findings:" "$output"
	echo "$output" | grep -qx "cudnn.drift_cudnn_file.usr_local_cuda_11_8_cudnn_8_9_7_29_include_cudnn_h fail" ||
		fail "drift findings:" "$output"
	drift_hint cudnn.drift_cudnn_file.usr_local_cuda_11_8_cudnn_8_9_7_29_include_cudnn_h |
		grep -qF "'gpuprov install --profile $P --only cudnn --root $R' writes it again" ||
		fail "hint: $(drift_hint cudnn.drift_cudnn_file.usr_local_cuda_11_8_cudnn_8_9_7_29_include_cudnn_h)"
}
