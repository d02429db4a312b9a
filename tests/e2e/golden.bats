#!/usr/bin/env bats
# GOLDEN OUTPUTS: the text and --json plans of every catalogue profile
# (profiles/*.json) on a stub root it fits, and on one it does not (refused,
# then --force), and the verify reports of fresh and installed roots, pinned
# byte for byte in tests/e2e/expected/<fixture>/. A change to what gpuprov
# prints shows here as a diff -u (- expected, + now). When the change is
# meant, GPUPROV_UPDATE_GOLDEN=1 rewrites the expected files instead of
# comparing; review them with git diff before committing.
#
# Each golden directory holds one file per command's stdout (plan.txt,
# plan.json, verify.txt, ...) and status.txt: for each of those commands, in
# order, "== FILE: exit N" and then its stderr. Every command runs twice on
# the same root and must print the same both times (plans and reports are
# deterministic).

load helpers

setup() {
	require_root
}

# The fixture roots, by name: mkroot.sh options. Nouveau is loaded unless the
# name ends in -unloaded; the GPU is the A100 unless the name says another.
declare -gA FIXTURE=(
	[ubuntu2204]="--cuda"
	[ubuntu2204-h100]="--cuda --gpu 2330"
	[ubuntu2204-rtx4090]="--cuda --gpu 2684"
	[ubuntu2204-t4]="--cuda --gpu 1eb8"
	[ubuntu2404]="--cuda --distro ubuntu2404"
	[ubuntu2404-b200]="--cuda --distro ubuntu2404 --gpu 2901"
	[ubuntu2404-h100]="--cuda --distro ubuntu2404 --gpu 2330"
	[ubuntu2404-h200]="--cuda --distro ubuntu2404 --gpu 2335"
	[ubuntu2404-b300]="--cuda --distro ubuntu2404 --gpu 3182"
	[ubuntu2404-rtxpro6000]="--cuda --distro ubuntu2404 --gpu 2bb5"
	[debian12-l4]="--cuda --distro debian12 --gpu 27b8"
	[debian12-l40s]="--cuda --distro debian12 --gpu 26b9"
	[rocky9]="--cuda --distro rocky9"
	[ubuntu2604-h200]="--cuda --distro ubuntu2604 --gpu 2335"
	[ubuntu2604-b200]="--cuda --distro ubuntu2604 --gpu 2901"
	[ubuntu2604-b300]="--cuda --distro ubuntu2604 --gpu 3182"
	[ubuntu2604-rtxpro6000]="--cuda --distro ubuntu2604 --gpu 2bb5"
	[ubuntu2404-arm64-gh200]="--cuda --distro ubuntu2404 --arch aarch64 --gpu 2342"
	[ubuntu2604-arm64-gb200]="--cuda --distro ubuntu2604 --arch aarch64 --gpu 2941"
	[debian13-l40s]="--cuda --distro debian13 --gpu 26b9"
	[rocky10]="--cuda --distro rocky10"
)

# golden_root NAME: builds fixture NAME (or NAME without -unloaded, with
# nouveau unloaded) as $BATS_TEST_TMPDIR/NAME and prints its path.
golden_root() {
	local name=$1 base=$1 extra=
	if [ "${name%-unloaded}" != "$name" ]; then
		base=${name%-unloaded}
		extra="--nouveau unloaded"
	fi
	[ -n "${FIXTURE[$base]-}" ] || fail "no fixture $base"
	# shellcheck disable=SC2086 # the options are words
	mkroot "$BATS_TEST_TMPDIR/$name" ${FIXTURE[$base]} $extra
	printf '%s\n' "$BATS_TEST_TMPDIR/$name"
}

# sed_literal TEXT: TEXT as a sed regular expression matching itself.
sed_literal() {
	printf '%s' "$1" | sed 's/[][\.*^$|]/\\&/g'
}

# golden_normalise ROOT: stdin to stdout with what differs between runs and
# checkouts replaced, and nothing else: the fixture root (a fresh
# $BATS_TEST_TMPDIR each run) by @ROOT@, the repository (where the catalogue
# and fixture profiles are read from) by @REPO@. Plans and reports carry no
# times or pids.
golden_normalise() {
	sed -e "s|$(sed_literal "$1")|@ROOT@|g" -e "s|$(sed_literal "$REPO_ROOT")|@REPO@|g"
}

# golden_capture DIR FILE ROOT ARGS...: runs `gpuprov --root ROOT ARGS...`
# twice; both runs must print the same stdout and stderr and exit the same.
# Its stdout, normalised, goes to DIR/FILE; "== FILE: exit N" and its
# stderr are appended to DIR/status.txt.
golden_capture() {
	local dir=$1 file=$2 root=$3
	shift 3
	mkdir -p "$dir"
	local a=$BATS_TEST_TMPDIR/run1 b=$BATS_TEST_TMPDIR/run2 rc1=0 rc2=0
	"$GPUPROV" --root "$root" "$@" > "$a.out" 2> "$a.err" || rc1=$?
	"$GPUPROV" --root "$root" "$@" > "$b.out" 2> "$b.err" || rc2=$?
	if [ "$rc1" -ne "$rc2" ] || ! cmp -s "$a.out" "$b.out" || ! cmp -s "$a.err" "$b.err"; then
		diff -u "$a.out" "$b.out" >&2
		diff -u "$a.err" "$b.err" >&2
		fail "not deterministic: gpuprov --root $root $* (exit $rc1, then $rc2; diff above)"
		return 1
	fi
	golden_normalise "$root" < "$a.out" > "$dir/$file"
	{
		printf '== %s: exit %s\n' "$file" "$rc1"
		golden_normalise "$root" < "$a.err"
	} >> "$dir/status.txt"
}

# golden_check DIR EXPECTED: every file of DIR equals the one of that name
# in EXPECTED (shown as diff -u when not); with GPUPROV_UPDATE_GOLDEN=1 they
# are copied there instead.
golden_check() {
	local dir=$1 want=$2 f bad=0
	if [ "${GPUPROV_UPDATE_GOLDEN-}" = 1 ]; then
		mkdir -p "$want"
		cp "$dir"/* "$want"/
		return 0
	fi
	for f in "$dir"/*; do
		if [ ! -f "$want/${f##*/}" ]; then
			echo "missing golden file: $want/${f##*/}" >&2
			bad=1
		elif ! diff -u "$want/${f##*/}" "$f" >&2; then
			bad=1
		fi
	done
	[ "$bad" -eq 0 ] ||
		fail "gpuprov's output differs from the golden files (diff above: - expected, + now);" \
			"if the change is meant: GPUPROV_UPDATE_GOLDEN=1 bats tests/e2e/golden.bats, then review git diff"
}

# golden_plan FIXTURE PROFILE NAME [ARGS...]: NAME.txt and NAME.json, the
# text and --json `plan --profile PROFILE ARGS...` on the root of FIXTURE
# ($ROOT), into golden/FIXTURE/PROFILE/ (then golden_plan_check).
golden_plan() {
	local fixture=$1 profile=$2 name=$3
	shift 3
	local dir=$BATS_TEST_TMPDIR/golden/$fixture/$profile
	golden_capture "$dir" "$name.txt" "$ROOT" plan --profile "$profile" "$@"
	golden_capture "$dir" "$name.json" "$ROOT" --json plan --profile "$profile" "$@"
}

# golden_plan_check FIXTURE PROFILE: the plans golden_plan captured, against
# expected/FIXTURE/PROFILE/.
golden_plan_check() {
	golden_check "$BATS_TEST_TMPDIR/golden/$1/$2" "$EXPECTED/$1/$2"
}

# golden_plans PROFILE FIXTURE: PROFILE's plans on FIXTURE (which it fits),
# with nouveau loaded and unloaded (then the driver stage is planned too).
golden_plans() {
	local profile=$1 fixture=$2 variant
	for variant in "$fixture" "$fixture-unloaded"; do
		ROOT=$(golden_root "$variant")
		golden_plan "$variant" "$profile" plan
		golden_plan_check "$variant" "$profile"
	done
}

@test "golden: every catalogue profile has a golden plan test below" {
	local f name
	for f in "$REPO_ROOT"/profiles/*.json; do
		name=${f##*/}
		name=${name%.json}
		grep -q "^	golden_plans $name " "$BATS_TEST_FILENAME" ||
			fail "no golden plan for profiles/$name.json in golden.bats"
	done
}

@test "golden plan: a100-ubuntu2204" {
	golden_plans a100-ubuntu2204 ubuntu2204
}

@test "golden plan: a100-ubuntu2404" {
	golden_plans a100-ubuntu2404 ubuntu2404
}

@test "golden plan: a100-rocky9" {
	golden_plans a100-rocky9 rocky9
}

@test "golden plan: b200-ubuntu2404" {
	golden_plans b200-ubuntu2404 ubuntu2404-b200
}

@test "golden plan: b300-ubuntu2404" {
	golden_plans b300-ubuntu2404 ubuntu2404-b300
}

@test "golden plan: h100-ubuntu2204" {
	golden_plans h100-ubuntu2204 ubuntu2204-h100
}

@test "golden plan: h100-ubuntu2404" {
	golden_plans h100-ubuntu2404 ubuntu2404-h100
}

@test "golden plan: h200-ubuntu2404" {
	golden_plans h200-ubuntu2404 ubuntu2404-h200
}

@test "golden plan: l4-debian12" {
	golden_plans l4-debian12 debian12-l4
}

@test "golden plan: l40s-debian12" {
	golden_plans l40s-debian12 debian12-l40s
}

@test "golden plan: rtx4090-ubuntu2204" {
	golden_plans rtx4090-ubuntu2204 ubuntu2204-rtx4090
}

@test "golden plan: rtxpro6000-ubuntu2404" {
	golden_plans rtxpro6000-ubuntu2404 ubuntu2404-rtxpro6000
}

@test "golden plan: a100-ubuntu2204-docker" {
	golden_plans a100-ubuntu2204-docker ubuntu2204
}

@test "golden plan: t4-ubuntu2204" {
	golden_plans t4-ubuntu2204 ubuntu2204-t4
}

@test "golden plan: h200-ubuntu2604" {
	golden_plans h200-ubuntu2604 ubuntu2604-h200
}

@test "golden plan: b200-ubuntu2604" {
	golden_plans b200-ubuntu2604 ubuntu2604-b200
}

@test "golden plan: b300-ubuntu2604" {
	golden_plans b300-ubuntu2604 ubuntu2604-b300
}

@test "golden plan: rtxpro6000-ubuntu2604" {
	golden_plans rtxpro6000-ubuntu2604 ubuntu2604-rtxpro6000
}

@test "golden plan: gh200-ubuntu2404-arm64" {
	golden_plans gh200-ubuntu2404-arm64 ubuntu2404-arm64-gh200
}

@test "golden plan: gb200-ubuntu2604-arm64" {
	golden_plans gb200-ubuntu2604-arm64 ubuntu2604-arm64-gb200
}

@test "golden plan: l40s-debian13" {
	golden_plans l40s-debian13 debian13-l40s
}

@test "golden plan: a100-rocky10" {
	golden_plans a100-rocky10 rocky10
}

@test "golden plan: every other profile on the ubuntu2204 A100 root: refused, then --force" {
	ROOT=$(golden_root ubuntu2204)
	local f profile
	for f in "$REPO_ROOT"/profiles/*.json; do
		profile=${f##*/}
		profile=${profile%.json}
		# A profile made for this root has its golden plans above.
		! grep -q "^	golden_plans $profile ubuntu2204\$" "$BATS_TEST_FILENAME" || continue
		golden_plan ubuntu2204 "$profile" plan
		golden_plan ubuntu2204 "$profile" plan-force --force
		golden_plan_check ubuntu2204 "$profile"
	done
}

# golden_verify FIXTURE: verify.txt and verify.json of $ROOT (the profile
# the journal records), against expected/FIXTURE/.
golden_verify() {
	local dir=$BATS_TEST_TMPDIR/golden/$1
	golden_capture "$dir" verify.txt "$ROOT" verify
	golden_capture "$dir" verify.json "$ROOT" --json verify
	golden_check "$dir" "$EXPECTED/$1"
}

@test "golden verify: fresh root, without and with --profile" {
	ROOT=$(golden_root ubuntu2204)
	local dir=$BATS_TEST_TMPDIR/golden/ubuntu2204-fresh
	golden_capture "$dir" verify.txt "$ROOT" verify
	golden_capture "$dir" verify.json "$ROOT" --json verify
	golden_capture "$dir" verify-profile.txt "$ROOT" verify --profile "$PROFILE"
	golden_capture "$dir" verify-profile.json "$ROOT" --json verify --profile "$PROFILE"
	golden_check "$dir" "$EXPECTED/ubuntu2204-fresh"
}

@test "golden verify: ubuntu2204 after nouveau,env installed (reboot pending)" {
	ROOT=$(golden_root ubuntu2204)
	gp --root "$ROOT" install --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	golden_verify ubuntu2204-installed
}

@test "golden verify: ubuntu2204, nouveau unloaded, after nouveau,env installed" {
	ROOT=$(golden_root ubuntu2204-unloaded)
	gp --root "$ROOT" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	golden_verify ubuntu2204-unloaded-installed
}

@test "golden verify: rocky9, nouveau unloaded, after the fixture profile installed" {
	ROOT=$(golden_root rocky9-unloaded)
	gp --root "$ROOT" --profile-dir "$FIXTURE_PROFILES" install --profile a100-rocky9
	assert_status 0
	golden_verify rocky9-unloaded-installed
}
