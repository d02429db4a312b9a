#!/usr/bin/env bats
# The driver from NVIDIA's repository (source "nvidia") moving between its
# two module flavors, against real apt and dpkg: the Ubuntu-posing Debian 12
# root of ubuntu_archive_root (helpers.bash) with an A100 in sys/, whose only
# repository is the one gpuprov adds, NVIDIA's, pointed at the stand-in
# repository of tests/fixtures/aptrepo.sh with the 580 branch and NVIDIA's
# meta packages (--branch580 --nvidia-meta: nvidia-open-580 and
# cuda-drivers-580 at 580.82.07, each pinning its flavor's packages; the
# open flavor's nvidia-dkms and nvidia-kernel-source conflicting with the
# proprietary ones). The tests run in order on that root: install the open
# modules; move to the proprietary ones (the open flavor's packages the
# stage installed go, released first, as planned); a move back refused by
# apt, changing nothing, while a package of the other flavor is the
# operator's (gpuprov removes only what it installed); the move back once it
# is gpuprov's again.

load helpers

V=580.82.07
B580=580.82.07-0ubuntu1

setup_file() {
	R=$BATS_FILE_TMPDIR/root
	export R
	ubuntu_archive_root "$R" --branch580 --nvidia-meta --list cuda-ubuntu2204-x86_64 || return 0
	# No archive of its own: the driver comes from the repository gpuprov adds.
	rm "$R/etc/apt/sources.list.d/stand-in.list"
	a100_dev "$R"
}

setup() {
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	P=$BATS_TEST_TMPDIR/p.json
	start_https_server
	cp "$BATS_FILE_TMPDIR/aptrepo/cuda-keyring_1.1-1_all.deb" "$WWW/"
}

teardown() {
	stop_https_server
}

# profile MODULES: $P installs NVIDIA's driver 580.82.07 with MODULES (open
# or proprietary) built by DKMS, held.
profile() {
	cat > "$P" <<JSON
{
  "name": "nvidia-repo-$1",
  "extends": "distro/ubuntu2204",
  "distro": {
    "keyring_url": "https://127.0.0.1:$PORT/cuda-keyring_1.1-1_all.deb",
    "keyring_sha256": "$(sha256sum < "$WWW/cuda-keyring_1.1-1_all.deb" | cut -d' ' -f1)",
    "keyring_fingerprint": "$(cat "$BATS_FILE_TMPDIR/aptrepo/key.fpr")",
    "repo_url": "file:///srv/repo/"
  },
  "stages": { "driver": { "method": "apt", "source": "nvidia", "branch": "580",
    "version": "$V", "modules": "$1", "kernel_modules": "dkms", "hold": true } }
}
JSON
}

# flavor_set open|proprietary: the packages of that flavor's install.
flavor_set() {
	local p
	if [ "$1" = open ]; then
		set -- nvidia-open-580 nvidia-driver-580-open nvidia-dkms-580-open nvidia-kernel-source-580-open
	else
		set -- cuda-drivers-580 nvidia-driver-580 nvidia-dkms-580 nvidia-kernel-source-580
	fi
	for p in "$@" nvidia-utils-580 libnvidia-compute-580 nvidia-kernel-common-580; do
		echo "$p=$B580"
	done | sort
}

@test "nvidia repo: install the open modules (nvidia-open-580), held, as planned" {
	profile open
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	assert_stdout_has "nvidia-open-580=$V"
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P"
	assert_status 5
	assert_nvidia_set "$(flavor_set open)"
	loaded "$V" open
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 0
}

@test "nvidia repo: open -> proprietary modules: the open flavor's packages the stage installed go, released first, as planned" {
	profile proprietary
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	assert_stdout_has "nvidia-open-580 $B580 -> removed"
	assert_stdout_has "nvidia-dkms-580-open $B580 -> removed"
	refute_stdout_has "libnvidia-compute-580 $B580 -> removed"
	local old="nvidia-dkms-580-open nvidia-driver-580-open nvidia-kernel-source-580-open nvidia-open-580"
	assert_stdout_line "      run apt-mark unhold $old"
	assert_stdout_line "      run apt-get -y -q remove --purge $old"
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P"
	assert_status 5
	assert_nvidia_set "$(flavor_set proprietary)"
	loaded "$V"
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 0
}

@test "nvidia repo: a package of the other flavor that was the operator's is not removed: apt refuses the move, nothing changes" {
	journal_edit 'j["packages"]["nvidia-kernel-source-580"]["installed_before"] = "'"$B580"'"'
	profile open
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	refute_stdout_has "nvidia-kernel-source-580 $B580 -> removed"
	# Every file (apt's and dpkg's own databases and logs, gpuprov's journal
	# aside), each package's status and version, the held set (state).
	state "$R" > "$BATS_TEST_TMPDIR/before.state"
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 1
	assert_stderr_has "apt would have removed installed packages that the plan does not list"
	diff -u "$BATS_TEST_TMPDIR/before.state" <(state "$R") || fail "the root changed"
	assert_nvidia_set "$(flavor_set proprietary)"
	journal_edit 'del j["packages"]["nvidia-kernel-source-580"]["installed_before"]'
}

@test "nvidia repo: proprietary -> open again once the other flavor is all gpuprov's, as planned" {
	profile open
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P"
	assert_status 5
	assert_nvidia_set "$(flavor_set open)"
}
