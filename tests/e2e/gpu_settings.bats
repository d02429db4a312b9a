#!/usr/bin/env bats
# Stage gpu_settings end to end on busybox fixture roots (mkroot.sh, the
# A100 Ubuntu root) with the stand-in NVML of tests/fixtures/fakenv/
# (fakenvml.c, fakenvml_settings.c, fakenvml_clocks.c and fakenvml_reset.c, one
# libnvidia-ml.so.1): its settings and limits in the root's
# /etc/fakenvml-settings.conf, which its setters write back, so a test reads
# what was set; its supported clocks in /etc/fakenvml-clocks.conf. The boot unit's ExecStart is
# run by the test against the root, as systemd would run it at boot, and
# the unit and the persistence drop-in go through the real systemd-analyze
# verify (Debian's systemd package, in TEST_DEPS).

load helpers

FAKENV=$REPO_ROOT/tests/fixtures/fakenv
LIBDIR=usr/lib/x86_64-linux-gnu
UNIT=etc/systemd/system/gpuprov-gpu-settings.service
DROPIN=etc/systemd/system/nvidia-persistenced.service.d/gpuprov.conf
STATE=etc/fakenvml-settings.conf

setup_file() {
	mkdir -p "$BATS_FILE_TMPDIR/fakenv"
	cc -shared -fPIC -o "$BATS_FILE_TMPDIR/fakenv/libnvidia-ml.so.1" \
		-Wl,-soname,libnvidia-ml.so.1 "$FAKENV/fakenvml.c" "$FAKENV/fakenvml_settings.c" \
		"$FAKENV/fakenvml_clocks.c" "$FAKENV/fakenvml_reset.c" ||
		fail "cannot build the fake NVML"
}

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R"
	mkdir -p "$R/$LIBDIR"
	cp "$BATS_FILE_TMPDIR/fakenv/libnvidia-ml.so.1" "$R/$LIBDIR/"
	# Two H100 GPUs, persistence on (the daemon runs), NVML's H100 SXM limits.
	printf '%s\n' mode=ok count=2 "name=NVIDIA H100 80GB HBM3" persistence=1 > "$R/etc/fakenv.conf"
	printf '%s\n' power_min_mw=200000 power_max_mw=700000 power_default_mw=700000 \
		power_limit_mw=700000 compute_mode=0 ecc_current=1 ecc_pending=1 > "$R/$STATE"
	P=$BATS_TEST_TMPDIR/p.json
	profile '"power_limit_watts": 600, "compute_mode": "exclusive_process", "application_clock_memory_mhz": 2619, "application_clock_graphics_mhz": 1980, "ecc": true'
}

# profile MEMBERS: $P, the A100 Ubuntu profile with these gpu_settings.
profile() {
	cat > "$P" <<JSON
{ "name": "gpu-settings-test", "extends": "a100-ubuntu2204",
  "stages": { "gpu_settings": { $1 } } }
JSON
}

# state KEY: the fake NVML's value of KEY.
state() {
	sed -n "s/^$1=//p" "$R/$STATE"
}

# boot_unit: runs the boot unit's ExecStart against the root, as systemd
# would at boot (the installed binary's path replaced by the one under test).
boot_unit() {
	local cmd
	cmd=$(sed -n 's|^ExecStart=[^ ]*/gpuprov ||p' "$R/$UNIT")
	[ -n "$cmd" ] || fail "no gpuprov ExecStart in $R/$UNIT:" "$(cat "$R/$UNIT")"
	# shellcheck disable=SC2086 # the unit's words, as systemd splits them
	gp --root "$R" $cmd
}

@test "gpu_settings: the plan shows the drop-in, the boot unit with the values and the wants links; it changes nothing" {
	snapshot "$R" before
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_status 0
	assert_stdout_has "gpu_settings: needed"
	assert_stdout_has "+ExecStart=/usr/bin/nvidia-persistenced --verbose"
	assert_stdout_has "+ExecStart="$'\n'
	assert_stdout_has "+After=nvidia-persistenced.service"
	assert_stdout_has "gpuprov gpu-settings apply power_limit_w=600 application_clocks_mhz=2619,1980 compute_mode=exclusive_process ecc=on"
	assert_stdout_has "symlink /etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service -> /usr/lib/systemd/system/nvidia-persistenced.service"
	assert_stdout_has "symlink /etc/systemd/system/multi-user.target.wants/gpuprov-gpu-settings.service -> /etc/systemd/system/gpuprov-gpu-settings.service"
	refute_stdout_has "systemctl"
	assert_unchanged "$R" before
	[ ! -e "$R/var/log/fakenvml.log" ] || fail "the plan called an NVML setter:" "$(cat "$R/var/log/fakenvml.log")"
}

@test "gpu_settings: a power limit outside the GPU's limits is refused at plan and install, nothing written" {
	profile '"power_limit_watts": 800'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "gpu_settings: blocked - GPU 0 (NVIDIA H100 80GB HBM3): a power limit of 800 W lies outside the GPU's limits, 200..700 W; set stages.gpu_settings.power_limit_watts within them"
	snapshot "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 4
	assert_unchanged "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	# A fraction of the default limit is held to the same limits.
	profile '"power_limit_fraction": 0.2'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "blocked - GPU 0 (NVIDIA H100 80GB HBM3): a power limit of 0.2 of the default 700 W (140 W) lies outside the GPU's limits, 200..700 W; set stages.gpu_settings.power_limit_fraction within them"
	# Settings that contradict each other are refused before NVML is asked.
	profile '"power_limit_watts": 600, "power_limit_fraction": 0.9'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "blocked - stages.gpu_settings.power_limit_watts and power_limit_fraction are both set; keep one"
}

@test "gpu_settings: application clocks must be a pair NVML lists as supported, refused at plan and install, nothing written" {
	printf '%s\n' mem_clocks_mhz=2619,1593 gpu_clocks_mhz=1980,1755,1410 > "$R/etc/fakenvml-clocks.conf"
	profile '"application_clock_memory_mhz": 2619, "application_clock_graphics_mhz": 1755'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_status 0
	assert_stdout_has "gpu_settings: needed"
	profile '"application_clock_memory_mhz": 2619, "application_clock_graphics_mhz": 1800'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "gpu_settings: blocked - GPU 0 (NVIDIA H100 80GB HBM3): application clocks 2619,1800 MHz are not a pair the GPU supports (graphics clocks at memory 2619 MHz: 1980, 1755, 1410); set stages.gpu_settings.application_clock_graphics_mhz to one of them"
	snapshot "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 4
	assert_unchanged "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	[ ! -e "$R/var/log/fakenvml.log" ] || fail "a refused install called an NVML setter:" "$(cat "$R/var/log/fakenvml.log")"
	# A memory clock the GPU lacks names the memory clocks; a long list is
	# shortened (the fake's default: 1980 down to 345 MHz by 15).
	rm "$R/etc/fakenvml-clocks.conf"
	profile '"application_clock_memory_mhz": 1215, "application_clock_graphics_mhz": 1755'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "blocked - GPU 0 (NVIDIA H100 80GB HBM3): application clocks' memory clock 1215 MHz is not one the GPU supports (2619 MHz); set stages.gpu_settings.application_clock_memory_mhz to one of them"
	profile '"application_clock_memory_mhz": 2619, "application_clock_graphics_mhz": 1981'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "(graphics clocks at memory 2619 MHz: 1980, 1965, 1950, 1935, 1920, 1905, 1890, 1875, ..., 345 (110 in all)); set"
}

@test "gpu_settings: locked GPU clocks outside the supported graphics clocks are refused; a GPU whose NVML has no supported clocks refuses with the reason" {
	printf '%s\n' mem_clocks_mhz=2619,1593 gpu_clocks_mhz=1755,1410,210 max_gpu_clock_mhz=1980 > "$R/etc/fakenvml-clocks.conf"
	# The top is the GPU's max graphics clock, above the listed ones.
	profile '"locked_gpu_clock_min_mhz": 210, "locked_gpu_clock_max_mhz": 1980'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_status 0
	assert_stdout_has "gpu_settings: needed"
	profile '"locked_gpu_clock_min_mhz": 1410, "locked_gpu_clock_max_mhz": 2100'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "gpu_settings: blocked - GPU 0 (NVIDIA H100 80GB HBM3): locked GPU clocks 1410..2100 MHz lie outside the GPU's graphics clocks, 210..1980 MHz; set stages.gpu_settings.locked_gpu_clock_min_mhz and locked_gpu_clock_max_mhz within them"
	snapshot "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 4
	assert_unchanged "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	# NVML_ERROR_NOT_SUPPORTED (3): a GPU without these clocks.
	printf '%s\n' clocks_rc=3 > "$R/etc/fakenvml-clocks.conf"
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "blocked - GPU 0 (NVIDIA H100 80GB HBM3): NVML lists no supported clocks for this GPU (nvmlDeviceGetSupportedMemoryClocks: Not Supported); leave stages.gpu_settings.locked_gpu_clock_min_mhz and locked_gpu_clock_max_mhz out of the profile for this GPU"
	profile '"application_clock_memory_mhz": 2619, "application_clock_graphics_mhz": 1755'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "blocked - GPU 0 (NVIDIA H100 80GB HBM3): NVML lists no supported clocks for this GPU (nvmlDeviceGetSupportedMemoryClocks: Not Supported); leave stages.gpu_settings.application_clock_memory_mhz and application_clock_graphics_mhz out of the profile for this GPU"
}

@test "gpu_settings: install writes the files, the boot unit sets the values through NVML, verify passes, a rerun changes nothing" {
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	[ "$(readlink "$R/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service")" = /usr/lib/systemd/system/nvidia-persistenced.service ] ||
		fail "nvidia-persistenced not enabled"
	[ "$(readlink "$R/etc/systemd/system/multi-user.target.wants/gpuprov-gpu-settings.service")" = "/$UNIT" ] ||
		fail "the boot unit not enabled"
	[ ! -e "$R/var/log/fakenvml.log" ] || fail "install under --root called an NVML setter:" "$(cat "$R/var/log/fakenvml.log")"
	# Before the unit ran, verify says so (not drift).
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_status 3
	assert_stdout_has "fail  GPU 0 power limit: enforced power limit 700 W; the profile wants 600 W"
	assert_stdout_has "gpuprov-gpu-settings.service has not set it since the boot"
	refute_stdout_has "drift"
	boot_unit
	assert_status 0
	assert_stdout_has "GPU 0: power limit 600 W: Success"
	assert_stdout_has "GPU 1: compute mode exclusive_process: Success"
	[ "$(state power_limit_mw)" = 600000 ] && [ "$(state compute_mode)" = 3 ] &&
		[ "$(state app_mem_mhz)" = 2619 ] && [ "$(state app_gpu_mhz)" = 1980 ] ||
		fail "the fake NVML's state:" "$(cat "$R/$STATE")"
	# ECC was on already: not set again.
	! grep -q nvmlDeviceSetEccMode "$R/var/log/fakenvml.log" || fail "ECC set again"
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_status 0
	assert_stdout_has "pass  GPU 1 application clocks"
	assert_stdout_has "pass  GPU 0 ECC: ECC on, pending on; the profile wants on"
	assert_stdout_has "pass  drift: every value is as gpuprov-gpu-settings.service set it at this boot"
	snapshot "$R" installed var/lib/gpuprov/journal.json var/log/gpuprov.log
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	assert_stdout_has "gpu_settings: satisfied"
	assert_unchanged "$R" installed var/lib/gpuprov/journal.json var/log/gpuprov.log
}

@test "gpu_settings: a value changed after the boot unit set it is drift" {
	gp --root "$R" install --profile "$P" --only gpu_settings
	boot_unit
	assert_status 0
	# Someone runs nvidia-smi -c 0 and -pl 650.
	sed -i -e 's/^compute_mode=.*/compute_mode=0/' -e 's/^power_limit_mw=.*/power_limit_mw=650000/' "$R/$STATE"
	gp --root "$R" --json verify --profile "$P" --only gpu_settings
	assert_status 3
	"$PYTHON" -c 'import json, sys
f = {f["id"]: f for f in json.loads(sys.argv[1])["findings"]}
d = f["gpu_settings.drift"]
assert d["level"] == "fail", d
assert "GPU 0 power limit, GPU 0 compute mode, GPU 1 power limit, GPU 1 compute mode" in d["evidence"], d
c = f["gpu_settings.compute_mode.gpu_0"]
assert c["level"] == "fail" and "changed by someone else" in c["hint"], c
assert f["gpu_settings.application_clocks.gpu_0"]["level"] == "pass"' "$output" ||
		fail "drift findings:" "$output"
}

@test "gpu_settings: locked clocks are set by the boot unit; verify says NVML cannot read them back, whatever they are now" {
	profile '"locked_gpu_clock_min_mhz": 1200, "locked_gpu_clock_max_mhz": 1980'
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	boot_unit
	assert_status 0
	assert_stdout_has "GPU 0: locked GPU clocks 1200..1980 MHz: Success"
	[ "$(state locked_min_mhz)" = 1200 ] && [ "$(state locked_max_mhz)" = 1980 ] || fail "state:" "$(cat "$R/$STATE")"
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_status 0
	assert_stdout_has "skip  locked GPU clocks: locked clocks cannot be read back through NVML; checked at apply only"
	# Someone else resets them (nvidia-smi -rgc): verify cannot tell, and
	# says the same, not a pass.
	sed -i -e 's/^locked_min_mhz=.*/locked_min_mhz=0/' -e 's/^locked_max_mhz=.*/locked_max_mhz=0/' "$R/$STATE"
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_stdout_has "skip  locked GPU clocks: locked clocks cannot be read back through NVML; checked at apply only"
	refute_stdout_has "pass  locked"
	# Without locked clocks in the profile, no such finding.
	profile '"power_limit_watts": 600'
	gp --root "$R" verify --profile "$P" --only gpu_settings
	refute_stdout_has "locked GPU clocks"
}

@test "gpu_settings: an ECC change is pending until a reboot: reboot pending, then verify passes after it" {
	profile '"ecc": false'
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	boot_unit
	assert_status 0
	assert_stdout_has "GPU 0: ECC off (pending until a reboot): Success"
	[ "$(state ecc_current)" = 1 ] && [ "$(state ecc_pending)" = 0 ] || fail "ECC state:" "$(cat "$R/$STATE")"
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "gpu_settings: reboot pending - GPU 0: ECC on, off pending until a reboot"
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_stdout_has "warn  GPU 0 ECC: ECC on, pending off; the profile wants off"
	assert_stdout_has "hint: reboot: the pending ECC mode becomes current"
	# The reboot: the pending mode becomes current, /run is emptied.
	sed -i 's/^ecc_current=.*/ecc_current=0/' "$R/$STATE"
	rm -rf "$R/run/gpuprov"
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_stdout_has "gpu_settings: satisfied"
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_stdout_has "pass  GPU 1 ECC: ECC off, pending off"
}

@test "gpu_settings: the boot unit sets a fraction of the default limit; a setter NVML refuses fails the unit and leaves no record" {
	profile '"power_limit_fraction": 0.5, "compute_mode": "prohibited"'
	gp --root "$R" install --profile "$P" --only gpu_settings
	grep -q '^ExecStart=.* gpu-settings apply power_limit_fraction=0.5 compute_mode=prohibited$' "$R/$UNIT" ||
		fail "ExecStart:" "$(grep ExecStart "$R/$UNIT")"
	echo fail=nvmlDeviceSetComputeMode >> "$R/$STATE"
	boot_unit
	assert_status 1
	assert_stdout_has "GPU 0: power limit 350 W: Success"
	assert_stdout_has "GPU 0: not set: compute mode prohibited:"
	assert_stderr_has "gpu-settings apply: 2 settings not set"
	[ "$(state power_limit_mw)" = 350000 ] || fail "power limit:" "$(cat "$R/$STATE")"
	[ ! -e "$R/run/gpuprov/gpu-settings.applied" ] || fail "a record of a failed apply"
	# Words the unit never holds are refused before NVML is asked.
	gp --root "$R" gpu-settings apply power_limit_w=600 power_limit_fraction=0.5
	assert_status 65
	assert_stderr_has "power_limit_w and power_limit_fraction both given; give one"
	gp --root "$R" gpu-settings apply 'compute_mode=exclusive'
	assert_status 65
	assert_stderr_has "setting 'compute_mode=exclusive': the value is not one gpuprov writes"
}

@test "gpu_settings: systemd-analyze verify accepts the boot unit and the drop-in, which replaces the packaged ExecStart" {
	command -v systemd-analyze > /dev/null || fail "no systemd-analyze (Debian's systemd package, in TEST_DEPS)"
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	local t=$BATS_TEST_TMPDIR/units
	mkdir -p "$t/bin" "$t/nvidia-persistenced.service.d"
	cp "$GPUPROV" "$t/bin/gpuprov"
	printf '#!/bin/sh\n' > "$t/bin/nvidia-persistenced"
	chmod +x "$t/bin/nvidia-persistenced"
	sed "s|^ExecStart=/.*/gpuprov |ExecStart=$t/bin/gpuprov |" "$R/$UNIT" > "$t/gpuprov-gpu-settings.service"
	# Ubuntu's packaged unit, which turns persistence off.
	printf '%s\n' '[Unit]' 'Description=NVIDIA Persistence Daemon' '[Service]' 'Type=forking' \
		'ExecStart=/bin/true --user nvidia-persistenced --no-persistence-mode --verbose' \
		> "$t/nvidia-persistenced.service"
	cp "$R/$DROPIN" "$t/nvidia-persistenced.service.d/gpuprov.conf"
	SYSTEMD_UNIT_PATH=$t: run systemd-analyze verify --man=no --recursive-errors=no \
		"$t/gpuprov-gpu-settings.service"
	[ "$status" -eq 0 ] && [ -z "$output" ] || fail "systemd-analyze verify of the unit (exit $status):" "$output"
	# The drop-in's command replaces the packaged one: systemd looks for it.
	SYSTEMD_UNIT_PATH=$t: run systemd-analyze verify --man=no --recursive-errors=no "$t/nvidia-persistenced.service"
	[[ "$output" == *"Command /usr/bin/nvidia-persistenced is not executable"* ]] ||
		fail "the drop-in's ExecStart was not used:" "$output"
	sed -i "s|/usr/bin/nvidia-persistenced|$t/bin/nvidia-persistenced|" "$t/nvidia-persistenced.service.d/gpuprov.conf"
	SYSTEMD_UNIT_PATH=$t: run systemd-analyze verify --man=no --recursive-errors=no "$t/nvidia-persistenced.service"
	[ "$status" -eq 0 ] && [ -z "$output" ] || fail "systemd-analyze verify with the drop-in (exit $status):" "$output"
	grep -qx 'ExecStart=' "$R/$DROPIN" || fail "the drop-in does not reset ExecStart"
	! grep -v '^#' "$R/$DROPIN" | grep -q -- --no-persistence-mode || fail "the drop-in keeps --no-persistence-mode"
}

@test "gpu_settings: verify without NVML fails gpu_settings.nvml with the reason" {
	rm "$R/$LIBDIR/libnvidia-ml.so.1"
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_status 3
	assert_stdout_has "fail  NVML: cannot read the GPUs' settings: libnvidia-ml.so.1 does not load"
}

# in_root_as_host ARGS...: gpuprov ARGS... chrooted into the root, which is
# then its live host (as_live_host in helpers.bash).
in_root_as_host() {
	as_live_host "$R" "$@"
}

# live_host_stand_ins: after a plan on the live host ($output), a
# stand-in systemctl that logs its argv and, as systemd would, runs the
# boot unit's ExecStart when asked to restart it; the installed binary's
# path there (BINDIR, from the plan's ExecStart) leads to the one under
# test, for the unit and for uninstall's reset alike.
live_host_stand_ins() {
	cat > "$R/usr/bin/systemctl" <<'SH'
#!/bin/busybox sh
echo "$*" >> /var/log/systemctl-stand-in.log
[ "$*" = "restart gpuprov-gpu-settings.service" ] || exit 0
exec $(sed -n 's/^ExecStart=//p' /etc/systemd/system/gpuprov-gpu-settings.service) >> /var/log/boot-unit.log 2>&1
SH
	local bin
	bin=$(printf '%s\n' "$output" | sed -n 's|^ *+ExecStart=\(/.*\)/gpuprov gpu-settings .*|\1|p')
	[ -n "$bin" ] || fail "no ExecStart in the plan:" "$output"
	mkdir -p "$R$bin"
	printf '#!/bin/busybox sh\nexec /lib64/ld-linux-x86-64.so.2 --library-path /opt/gpuprov-test/lib /opt/gpuprov-test/gpuprov "$@"\n' > "$R$bin/gpuprov"
	chmod 0755 "$R/usr/bin/systemctl" "$R$bin/gpuprov"
}

@test "gpu_settings: on the live host install restarts the daemon and starts the boot unit, which sets the values; an ECC change asks for a reboot" {
	profile '"power_limit_watts": 600, "ecc": false'
	cp "$P" "$R/tmp/p.json"
	# The driver's packaged unit (without it, nothing is restarted).
	mkdir -p "$R/usr/lib/systemd/system"
	printf '[Service]\nExecStart=/usr/bin/nvidia-persistenced --no-persistence-mode\n' \
		> "$R/usr/lib/systemd/system/nvidia-persistenced.service"
	in_root_as_host plan --profile /tmp/p.json --only gpu_settings
	assert_status 5
	assert_stdout_has "run systemctl daemon-reload"
	assert_stdout_has "run systemctl restart nvidia-persistenced.service"
	assert_stdout_has "run systemctl restart gpuprov-gpu-settings.service"
	assert_stdout_has "reboot required: an ECC or MIG mode change is pending until the GPUs are reset"
	live_host_stand_ins
	in_root_as_host install --profile /tmp/p.json --only gpu_settings
	assert_status 5
	[ "$(cat "$R/var/log/systemctl-stand-in.log")" = "daemon-reload
restart nvidia-persistenced.service
restart gpuprov-gpu-settings.service" ] || fail "systemctl calls:" "$(cat "$R/var/log/systemctl-stand-in.log")"
	# What the unit set, the only NVML setter calls.
	[ "$(cat "$R/var/log/fakenvml.log")" = "nvmlDeviceSetPowerManagementLimit 600000 0
nvmlDeviceSetEccMode 0 0
nvmlDeviceSetPowerManagementLimit 600000 0" ] || fail "NVML setter calls:" "$(cat "$R/var/log/fakenvml.log")"
	[ "$(state power_limit_mw)" = 600000 ] && [ "$(state ecc_pending)" = 0 ] || fail "state:" "$(cat "$R/$STATE")"
}

@test "gpu_settings: an NVML without the power-limit functions does not block the stage; verify and the boot unit say what is missing" {
	# The driver tests' stand-in NVML (fakenvml.c alone): no settings
	# functions, as an old or partial library would be.
	cc -shared -fPIC -o "$R/$LIBDIR/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 \
		"$FAKENV/fakenvml.c" || fail "cannot build the plain fake NVML"
	profile '"power_limit_watts": 600'
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	boot_unit
	assert_status 1
	assert_stdout_has "GPU 0: not set: power limit: NVML gives no power limits for this GPU"
	gp --root "$R" verify --profile "$P" --only gpu_settings
	assert_status 3
	assert_stdout_has "fail  GPU 0 power limit: NVML gives no power limits for this GPU"
}

@test "gpu_settings: an NVML without nvmlDeviceGetSupportedMemoryClocks leaves the clocks unchecked, said by check and by a skip of verify" {
	# The settings functions without fakenvml_clocks.c: an old library.
	cc -shared -fPIC -o "$R/$LIBDIR/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 \
		"$FAKENV/fakenvml.c" "$FAKENV/fakenvml_settings.c" || fail "cannot build the fake NVML"
	profile '"application_clock_memory_mhz": 2619, "application_clock_graphics_mhz": 1755'
	gp --root "$R" plan --profile "$P" --only gpu_settings
	assert_status 0
	assert_stdout_has "; GPU 0: the NVML library lacks nvmlDeviceGetSupportedMemoryClocks, so the profile's clocks cannot be checked against the ones the GPU supports"
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	boot_unit
	assert_status 0
	gp --root "$R" verify --profile "$P" --only gpu_settings --json
	printf '%s\n' "$output" | python3 -c '
import json, sys
ids = {f["id"]: f for f in json.load(sys.stdin)["findings"]}
for gpu in ("gpu_0", "gpu_1"):
    f = ids["gpu_settings.supported_clocks." + gpu]
    assert f["level"] == "skip" and "lacks nvmlDeviceGetSupportedMemoryClocks" in f["evidence"], f
' || fail "no skip gpu_settings.supported_clocks per GPU:" "$output"
}

@test "gpu_settings: on the live host uninstall gives the power limit, clocks and compute mode back to the defaults through NVML, as planned; ECC stays" {
	profile '"power_limit_watts": 600, "locked_gpu_clock_min_mhz": 1410, "locked_gpu_clock_max_mhz": 1980, "application_clock_memory_mhz": 2619, "application_clock_graphics_mhz": 1980, "compute_mode": "exclusive_process", "ecc": true'
	cp "$P" "$R/tmp/p.json"
	in_root_as_host plan --profile /tmp/p.json --only gpu_settings
	assert_status 0
	# The driver package's unit, so that the daemon restarts as planned.
	mkdir -p "$R/usr/lib/systemd/system"
	printf '[Service]\nExecStart=/usr/bin/nvidia-persistenced --no-persistence-mode\n' \
		> "$R/usr/lib/systemd/system/nvidia-persistenced.service"
	live_host_stand_ins
	in_root_as_host install --profile /tmp/p.json --only gpu_settings
	assert_status 0
	[ "$(state power_limit_mw) $(state locked_max_mhz) $(state app_gpu_mhz) $(state compute_mode)" = "600000 1980 1980 3" ] ||
		fail "the boot unit did not set the values:" "$(cat "$R/$STATE")"
	rm "$R/var/log/fakenvml.log"
	in_root_as_host uninstall --dry-run
	assert_status 0
	assert_stdout_has "gives the running GPUs' values back to their defaults through NVML: GPU 0: power limit 600 W -> 700 W (the default limit), locked GPU clocks -> unlocked, application clocks 2619,1980 MHz -> the default, compute mode exclusive_process -> default; GPU 1: power limit 600 W -> 700 W (the default limit),"
	assert_stdout_has "; ECC and MIG modes stay as they are (the GPU keeps them across reboots; nvidia-smi -e and -mig change them)"
	assert_stdout_has "/gpuprov gpu-settings reset power_limit_w=default locked_gpu_clocks_mhz=default application_clocks_mhz=default compute_mode=default"
	assert_stdout_has "then nvidia-persistenced restarts without gpuprov's drop-in, as its package starts it"
	[ ! -e "$R/var/log/fakenvml.log" ] || fail "the plan called an NVML setter:" "$(cat "$R/var/log/fakenvml.log")"
	# The plan's effects are the run's.
	in_root_as_host uninstall --dry-run --json
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	in_root_as_host uninstall --json
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/run.json"
	"$PYTHON" - "$BATS_TEST_TMPDIR/plan.json" "$BATS_TEST_TMPDIR/run.json" <<'PY' || fail "the uninstall's effects differ from its plan's"
import json, sys
plan, run = ({s["name"]: s["effects"] for s in json.load(open(p))["stages"]} for p in sys.argv[1:])
assert plan == run, (plan, run)
assert any(e.get("argv", [None])[1:3] == ["gpu-settings", "reset"] for e in run["gpu_settings"]), run
# The daemon restarts after its drop-in went, not before.
argvs = [e.get("argv") for e in run["gpu_settings"]]
restart = argvs.index(["systemctl", "try-restart", "nvidia-persistenced.service"])
assert argvs[restart - 1] == ["systemctl", "daemon-reload"], argvs
gone = [i for i, e in enumerate(run["gpu_settings"]) if "nvidia-persistenced.service.d/gpuprov.conf" in json.dumps(e)]
assert gone and max(gone) < restart, (gone, restart, run["gpu_settings"])
PY
	# Each GPU's resets, the only NVML calls that change anything.
	local one='nvmlDeviceSetPowerManagementLimit 700000 0
nvmlDeviceResetGpuLockedClocks 0 0
nvmlDeviceResetApplicationsClocks 2619 1755
nvmlDeviceSetComputeMode 0 0'
	[ "$(cat "$R/var/log/fakenvml.log")" = "$one
$one" ] || fail "NVML calls:" "$(cat "$R/var/log/fakenvml.log")"
	[ "$(state power_limit_mw) $(state locked_max_mhz) $(state app_gpu_mhz) $(state compute_mode) $(state ecc_pending)" = "700000 0 1755 0 1" ] ||
		fail "state after the uninstall:" "$(cat "$R/$STATE")"
	[ ! -e "$R/$UNIT" ] || fail "the boot unit stayed"
}

@test "gpu_settings: uninstall removes the links and the directory it made and puts back the operator's link it replaced, exactly as planned" {
	# The operator's own wants link, to a unit of theirs: install points it
	# at the packaged unit, uninstall points it back.
	mkdir -p "$R/etc/systemd/system/multi-user.target.wants"
	ln -s /etc/systemd/system/site-persistenced.service "$R/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service"
	# Files, links and directories: gpuprov's own state aside.
	manifest "$R" | grep -v '^\S* *\./\(var/lib/gpuprov\|var/log\|run\|var/run\)\( \|/\)' > "$BATS_TEST_TMPDIR/before"
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	[ "$(readlink "$R/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service")" = /usr/lib/systemd/system/nvidia-persistenced.service ] ||
		fail "nvidia-persistenced not enabled"
	gp --root "$R" uninstall --dry-run
	assert_status 0
	assert_stdout_has "symlink /etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service -> /etc/systemd/system/site-persistenced.service"
	assert_stdout_has "remove link /etc/systemd/system/multi-user.target.wants/gpuprov-gpu-settings.service (-> /etc/systemd/system/gpuprov-gpu-settings.service)"
	assert_stdout_has "remove directory /etc/systemd/system/nvidia-persistenced.service.d ("
	# Not the live host: the GPUs' values are left to its next boot.
	assert_stdout_has "; the running GPUs' values are untouched: $R is not the live host, so only the boot unit goes and they return to the GPUs' defaults at its next boot; ECC and MIG modes stay as they are"
	refute_stdout_has "gpu-settings reset"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 0
	[ ! -e "$R/var/log/fakenvml.log" ] || fail "uninstall under --root called an NVML setter:" "$(cat "$R/var/log/fakenvml.log")"
	manifest "$R" | grep -v '^\S* *\./\(var/lib/gpuprov\|var/log\|run\|var/run\)\( \|/\)' > "$BATS_TEST_TMPDIR/after"
	diff -u "$BATS_TEST_TMPDIR/before" "$BATS_TEST_TMPDIR/after" ||
		fail "the root's files and links differ from before the install (diff above: - before, + after)"
}

@test "gpu_settings: uninstall keeps a directory it made that holds a file of the operator's, saying why, and removes its own file in it" {
	gp --root "$R" install --profile "$P" --only gpu_settings
	assert_status 0
	echo "[Service]" > "$R/etc/systemd/system/nvidia-persistenced.service.d/site.conf"
	gp --root "$R" uninstall --dry-run
	assert_status 0
	# The stub root had no /etc/systemd: gpuprov made it, and keeps it.
	assert_stdout_has "keeps the directories it made that hold what it did not write: /etc/systemd (it holds /etc/systemd/system/nvidia-persistenced.service.d/site.conf, which gpuprov did not write)"
	refute_stdout_has "remove directory /etc/systemd "
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 0
	[ -f "$R/etc/systemd/system/nvidia-persistenced.service.d/site.conf" ] || fail "the operator's file went"
	[ ! -e "$R/$DROPIN" ] || fail "gpuprov's drop-in stayed"
	gp --root "$R" uninstall
	assert_stdout_has "gpu_settings: satisfied - gpuprov recorded nothing of it"
}
