#!/usr/bin/env bats
# Verify finding ids (docs/findings.md): the list there names every id the
# source gives and nothing else, and the ids verify --json reports on the
# fixture roots are well formed, unique in their report, listed, and one
# per check (findings_check.py). The golden verify reports under
# tests/e2e/expected are checked the same way when there are any.

load helpers

CHECK=$BATS_TEST_DIRNAME/findings_check.py
DOC=$REPO_ROOT/docs/findings.md
FAKENV=$REPO_ROOT/tests/fixtures/fakenv

teardown() {
	stop_https_server
}

# verify_json NAME ARGS...: gpuprov ARGS... verify --json into
# $BATS_TEST_TMPDIR/NAME.json (a documented exit status), added to $REPORTS.
verify_json() {
	local name=$1
	shift
	gp "$@" --json
	assert_documented_status
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/$name.json"
	REPORTS+=("$BATS_TEST_TMPDIR/$name.json")
}

# assert_has_id NAME ID: the report NAME.json of verify_json has a finding ID.
assert_has_id() {
	"$PYTHON" -c 'import json, sys
sys.exit(sys.argv[2] not in [f["id"] for f in json.load(open(sys.argv[1]))["findings"]])' \
		"$BATS_TEST_TMPDIR/$1.json" "$2" || fail "no finding $2 in" "$(cat "$BATS_TEST_TMPDIR/$1.json")"
}

check_reports() {
	run "$PYTHON" "$CHECK" reports "$DOC" "${REPORTS[@]}"
	[ "$status" -eq 0 ] || fail "finding ids:" "$output"
}

@test "findings: every id docs/findings.md lists is given in the source, and every id the source gives is listed" {
	run "$PYTHON" "$CHECK" source "$DOC" "$REPO_ROOT"/src/stages/*.c "$REPO_ROOT/src/engine.c"
	[ "$status" -eq 0 ] || fail "docs/findings.md against the source:" "$output"
}

@test "findings: the ids of a fresh server's verify, and after the nouveau and env install" {
	setup_ubuntu_root
	REPORTS=()
	verify_json fresh --root "$R" verify --profile "$PROFILE"
	install_ubuntu
	verify_json installed --root "$R" verify --profile "$PROFILE"
	check_reports
	# The examples of docs/findings.md, as the fixture gives them.
	assert_has_id fresh driver.binding.0000_17_00_0
	assert_has_id installed gpuprov.pending_reboot
}

@test "findings: driver.branch_eol warns about the classic R535 profile after June 2026, not before" {
	setup_ubuntu_root
	gp --root "$R" --json verify --profile "$PROFILE"
	assert_documented_status
	"$PYTHON" -c 'import json, sys
f = [f for f in json.loads(sys.argv[1])["findings"] if f["id"] == "driver.branch_eol"]
assert len(f) == 1 and f[0]["level"] == "warn", f
assert "June 2026" in f[0]["evidence"] and "move to driver branch 580" in f[0]["evidence"], f' \
		"$output" || fail "no driver.branch_eol warning:" "$output"
	GPUPROV_TODAY=2026-06-30 gp --root "$R" --json verify --profile "$PROFILE"
	assert_documented_status
	refute_stdout_has driver.branch_eol
	GPUPROV_TODAY=06/30/2026 gp --root "$R" --json verify --profile "$PROFILE"
	assert_documented_status
	assert_stdout_has "not checked: GPUPROV_TODAY is not a date"
}

@test "findings: the ids of an installed cuDNN, its sonames named by library" {
	setup_cudnn_root
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	REPORTS=()
	verify_json cudnn --root "$R" verify --profile "$P" --only cuda,cudnn,env
	: > "$R/etc/ld.so.cache"
	verify_json no-cache --root "$R" verify --profile "$P" --only cudnn
	check_reports
	assert_has_id cudnn cudnn.soname.libcudnn
}

@test "findings: the ids of the driver's NVML and libcuda checks" {
	drv=$BATS_TEST_TMPDIR/fakenv
	mkdir -p "$drv"
	cc -shared -fPIC -o "$drv/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 \
		"$FAKENV/fakenvml.c" || fail "cannot build the fake NVML"
	cc -shared -fPIC -o "$drv/libcuda.so.1" -Wl,-soname,libcuda.so.1 \
		"$FAKENV/fakecuda.c" || fail "cannot build the fake libcuda"
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau unloaded --pkg-stubs
	P=$BATS_TEST_TMPDIR/drv.json
	cat > "$P" <<JSON
{ "name": "drv-test", "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "branch": "535", "flavor": "server",
                          "modules": "proprietary" } } }
JSON
	gp --root "$R" install --profile "$P"
	mkdir -p "$R/proc/driver/nvidia" "$R/sys/bus/pci/drivers/nvidia" "$R/usr/lib/x86_64-linux-gnu"
	printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun Jan 1\n' \
		> "$R/proc/driver/nvidia/version"
	echo "nvidia 56000000 0 - Live 0x0" >> "$R/proc/modules"
	ln -sfn ../../../bus/pci/drivers/nvidia "$R/$GPU_DEV/driver"
	cp "$drv/libnvidia-ml.so.1" "$drv/libcuda.so.1" "$R/usr/lib/x86_64-linux-gnu/"
	REPORTS=()
	printf '%s\n' mode=ok version=535.183.01 cuda=12020 count=1 persistence=0 \
		"name=NVIDIA A100-SXM4-40GB" > "$R/etc/fakenv.conf"
	verify_json ok --root "$R" verify --profile "$P"
	printf '%s\n' mode=mismatch version=535.183.01 > "$R/etc/fakenv.conf"
	verify_json mismatch --root "$R" verify --profile "$P"
	check_reports
	assert_has_id ok driver.nvml.version
}

@test "findings: the ids of the golden verify reports" {
	REPORTS=()
	local f
	for f in "$EXPECTED"/*/verify*.json; do
		# An empty one is a verify that printed no report (no profile).
		[ -s "$f" ] && REPORTS+=("$f")
	done
	[ "${#REPORTS[@]}" -gt 0 ] || skip "no golden verify reports in $EXPECTED"
	check_reports
}
