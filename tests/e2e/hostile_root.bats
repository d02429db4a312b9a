#!/usr/bin/env bats
# Roots and inputs that try to make gpuprov hang, eat memory or read the
# host: FIFOs and devices where files belong, oversized files, absolute
# symlinks in modprobe.d, garbage in sysfs. Each run is guarded by timeout
# so that a regression fails instead of hanging the suite.

load helpers

GUARD_S=20

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R"
}

# tgp ARGS...: gp under a timeout; a hang is a failure, not a stuck suite.
tgp() {
	run --separate-stderr timeout -s KILL "$GUARD_S" "$GPUPROV" "$@"
	[ "$status" -ne 137 ] || fail "gpuprov $* hung (killed after ${GUARD_S}s)"
}

@test "hostile root: a FIFO as /etc/os-release -> detect and plan exit 65 naming it, no hang" {
	rm "$R/etc/os-release"
	mkfifo "$R/etc/os-release"
	tgp --root "$R" detect
	assert_status 65
	assert_stderr_has "/etc/os-release in root $R is a FIFO, not a regular file"
	assert_stderr_has "replace it with the distribution's os-release file"
	tgp --root "$R" plan --profile "$PROFILE"
	assert_status 65
	assert_stderr_has "/etc/os-release in root $R is a FIFO, not a regular file"
}

@test "hostile root: an os-release over the bound -> exit 65 naming the file and the bound" {
	head -c 100000 /dev/zero | tr '\0' '#' > "$R/etc/os-release"
	tgp --root "$R" detect
	assert_status 65
	assert_stderr_has "/etc/os-release in root $R is larger than 64 KiB"
}

@test "hostile root: a FIFO as state.json -> exit 65 naming it, no hang" {
	mkdir -p "$R/var/lib/gpuprov"
	mkfifo "$R/var/lib/gpuprov/state.json"
	tgp --root "$R" plan --profile "$PROFILE"
	assert_status 65
	assert_stderr_has "/var/lib/gpuprov/state.json in root $R is a FIFO, not a regular file"
	tgp --root "$R" status
	assert_status 65
	assert_stderr_has "is a FIFO, not a regular file"
}

@test "hostile input: --profile /dev/zero or a FIFO -> exit 65 at once, not a growing read" {
	tgp --root "$R" plan --profile /dev/zero
	assert_status 65
	assert_stderr_has "/dev/zero is a device, not a regular file"
	mkfifo "$BATS_TEST_TMPDIR/p.json"
	tgp --root "$R" plan --profile "$BATS_TEST_TMPDIR/p.json"
	assert_status 65
	assert_stderr_has "$BATS_TEST_TMPDIR/p.json is a FIFO, not a regular file"
}

@test "hostile input: a profile over 16 MiB -> exit 65 naming the bound" {
	# Sparse: the bound is checked before a byte is read.
	truncate -s 17M "$BATS_TEST_TMPDIR/big.json"
	tgp --root "$R" plan --profile "$BATS_TEST_TMPDIR/big.json"
	assert_status 65
	assert_stderr_has "big.json is larger than 16 MiB, the most gpuprov reads of it"
}

@test "hostile root: one PCI device with a garbage vendor -> left out with a warning naming it; the GPU is still found" {
	printf 'garbage\n' > "$R/sys/bus/pci/devices/0000:00:00.0/vendor"
	tgp --root "$R" detect
	assert_status 0
	assert_stderr_has "left out a PCI device: $R/sys/bus/pci/devices/0000:00:00.0/vendor is not a hex id"
	assert_stdout_has "GPUs:        1 NVIDIA GPU"
	assert_stdout_has "0000:17:00.0  10de:20b0"
	# The profile's match.gpus still sees the A100: no "does not fit".
	tgp --root "$R" plan --profile "$PROFILE" --only driver
	assert_status 5 # the plan: install the driver, then reboot
	assert_stderr_has "left out a PCI device: $R/sys/bus/pci/devices/0000:00:00.0/vendor"
	refute_stderr_has "does not fit"
	# A FIFO as an id is left out the same way, without blocking.
	rm "$R/sys/bus/pci/devices/0000:00:00.0/vendor"
	mkfifo "$R/sys/bus/pci/devices/0000:00:00.0/vendor"
	tgp --root "$R" detect
	assert_status 0
	assert_stderr_has "0000:00:00.0/vendor in root $R is a FIFO, not a regular file"
	assert_stdout_has "GPUs:        1 NVIDIA GPU"
}

# --- modprobe.d: libkmod reads only what resolves inside the root ----------

BLACKLIST='blacklist nouveau
options nouveau modeset=0'

@test "hostile root: modprobe.d link to a host file (dangling in the root) -> not read; the blacklist is planned" {
	printf '%s\n' "$BLACKLIST" > "$BATS_TEST_TMPDIR/host-blacklist.conf"
	ln -s "$BATS_TEST_TMPDIR/host-blacklist.conf" "$R/etc/modprobe.d/x.conf"
	tgp --root "$R" plan --profile "$PROFILE" --only nouveau
	assert_status 5
	assert_stdout_has "nouveau is not blacklisted with modeset=0"
	assert_stdout_has "create /etc/modprobe.d/blacklist-nouveau.conf"
	tgp --root "$R" install --profile "$PROFILE" --only nouveau
	assert_status 5 # reboot
	grep -qx 'blacklist nouveau' "$R/etc/modprobe.d/blacklist-nouveau.conf" ||
		fail "install wrote no blacklist into the root"
	rm "$R/etc/modprobe.d/blacklist-nouveau.conf"
	# The same name in /lib/modprobe.d stays hidden, as modprobe has it.
	printf '%s\n' "$BLACKLIST" > "$R/lib/modprobe.d/x.conf"
	tgp --root "$R" plan --profile "$PROFILE" --only nouveau
	assert_stdout_has "nouveau is not blacklisted with modeset=0"
}

@test "hostile root: modprobe.d absolute link to a file inside the root -> followed inside the root" {
	mkdir -p "$R/opt/gpuprov-test-conf"
	printf '%s\n' "$BLACKLIST" > "$R/opt/gpuprov-test-conf/nv.conf"
	[ ! -e /opt/gpuprov-test-conf/nv.conf ] || skip "the host has /opt/gpuprov-test-conf/nv.conf"
	ln -s /opt/gpuprov-test-conf/nv.conf "$R/etc/modprobe.d/x.conf"
	tgp --root "$R" plan --profile "$PROFILE" --only nouveau
	refute_stdout_has "nouveau is not blacklisted"
	refute_stdout_has "create /etc/modprobe.d/blacklist-nouveau.conf"
}

@test "hostile root: a FIFO in modprobe.d -> fails naming it, no hang" {
	mkfifo "$R/etc/modprobe.d/x.conf"
	tgp --root "$R" plan --profile "$PROFILE" --only nouveau
	assert_status 1
	assert_stderr_has "/etc/modprobe.d/x.conf in root $R is a FIFO, not a regular file"
}

@test "hostile root: a FIFO as gpuprov's lock file -> status answers, no hang" {
	mkdir -p "$R/var/lib/gpuprov"
	mkfifo "$R/var/lib/gpuprov/lock"
	tgp --root "$R" status
	assert_documented_status
}
