#!/usr/bin/env bats
# `gpuprov detect` on fixture roots: the OS, kernel, Secure Boot state and
# NVIDIA GPUs it reports, unknown ids shown as such, and the profiles that
# fit the root, best first. detect only reads: the tree stays as it was.

load helpers

setup() {
	[ -x "$GPUPROV" ] ||
		fail "no gpuprov binary at $GPUPROV (run make, or set GPUPROV)"
	R=$BATS_TEST_TMPDIR/root
	P=$BATS_TEST_TMPDIR/profiles
	JSON=$BATS_TEST_TMPDIR/detect.json
	mkdir -p "$P"
	# Test profiles, independent of the catalogue: every kind of match.
	tprofile t-a100-ubuntu2204 ubuntu 22.04 20b0 20b2
	tprofile t-a100-v100-ubuntu2204 ubuntu 22.04 20b0 1db1
	tprofile t-any-a100 - - 20b0
	tprofile t-ubuntu2204 ubuntu 22.04
	tprofile t-ubuntu ubuntu -
	tprofile t-a100-rocky9 rocky 9 20b0
	tprofile t-h100-ubuntu2404 ubuntu 24.04 2330
	tprofile t-b200-ubuntu2404 ubuntu 24.04 2901
	tprofile t-l4-debian12 debian 12 27b8
	tprofile t-debian12 debian 12
	tprofile t-unknown-gpu - - 9999
	printf '{ "name": "t-no-match", "description": "t-no-match (fits anything)", %s }\n' \
		"$STAGES" > "$P/t-no-match.json"
}

# A stage, so that the test profiles are complete (detect offers no base).
STAGES='"stages": { "nouveau": {} }'

# tprofile NAME OS_ID VERSION_ID [DEVICE_ID...]: a minimal profile whose
# match names that distro ("-": none) and those NVIDIA GPUs.
tprofile() {
	local name=$1 os=$2 ver=$3 m="" g="" id
	shift 3
	[ "$os" = - ] || m="\"os_id\": \"$os\""
	[ "$ver" = - ] || m="$m${m:+, }\"version_id\": \"$ver\""
	for id in "$@"; do
		g="$g${g:+, }\"10de:$id\""
	done
	[ -z "$g" ] || m="$m${m:+, }\"gpus\": [$g]"
	printf '{ "name": "%s", "description": "%s (test)", "match": { %s }, %s }\n' \
		"$name" "$name" "$m" "$STAGES" > "$P/$name.json"
}

# detect_root [mkroot options]: builds $R, runs detect (text, then --json
# into $JSON) and checks that both succeed and leave the tree as it was.
detect_root() {
	mkroot "$R" "$@"
	snapshot "$R" before
	gp --root "$R" --profile-dir "$P" --json detect
	assert_status 0
	printf '%s\n' "$output" > "$JSON"
	"$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$JSON" ||
		fail "detect --json is not JSON:" "$output"
	gp --root "$R" --profile-dir "$P" detect
	assert_status 0
	assert_unchanged "$R" before
	assert_untouched_by_gpuprov "$R"
}

# The test profiles (t-*) that detect listed, in its order, comma-separated.
t_profiles() {
	json_get "$JSON" \
		'",".join(p["name"] for p in d["profiles"] if p["name"].startswith("t-"))'
}

# All listed profile names, comma-separated.
all_profiles() {
	json_get "$JSON" '",".join(p["name"] for p in d["profiles"])'
}

assert_t_profiles() {
	local got
	got=$(t_profiles)
	[ "$got" = "$1" ] ||
		fail "test profiles, best first:" "  expected: $1" "  got:      $got"
}

# assert_before A B: profile A is listed before profile B.
assert_before() {
	local names=",$(all_profiles),"
	_has "$names" ",$1," || fail "profile $1 not listed: $names"
	_has "$names" ",$2," || fail "profile $2 not listed: $names"
	local a=${names%%,"$1",*} b=${names%%,"$2",*}
	[ "${#a}" -lt "${#b}" ] || fail "$1 should come before $2: $names"
}

refute_profile() {
	local names=",$(all_profiles),"
	_has "$names" ",$1," || return 0
	fail "profile $1 should not fit: $names"
}

# --- GPUs ------------------------------------------------------------------

@test "detect: A100 on Ubuntu 22.04: OS, kernel, the GPU with name, arch, CC, driver" {
	detect_root
	assert_stdout_has "Ubuntu 22.04.4 LTS"
	assert_stdout_has "ubuntu 22.04"
	assert_stdout_has "5.15.0-91-generic"
	assert_stdout_has "0000:17:00.0"
	assert_stdout_has "10de:20b0"
	assert_stdout_has "A100 SXM4 40GB"
	assert_stdout_has "Ampere"
	assert_stdout_has "compute capability 8.0"
	assert_stdout_has "driver nouveau"
	# The host bridge is not a GPU.
	refute_stdout_has "0000:00:00.0"
	refute_stdout_has "8086"
	jeq 'd["os"]["id"]' ubuntu
	jeq 'd["os"]["version_id"]' 22.04
	jeq 'd["os"]["pretty_name"]' "Ubuntu 22.04.4 LTS"
	jeq 'd["kernel"]' 5.15.0-91-generic
	jeq 'len(d["gpus"])' 1
	jeq 'd["gpus"][0]["address"]' 0000:17:00.0
	jeq 'd["gpus"][0]["id"]' 10de:20b0
	jeq 'd["gpus"][0]["device_id"]' 20b0
	jeq 'd["gpus"][0]["known"]' true
	jeq 'd["gpus"][0]["name"]' "A100 SXM4 40GB"
	jeq 'd["gpus"][0]["architecture"]' Ampere
	jeq 'd["gpus"][0]["compute_capability"]' 8.0
	jeq 'd["gpus"][0]["driver"]' nouveau
}

@test "detect: A100 on Ubuntu 22.04: fitting profiles best first, others left out" {
	detect_root
	# GPU ids and distro, then GPU ids only, then distro only (the more
	# precise distro first), then a profile without a match.
	assert_t_profiles "t-a100-ubuntu2204,t-a100-v100-ubuntu2204,t-any-a100,"\
"t-ubuntu2204,t-ubuntu,t-no-match"
	# The catalogue's A100 profile; its distro base is not offered: it
	# enables no stage (a plan of it would be "8 disabled").
	assert_before a100-ubuntu2204 t-ubuntu2204
	refute_profile distro/ubuntu2204
	refute_profile a100-ubuntu2404
	refute_profile a100-rocky9
	refute_profile h100-ubuntu2204
	refute_profile distro/ubuntu2404
	# The text lists them in the same order, with their descriptions.
	assert_stdout_has "t-a100-ubuntu2204 (test)"
	local text
	text=$(printf '%s\n' "$output" | sed -n 's/^  \(t-[a-z0-9-]*\) .*/\1/p' |
		paste -sd, -)
	[ "$text" = "$(t_profiles)" ] ||
		fail "text order: $text" "JSON order: $(t_profiles)"
	jeq '[p["description"] for p in d["profiles"] if p["name"] == "t-ubuntu"][0]' \
		"t-ubuntu (test)"
}

@test "detect: a profile that does not fit is explained with -v" {
	detect_root
	gp --root "$R" --profile-dir "$P" -v detect
	assert_status 0
	assert_stderr_matches \
		"t-a100-rocky9 does not fit: expected rocky 9, found ubuntu 22.04"
	assert_stderr_matches \
		"t-h100-ubuntu2404 does not fit: .*no GPU of .*match.gpus; found 10de:20b0"
}

@test "detect: H100 (2330) on Ubuntu 22.04 and 24.04" {
	detect_root --gpu 2330
	assert_stdout_has "10de:2330"
	assert_stdout_has "H100"
	assert_stdout_has "Hopper"
	assert_stdout_has "compute capability 9.0"
	jeq 'd["gpus"][0]["compute_capability"]' 9.0
	assert_before h100-ubuntu2204 t-ubuntu2204
	refute_profile distro/ubuntu2204
	refute_profile h100-ubuntu2404
	refute_profile a100-ubuntu2204
	assert_t_profiles "t-ubuntu2204,t-ubuntu,t-no-match"

	rm -rf "$R"
	detect_root --gpu 2330 --distro ubuntu2404
	assert_stdout_has "Ubuntu 24.04 LTS"
	assert_stdout_has "6.8.0-31-generic"
	assert_before h100-ubuntu2404 t-h100-ubuntu2404
	refute_profile distro/ubuntu2404
	refute_profile h100-ubuntu2204
	assert_t_profiles "t-h100-ubuntu2404,t-ubuntu,t-no-match"
}

@test "detect: B200 (2901) on Ubuntu 24.04" {
	detect_root --gpu 2901 --distro ubuntu2404
	assert_stdout_has "10de:2901"
	assert_stdout_has "B200"
	assert_stdout_has "Blackwell"
	assert_stdout_has "compute capability 10.0"
	jeq 'd["gpus"][0]["architecture"]' Blackwell
	jeq 'd["gpus"][0]["compute_capability"]' 10.0
	assert_before b200-ubuntu2404 t-b200-ubuntu2404
	refute_profile distro/ubuntu2404
	refute_profile h100-ubuntu2404
	assert_t_profiles "t-b200-ubuntu2404,t-ubuntu,t-no-match"
}

@test "detect: L4 (27b8) on Debian 12" {
	detect_root --gpu 27b8 --distro debian12
	assert_stdout_has "Debian GNU/Linux 12 (bookworm)"
	assert_stdout_has "debian 12"
	assert_stdout_has "10de:27b8"
	assert_stdout_has "L4"
	assert_stdout_has "Ada Lovelace"
	assert_stdout_has "compute capability 8.9"
	assert_before l4-debian12 t-l4-debian12
	refute_profile distro/debian12
	refute_profile distro/ubuntu2204
	assert_t_profiles "t-l4-debian12,t-debian12,t-no-match"
}

@test "detect: V100 + A100 mixed: both GPUs; a profile naming both ranks first" {
	detect_root --gpu 1db1 --gpu 20b0
	jeq 'len(d["gpus"])' 2
	jeq 'd["gpus"][0]["address"]' 0000:17:00.0
	jeq 'd["gpus"][0]["id"]' 10de:1db1
	jeq 'd["gpus"][0]["architecture"]' Volta
	jeq 'd["gpus"][0]["compute_capability"]' 7.0
	jeq 'd["gpus"][1]["address"]' 0000:18:00.0
	jeq 'd["gpus"][1]["id"]' 10de:20b0
	jeq 'd["gpus"][1]["compute_capability"]' 8.0
	assert_stdout_has "2 NVIDIA GPUs"
	assert_stdout_has "V100"
	assert_stdout_has "Volta"
	assert_stdout_has "A100 SXM4 40GB"
	assert_t_profiles "t-a100-v100-ubuntu2204,t-a100-ubuntu2204,t-any-a100,"\
"t-ubuntu2204,t-ubuntu,t-no-match"
	# One GPU in match.gpus is enough for the match to fit.
	assert_before a100-ubuntu2204 t-a100-ubuntu2204
	refute_profile distro/ubuntu2204
}

@test "detect: Rocky 9: distro profiles for Rocky only" {
	detect_root --distro rocky9
	assert_stdout_has "Rocky Linux 9.3 (Blue Onyx)"
	assert_t_profiles "t-a100-rocky9,t-any-a100,t-no-match"
	assert_before a100-rocky9 t-any-a100
	refute_profile distro/rocky9
	refute_profile a100-ubuntu2204
}

@test "detect: no GPU: says so, exit 0, GPU profiles left out" {
	detect_root --no-gpu
	assert_stdout_has "no NVIDIA GPU found"
	jeq 'd["gpus"]' "[]"
	assert_t_profiles "t-ubuntu2204,t-ubuntu,t-no-match"
	refute_profile a100-ubuntu2204
	assert_stderr_empty
}

@test "detect: a non-NVIDIA VGA device only: not listed as a GPU" {
	detect_root --vga-only
	assert_stdout_has "no NVIDIA GPU found"
	refute_stdout_has "0000:03:00.0"
	refute_stdout_has "1a03"
	refute_stdout_has "driver ast"
	jeq 'd["gpus"]' "[]"
	assert_t_profiles "t-ubuntu2204,t-ubuntu,t-no-match"
}

@test "detect: an unknown NVIDIA id is shown as unknown, with no guessed CC" {
	detect_root --gpu 9999 --nouveau unloaded
	assert_stdout_has "unknown NVIDIA device 10de:9999"
	assert_stdout_has "driver none"
	refute_stdout_has "compute capability"
	jeq 'd["gpus"][0]["known"]' false
	jeq 'd["gpus"][0]["name"]' "unknown NVIDIA device 10de:9999"
	jeq 'd["gpus"][0]["compute_capability"]' null
	jeq 'd["gpus"][0]["architecture"]' null
	jeq 'd["gpus"][0]["driver"]' null
	# A profile may still name the id: it fits.
	assert_t_profiles "t-unknown-gpu,t-ubuntu2204,t-ubuntu,t-no-match"
}

@test "detect: the driver bound to each GPU, or none" {
	detect_root --gpu 20b0 --gpu 2330 --nouveau unloaded
	assert_stdout_has "driver none"
	refute_stdout_has "driver nouveau"
	mkdir -p "$R/sys/bus/pci/drivers/nvidia"
	ln -s ../../../bus/pci/drivers/nvidia "$R/sys/bus/pci/devices/0000:18:00.0/driver"
	gp --root "$R" --profile-dir "$P" --json detect
	assert_status 0
	printf '%s\n' "$output" > "$JSON"
	jeq 'd["gpus"][0]["driver"]' null
	jeq 'd["gpus"][1]["driver"]' nvidia
}

# --- Secure Boot -----------------------------------------------------------

@test "detect: Secure Boot on" {
	detect_root --secure-boot on
	assert_stdout_has "Secure Boot: on"
	jeq 'd["secure_boot"]' on
}

@test "detect: Secure Boot off" {
	detect_root --secure-boot off
	assert_stdout_has "Secure Boot: off"
	jeq 'd["secure_boot"]' off
}

@test "detect: no sys/firmware/efi: not UEFI" {
	detect_root --secure-boot none
	assert_stdout_has "Secure Boot: not UEFI"
	jeq 'd["secure_boot"]' "not UEFI"
	# The default fixture is a legacy BIOS boot.
	[ ! -e "$R/sys/firmware" ]
}

@test "detect: UEFI without a readable SecureBoot variable: unknown" {
	detect_root --secure-boot on
	local guid=8be4df61-93ca-11d2-aa0d-00e098032b8c
	local var=$R/sys/firmware/efi/efivars/SecureBoot-$guid
	printf '\006\000' > "$var"
	gp --root "$R" --profile-dir "$P" detect
	assert_status 0
	assert_stdout_has "Secure Boot: unknown"
	rm "$var"
	gp --root "$R" --profile-dir "$P" detect
	assert_stdout_has "Secure Boot: unknown"
}

# --- JSON and odd roots ----------------------------------------------------

@test "detect --json: one document with every field" {
	detect_root --secure-boot off
	"$PYTHON" - "$JSON" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("root", "os", "kernel", "secure_boot", "gpus", "profiles"):
    assert k in d, k
for k in ("pretty_name", "id", "version_id"):
    assert isinstance(d["os"][k], str), k
for g in d["gpus"]:
    for k in ("address", "id", "device_id", "known", "name", "architecture",
              "compute_capability", "driver"):
        assert k in g, k
for p in d["profiles"]:
    for k in ("name", "description", "path", "matched_gpus", "matches_distro"):
        assert k in p, k
    assert p["path"].endswith(".json"), p["path"]
PY
}

@test "detect: a root without os-release, kernel or PCI: still exit 0, unknowns said" {
	mkdir -p "$R"
	gp --root "$R" --profile-dir "$P" detect
	assert_status 0
	assert_stdout_has "OS:          unknown"
	assert_stdout_has "Kernel:      unknown"
	assert_stdout_has "not UEFI"
	assert_stdout_has "no NVIDIA GPU found"
	# Only a profile without a match fits a root we know nothing about.
	gp --root "$R" --profile-dir "$P" --json detect
	assert_status 0
	printf '%s\n' "$output" > "$JSON"
	jeq 'd["os"]' null
	jeq 'd["kernel"]' null
	[ "$(all_profiles)" = t-no-match ]
}

@test "detect: a broken profile in the search path is skipped with a warning" {
	mkroot "$R"
	printf '{ "name": "t-broken", "match": { "os_id": 7 } }\n' > "$P/t-broken.json"
	gp --root "$R" --profile-dir "$P" detect
	assert_status 0
	assert_stderr_has "t-broken"
	assert_stderr_has "t-broken.json:1:"
	assert_stdout_has "t-a100-ubuntu2204"
}

@test "detect: --root that does not exist -> exit 2; an argument -> exit 2" {
	gp --root "$BATS_TEST_TMPDIR/nowhere" detect
	assert_status 2
	assert_stderr_has "nowhere"
	gp detect extra
	assert_status 2
	assert_usage_on_stderr
	gp detect --help
	assert_status 0
	assert_stdout_has "usage: gpuprov detect"
}

@test "detect: only complete profiles are offered: no base, none missing a pin" {
	printf '{ "name": "t-base-only", "match": { "os_id": "ubuntu" } }\n' > "$P/t-base-only.json"
	cat > "$P/t-unpinned.json" <<'JSON'
{ "name": "t-unpinned", "match": { "os_id": "ubuntu", "version_id": "22.04" },
  "stages": { "cudnn": { "method": "tarball", "version": "9.8.0.87", "cuda": "12" } } }
JSON
	detect_root
	refute_profile t-base-only
	refute_profile t-unpinned
	refute_profile distro/ubuntu2204
	assert_before a100-ubuntu2204 t-ubuntu2204
	assert_stderr_has "profile t-unpinned fits but is not offered: it would be blocked (stage cudnn: stages.cudnn.sha256 is not set"
	refute_stdout_has "t-base-only"
	gp --root "$R" --profile-dir "$P" -v detect
	assert_stderr_has "profile t-base-only fits but is not offered: it enables no stage"
	assert_stderr_has "profile distro/ubuntu2204 fits but is not offered: it enables no stage"
}
