#!/usr/bin/env bats
# `gpuprov profiles list|show|lint`: the columns and JSON of list, show as
# written vs --resolved, and lint reporting every problem of every file with
# the documented exit codes (65 invalid, 4 incompatible, 0 clean).

load helpers

setup() {
	[ -x "$GPUPROV" ] ||
		fail "no gpuprov binary at $GPUPROV (run make, or set GPUPROV)"
	P=$BATS_TEST_TMPDIR/profiles
	BAD=$REPO_ROOT/tests/fixtures/bad-profiles
	JSON=$BATS_TEST_TMPDIR/out.json
	mkdir -p "$P"
	cat > "$P/t-base.json" <<'EOF'
{
  "name": "t-base",
  "description": "test base",
  "match": { "os_id": "ubuntu", "version_id": "22.04" }
}
EOF
	cat > "$P/t-child.json" <<'EOF'
// A child of t-base: the comment and layout are part of the file as written.
{
  "name": "t-child",
  "description": "test child",
  "extends": "t-base",
  /* A100 SXM4 40GB, 80GB, PCIe 80GB and an H100: two models. */
  "match": { "gpus": ["10de:20b0", "10de:20b2", "10de:20b5", "10de:2330"] }
}
EOF
	cat > "$P/t-odd.json" <<'EOF'
{ "name": "t-odd", "description": "no match, an unknown GPU id",
  "match": { "gpus": ["10de:9999"] } }
EOF
	cat > "$P/t-nomatch.json" <<'EOF'
{ "name": "t-nomatch", "description": "no match at all" }
EOF
}

# The line of stdout for profile NAME in `profiles list`.
list_line() {
	printf '%s\n' "$output" | grep -E "^$1 " || fail "no line for $1 in:" "$output"
}

save_json() {
	printf '%s\n' "$output" > "$JSON"
	"$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$JSON" ||
		fail "not JSON:" "$output"
}

# --- list ------------------------------------------------------------------

@test "profiles list: a header and one row per profile: name, distro, GPUs, description" {
	gp --profile-dir "$P" profiles list
	assert_status 0
	assert_stderr_empty
	[[ ${lines[0]} =~ ^NAME\ +DISTRO\ +GPUS\ +DESCRIPTION$ ]] ||
		fail "header: ${lines[0]}"
	# Inherited distro; models deduplicated, in match.gpus order.
	local re='^t-child +ubuntu 22\.04 +A100, H100 +test child$'
	[[ $(list_line t-child) =~ $re ]] ||
		fail "t-child: $(list_line t-child)"
	# A base: no GPUs.
	[[ $(list_line t-base) =~ ^t-base\ +ubuntu\ 22\.04\ +-\ +test\ base$ ]] ||
		fail "t-base: $(list_line t-base)"
	# No distro; an id gpuprov does not know is shown as written.
	[[ $(list_line t-odd) =~ ^t-odd\ +-\ +10de:9999\ +no\ match ]] ||
		fail "t-odd: $(list_line t-odd)"
	[[ $(list_line t-nomatch) =~ ^t-nomatch\ +-\ +-\ +no\ match\ at\ all$ ]] ||
		fail "t-nomatch: $(list_line t-nomatch)"
	# The columns line up: every row's description starts where the header's does.
	local col=${lines[0]%%DESCRIPTION*}
	local line
	line=$(list_line t-child)
	[ "${line:${#col}}" = "test child" ] ||
		fail "misaligned: '$line' vs '${lines[0]}'"
	# The catalogue is listed too, its distro bases with "-" for GPUs.
	re='^a100-ubuntu2204 +ubuntu 22\.04 +A100 '
	[[ $(list_line a100-ubuntu2204) =~ $re ]] ||
		fail "a100-ubuntu2204: $(list_line a100-ubuntu2204)"
	re='^distro/ubuntu2204 +ubuntu 22\.04 +- '
	[[ $(list_line distro/ubuntu2204) =~ $re ]] ||
		fail "distro/ubuntu2204: $(list_line distro/ubuntu2204)"
}

@test "profiles list --json: the same fields" {
	gp --profile-dir "$P" --json profiles list
	assert_status 0
	save_json
	"$PYTHON" - "$JSON" "$P" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
by = {p["name"]: p for p in d}
for p in d:
    for k in ("name", "distro", "gpus", "description", "path"):
        assert k in p, (p["name"], k)
c = by["t-child"]
assert c["distro"] == "ubuntu 22.04", c
assert c["gpus"] == ["A100", "H100"], c
assert c["description"] == "test child", c
assert c["path"] == sys.argv[2] + "/t-child.json", c
assert by["t-base"]["gpus"] == [], by["t-base"]
assert by["t-base"]["distro"] == "ubuntu 22.04"
assert by["t-odd"]["distro"] is None and by["t-odd"]["gpus"] == ["10de:9999"]
assert by["distro/ubuntu2204"]["gpus"] == []
assert "A100" in by["a100-ubuntu2204"]["gpus"]
names = [p["name"] for p in d]
assert names == sorted(names), names
PY
}

@test "profiles list: a broken profile is named on stderr, the rest listed, exit 65" {
	cp "$BAD/syntax.json" "$P/t-syntax.json"
	gp --profile-dir "$P" profiles list
	assert_status 65
	assert_stderr_has "t-syntax.json:5:5"
	assert_stdout_has "t-child"
}

# --- show ------------------------------------------------------------------

@test "profiles show: the file as written, comments and all" {
	gp --profile-dir "$P" profiles show t-child
	assert_status 0
	assert_stderr_empty
	[ "$output" = "$(cat "$P/t-child.json")" ] ||
		fail "show differs from the file:" "$output"
	# Exactly: byte for byte, final newline included.
	"$GPUPROV" --profile-dir "$P" profiles show t-child > "$BATS_TEST_TMPDIR/shown"
	assert_same_file "$P/t-child.json" "$BATS_TEST_TMPDIR/shown"
	# A path works as well as a name.
	gp --profile-dir "$P" profiles show "$P/t-child.json"
	assert_status 0
	assert_stdout_has "// A child of t-base"
}

@test "profiles show --resolved: JSON after inheritance" {
	gp --profile-dir "$P" profiles show t-child --resolved
	assert_status 0
	assert_stderr_empty
	save_json
	refute_stdout_has "//"
	jeq 'd["name"]' t-child
	jeq 'd["description"]' "test child"
	# Objects merge: the parent's os_id and version_id with the child's GPUs.
	jeq 'd["match"]["os_id"]' ubuntu
	jeq 'd["match"]["version_id"]' 22.04
	jeq 'len(d["match"]["gpus"])' 4
	jeq '"extends" in d' false
	# The option may stand anywhere.
	gp --resolved --profile-dir "$P" profiles show t-child
	assert_status 0
	save_json
	jeq 'd["match"]["os_id"]' ubuntu
}

@test "profiles show --json: one document; --resolved elsewhere is a usage error" {
	gp --profile-dir "$P" --json profiles show t-child
	assert_status 0
	save_json
	jeq 'd["name"]' t-child
	jeq 'd["path"]' "$P/t-child.json"
	[ "$(json_get "$JSON" 'd["text"]')" = "$(cat "$P/t-child.json")" ]
	gp --profile-dir "$P" profiles list --resolved
	assert_status 2
	assert_stderr_has "--resolved"
	assert_usage_on_stderr
	gp --root / status --resolved
	assert_status 2
	assert_stderr_has "--resolved"
}

@test "profiles show: a missing or broken profile -> exit 65" {
	gp --profile-dir "$P" profiles show t-missing
	assert_status 65
	assert_stderr_has "not found"
	gp profiles show "$BAD/syntax.json"
	assert_status 65
	assert_stderr_has "syntax.json:5:5"
}

# --- lint ------------------------------------------------------------------

@test "profiles lint: clean files -> FILE: ok each, exit 0" {
	gp --profile-dir "$P" profiles lint "$P/t-child.json" "$P/t-base.json"
	assert_status 0
	assert_stdout_has "$P/t-child.json: ok"
	assert_stdout_has "$P/t-base.json: ok"
	[ "${#lines[@]}" -eq 2 ] || fail "expected two lines:" "$output"
}

@test "profiles lint: a broken file -> exit 65 with FILE:LINE:COL" {
	gp profiles lint "$BAD/syntax.json"
	assert_status 65
	assert_stdout_has "$BAD/syntax.json:5:5: "
	refute_stdout_has ": ok"
	gp profiles lint "$BAD/unknown-key.json"
	assert_status 65
	assert_stdout_has "$BAD/unknown-key.json:4:14: "
	assert_stdout_has "did you mean"
}

@test "profiles lint: several files -> every problem of every file, clean ones ok" {
	gp --profile-dir "$P" profiles lint "$P/t-child.json" "$BAD/syntax.json" \
		"$BAD/unknown-key.json" "$BAD/duplicate.json" "$BAD/wrong-type.json" \
		"$P/t-base.json" "$BATS_TEST_TMPDIR/missing.json"
	assert_status 65
	assert_stdout_has "$P/t-child.json: ok"
	assert_stdout_has "$BAD/syntax.json:5:5: "
	assert_stdout_has "$BAD/unknown-key.json:4:14: "
	assert_stdout_has "$BAD/duplicate.json:5:5: "
	assert_stdout_has "$BAD/wrong-type.json:6:15: "
	assert_stdout_has "$P/t-base.json: ok"
	assert_stdout_has "$BATS_TEST_TMPDIR/missing.json: "
	[ "${#lines[@]}" -eq 7 ] || fail "expected one line per file:" "$output"
	# In the order given.
	[[ ${lines[0]} == "$P/t-child.json: ok" ]] || fail "first line: ${lines[0]}"
	[[ ${lines[6]} == "$BATS_TEST_TMPDIR/missing.json: "* ]] ||
		fail "last line: ${lines[6]}"
}

@test "profiles lint: a file named without .json or a slash is still a file" {
	cp "$P/t-nomatch.json" "$BATS_TEST_TMPDIR/t-nomatch"
	cd "$BATS_TEST_TMPDIR"
	gp profiles lint t-nomatch
	assert_status 0
	assert_stdout_has "t-nomatch: ok"
	gp profiles lint
	assert_status 2
	assert_usage_on_stderr
}

@test "profiles lint --json: one document per run, a status per file" {
	gp --profile-dir "$P" --json profiles lint "$P/t-child.json" "$BAD/syntax.json"
	assert_status 65
	save_json
	jeq 'd["files"][0]["file"]' "$P/t-child.json"
	jeq 'd["files"][0]["status"]' ok
	jeq 'd["files"][0]["error"]' null
	jeq 'd["files"][1]["status"]' invalid
	[[ $(json_get "$JSON" 'd["files"][1]["error"]') == "$BAD/syntax.json:5:5: "* ]]
	jeq 'd["exit_code"]' 65
}

# The compatibility rules: CUDA 12.4 needs driver >= 550.54.14; branch 470
# is far older.
incompatible_profile() {
	cat > "$1" <<'EOF'
{
  "name": "t-incompatible",
  "description": "CUDA 12.4 on driver branch 470",
  "match": { "os_id": "ubuntu", "version_id": "22.04", "gpus": ["10de:20b0"] },
  "stages": {
    "driver": { "method": "apt", "branch": "470", "flavor": "server",
                "modules": "proprietary" },
    "cuda": { "method": "repo", "version": "12.4" }
  }
}
EOF
}

@test "profiles lint: an incompatible profile -> exit 4 naming the rule" {
	incompatible_profile "$P/t-incompatible.json"
	gp --profile-dir "$P" profiles lint "$P/t-incompatible.json"
	assert_status 4
	assert_stdout_has "$P/t-incompatible.json: rule driver-cuda: "
	refute_stdout_has "t-incompatible.json: ok"
	# Next to a clean file: both reported, still 4.
	gp --profile-dir "$P" profiles lint "$P/t-incompatible.json" "$P/t-child.json"
	assert_status 4
	assert_stdout_has "$P/t-child.json: ok"
	assert_stdout_has "rule driver-cuda: "
	# Next to a broken file: 65 wins, both reported.
	gp --profile-dir "$P" profiles lint "$BAD/syntax.json" "$P/t-incompatible.json"
	assert_status 65
	assert_stdout_has "$BAD/syntax.json:5:5: "
	assert_stdout_has "$P/t-incompatible.json: rule driver-cuda: "
	gp --profile-dir "$P" --json profiles lint "$P/t-incompatible.json"
	assert_status 4
	save_json
	jeq 'd["files"][0]["status"]' incompatible
	[ "$(json_get "$JSON" '[i["rule"] for i in d["files"][0]["issues"]]')" != "[]" ]
	jeq 'd["files"][0]["issues"][0]["rule"]' driver-cuda
}

@test "profiles lint: an overridden rule is reported with its reason, exit 0" {
	incompatible_profile "$P/t-overridden.json"
	"$PYTHON" - "$P/t-overridden.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["name"] = "t-overridden"
d["override"] = {"rule": "driver-cuda",
                 "reason": "lab box, forward-compat package installed"}
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
	gp --profile-dir "$P" profiles lint "$P/t-overridden.json"
	assert_status 0
	assert_stdout_has "$P/t-overridden.json: rule driver-cuda overridden: lab box, "\
"forward-compat package installed"
	assert_stdout_has "$P/t-overridden.json: ok"
}

@test "profiles lint: every catalogue profile is clean" {
	local files
	# The profiles on the bases whose NVIDIA keyring no source pins
	# (distro/ubuntu2604, debian13, rocky10) are linted in the next test.
	files=$(find "$REPO_ROOT/profiles" -name '*.json' | grep -v -e 2604 -e debian13 -e rocky10 |
		LC_ALL=C sort)
	# shellcheck disable=SC2086
	gp profiles lint $files
	assert_status 0
	refute_stdout_has "rule "
	# One "ok" line per file, and a warning line for each profile on a
	# branch past its end of life (R535: a100-ubuntu2204, the docker
	# example that extends it, t4-ubuntu2204).
	local oks warned
	oks=$(printf '%s\n' "$output" | grep -c ': ok$')
	[ "$oks" -eq "$(printf '%s\n' "$files" | wc -l)" ] || fail "one ok per file:" "$output"
	warned=$(printf '%s\n' "$output" | grep ': warning: ' | sed 's|^.*/profiles/||; s|: warning: .*||' | tr '\n' ' ')
	[ "$warned" = "a100-ubuntu2204-docker.json a100-ubuntu2204.json t4-ubuntu2204.json " ] ||
		fail "end-of-life warnings for: $warned" "$output"
	[ "${#lines[@]}" -eq $((oks + 3)) ] || fail "nothing else:" "$output"
}

@test "profiles lint: the profiles on a base whose NVIDIA key is not pinned are blocked for that pin alone" {
	local f p s n
	# Ubuntu 26.04 and Debian 13: no source gives the sha256 of their
	# cuda-keyring package; Rocky 10: NVIDIA's new rhel10 key is
	# unconfirmed (docs/reference/stack-2026.md section 1). The bases lint
	# clean (they enable no stage).
	gp profiles lint "$REPO_ROOT"/profiles/distro/{ubuntu2604,debian13,rocky10}.json
	assert_status 0
	for p in h200-ubuntu2604:cuda b200-ubuntu2604:cuda b300-ubuntu2604:cuda \
		rtxpro6000-ubuntu2604:cuda gb200-ubuntu2604-arm64:cuda \
		"l40s-debian13:driver cuda" "a100-rocky10:driver cuda"; do
		f=$REPO_ROOT/profiles/${p%%:*}.json
		gp profiles lint "$f"
		assert_status 4
		refute_stdout_has "warning"
		n=0
		for s in ${p#*:}; do
			assert_stdout_has "$f: would be blocked: stage $s: cannot add NVIDIA's repository: no sha256 for the keyring https://developer.download.nvidia.com/compute/cuda/repos/"
			n=$((n + 1))
		done
		[ "${#lines[@]}" -eq "$n" ] || fail "only the keyring pin for $f:" "$output"
	done
	# Pinned by the operator, the same profile lints clean.
	cat > "$P/t-pinned-2604.json" <<'EOF'
{ "name": "t-pinned-2604", "extends": "h200-ubuntu2604",
  "distro": { "keyring_sha256": "0000000000000000000000000000000000000000000000000000000000000000" } }
EOF
	gp --profile-dir "$P" profiles lint "$P/t-pinned-2604.json"
	assert_status 0
	assert_stdout_has "$P/t-pinned-2604.json: ok"
}

@test "profiles lint: a branch past its end of life warns with the date and the branch to move to, exit 0" {
	local f=$REPO_ROOT/profiles/a100-ubuntu2204.json
	gp profiles lint "$f"
	assert_status 0
	assert_stdout_has "$f: warning: driver branch 535 (long-term support) reached its end of life at the end of June 2026 (today is 2026-12-01) and gets no more fixes; move to driver branch 580 (long-term support, supported until June 2028), the longest-supported branch with the proprietary modules"
	assert_stdout_has "$f: ok"
	gp --json profiles lint "$f"
	assert_status 0
	save_json
	jeq 'd["files"][0]["status"]' ok
	jeq 'd["files"][0]["warnings"][0]["id"]' driver.branch_eol
	[[ $(json_get "$JSON" 'd["files"][0]["warnings"][0]["message"]') == *"move to driver branch 580"* ]] ||
		fail "no branch to move to:" "$output"
	# The last day of June 2026 is still supported.
	GPUPROV_TODAY=2026-06-30 gp profiles lint "$f"
	assert_status 0
	refute_stdout_has "warning"
	# Open modules on a V100-free box move to R620, supported longest.
	cat > "$P/t-eol-open.json" <<'EOF'
{ "name": "t-eol-open", "description": "R610 (new feature), open",
  "match": { "gpus": ["10de:2330"] },
  "stages": { "driver": { "method": "apt", "version": "610.57.04", "modules": "open" } } }
EOF
	gp profiles lint "$P/t-eol-open.json"
	assert_status 0
	assert_stdout_has "warning: driver 610.57.04 (branch 610, new feature) reached its end of life at the end of August 2026"
	assert_stdout_has "move to driver branch 620 (long-term support, supported until September 2029)"
	# Once R580 has ended too, no long-term branch has proprietary modules.
	GPUPROV_TODAY=2028-07-01 gp profiles lint "$f"
	assert_status 0
	assert_stdout_has "no supported long-term branch has the proprietary modules the profile needs"
	GPUPROV_TODAY=someday gp profiles lint "$f"
	assert_status 2
	assert_stderr_has "GPUPROV_TODAY must be a date, YYYY-MM-DD"
}

@test "profiles lint: every problem of an invalid file, not just the first" {
	f=$BATS_TEST_TMPDIR/many.json
	printf '{\n "name": "many",\n "stagez": {},\n "match": {"os": 1, "arch": "mips"},\n "stages": {"driver": {"branch": "abc", "flavor": "serv"}}\n}\n' > "$f"
	run "$GPUPROV" profiles lint "$f"
	[ "$status" -eq 65 ] || fail "exit $status: $output"
	for want in "$f:3:2: unknown key \"stagez\"; did you mean \"stages\"?" \
		"$f:4:12: unknown key \"os\"" \
		"$f:4:29: \"arch\" must be one of x86_64, aarch64 (got \"mips\")" \
		"$f:5:34: \"branch\" must be a driver branch" \
		"$f:5:51: \"flavor\" must be one of server, desktop (got \"serv\"; did you mean \"server\"?)"; do
		grep -qF -- "$want" <<< "$output" || fail "lint output lacks: $want" "$output"
	done
	[ "$(grep -c "^$f:" <<< "$output")" -eq 5 ] || fail "expected 5 problems:" "$output"
	# install still stops at the first one.
	run --separate-stderr "$GPUPROV" plan --profile "$f"
	[ "$status" -eq 65 ]
	[ "$(grep -c "$f:" <<< "$stderr")" -eq 1 ] || fail "plan reported more than one:" "$stderr"
}

@test "profiles lint: \"extends\" naming no profile is placed at its value (FILE:LINE:COL), once" {
	printf '{\n  "name": "t-orphan",\n  "extends": "no-such-profile"\n}\n' > "$P/t-orphan.json"
	gp --profile-dir "$P" profiles lint "$P/t-orphan.json"
	assert_status 65
	[ "${#lines[@]}" -eq 1 ] || fail "expected one line:" "$output"
	[[ ${lines[0]} == "$P/t-orphan.json:3:14: profile \"no-such-profile\" not found; "* ]] ||
		fail "not placed: ${lines[0]}"
}

@test "profiles lint: a profile whose stages would block for a missing pin -> exit 4 naming each" {
	cat > "$P/t-unpinned.json" <<'EOF2'
{
  "name": "t-unpinned",
  "description": "downloads without pins",
  "match": { "os_id": "rocky", "version_id": "9" },
  "distro": { "package_manager": "dnf", "nvidia_repo": "rhel9",
              "keyring_url": "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub",
              "keyring_fingerprint": "610C7B14E068A878070DA4E99CD0A493D42D0685" },
  "stages": {
    "driver": { "method": "dnf", "branch": "580", "modules": "open" },
    "cuda": { "method": "repo", "version": "12.8" },
    "cudnn": { "method": "tarball", "version": "9.8.0.87", "cuda": "12" },
    "pytorch": { "method": "conda", "python": "3.11", "packages": ["torch==2.7.1"] }
  }
}
EOF2
	gp --profile-dir "$P" profiles lint "$P/t-unpinned.json"
	assert_status 4
	refute_stdout_has ": ok"
	local f="$P/t-unpinned.json: would be blocked: stage"
	assert_stdout_has "$f cudnn: stages.cudnn.sha256 is not set"
	assert_stdout_has "$f pytorch: stages.pytorch.installer_sha256 is not set"
	for s in driver cuda; do
		assert_stdout_has "$f $s: cannot add NVIDIA's repository: no sha256 for the keyring"
	done
	[ "${#lines[@]}" -eq 4 ] || fail "expected four problems:" "$output"
	gp --profile-dir "$P" --json profiles lint "$P/t-unpinned.json"
	assert_status 4
	save_json
	jeq 'd["files"][0]["status"]' blocked
	jeq 'len(d["files"][0]["blocked"])' 4
	# A distro base enables no stage: nothing of it can block.
	gp profiles lint "$REPO_ROOT/profiles/distro/rocky9.json"
	assert_status 0
}

@test "profiles list: a base and a profile missing a pin are marked (text and JSON)" {
	cat > "$P/t-unpinned.json" <<'EOF2'
{ "name": "t-unpinned", "description": "cuDNN without its sha256",
  "stages": { "cudnn": { "method": "tarball", "version": "9.8.0.87", "cuda": "12" } } }
EOF2
	gp --profile-dir "$P" profiles list
	assert_status 0
	[[ $(list_line t-unpinned) == *"[blocked: missing pin; see profiles lint] cuDNN without its sha256" ]] ||
		fail "not marked: $(list_line t-unpinned)"
	[[ $(list_line t-child) != *blocked* ]] || fail "marked: $(list_line t-child)"
	gp --profile-dir "$P" --json profiles list
	save_json
	jeq '[p["base"] for p in d if p["name"] == "t-base"][0]' true
	jeq '[p["base"] for p in d if p["name"] == "t-unpinned"][0]' false
	jeq '[len(p["blocked"]) for p in d if p["name"] == "t-unpinned"][0]' 1
	jeq '[p["blocked"] for p in d if p["name"] == "a100-rocky9"][0]' "[]"
}
