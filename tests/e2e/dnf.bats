#!/usr/bin/env bats
# The driver stage on a dnf distribution against real dnf and rpm (Debian's
# dnf 4, its versionlock plugin, rpm 4.18): the Rocky-10-posing root of
# rocky_dnf_root (helpers.bash) with an A100 in sys/, NVIDIA's rhel10
# repository pointed at the signed stand-in repository of
# tests/fixtures/rpmrepo.sh (nvidia-open, cuda-drivers and their split
# packages in 580.95.05 and 580.105.08, each meta package pinning its set at
# exactly its version; the key
# served over loopback HTTPS). The tests run in order on that root: install
# 580.95.05 (entry 1), held by versionlock; upgrade to 580.105.08 (entry 2):
# each package's old -> new version, the lock released and set again;
# uninstall --only driver blocked by another stage's package that requires
# a driver package (rpm's own Requires, read from its database); rollback
# --dry-run, then rollback: dnf downgrades the set to entry 1's versions, held
# again, as planned; a rollback refused before any change once the
# repository no longer offers the older versions, naming them; uninstall:
# the root as before the first install; last, on that clean root, a move
# from the open modules to the proprietary ones (RHEL 10's cuda-drivers and
# kmod-nvidia-latest-dkms, which conflicts with kmod-nvidia-open-dkms), then
# uninstall again. After each: rpm's
# installed set and the versionlock list against the expected, and the
# plan's effects against the run's.

load helpers

KVER=6.12.0-55.9.1.el10_0.x86_64
# Left out of the before/after snapshots: gpuprov's log and lock, and
# sqlite's shared-memory index of rpm's database, which every reader of the
# database (rpm -q as much as gpuprov) rewrites.
VOLATILE="var/log/gpuprov.log var/lib/gpuprov/lock var/lib/rpm/rpmdb.sqlite-shm"
A=580.95.05
B=580.105.08

setup_file() {
	R=$BATS_FILE_TMPDIR/root
	export R
	rocky_dnf_root "$R" || return 0
	a100_dev "$R"
	dnf_state > "$BATS_FILE_TMPDIR/before.state"
}

setup() {
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	P=$BATS_TEST_TMPDIR/p.json
	start_https_server
	cp "$RR/key.asc" "$WWW/key.pub"
}

teardown() {
	stop_https_server
}

# dnf_state: what uninstall must give back: every file (rpm's and dnf's
# databases, caches and logs, gpuprov's journal and backups left out, and
# what the tests change themselves: the stand-in /proc, the repository in
# /srv), then rpm's installed packages and the versionlock list.
dnf_state() {
	manifest "$R" | awk '{
		p = (length($1) == 64 && $1 ~ /^[0-9a-f]+$/) ? $2 : $1
		if (p ~ /^\.\/(proc|srv|var\/lib\/rpm|var\/lib\/dnf|var\/cache|var\/log|var\/lib\/gpuprov|etc\/pki\/rpm-gpg|tmp|run|var\/run)(\/|$)/) next
		print
	}'
	echo "--- rpm"
	chroot "$R" rpm -qa --qf '%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE}\n' | sort
	echo "--- versionlock"
	cat "$R/etc/dnf/plugins/versionlock.list"
}

# profile VERSION [MODULES]: $P installs the driver at VERSION from the
# stand-in repository, its open modules unless told, held.
profile() {
	cat > "$P" <<JSON
{
  "name": "dnf-$1",
  "extends": "distro/rocky10",
  "distro": { "repo_url": "file:///srv/rpmrepo/",
              "keyring_url": "https://127.0.0.1:$PORT/key.pub",
              "keyring_sha256": "$(sha256sum < "$RR/key.asc" | cut -d' ' -f1)",
              "keyring_fingerprint": "$(cat "$RR/key.fpr")" },
  "stages": { "driver": { "method": "dnf", "version": "$1", "modules": "${2:-open}", "hold": true } }
}
JSON
}

# journal_has_package NAME: the journal records NAME as installed by gpuprov.
journal_has_package() {
	"$PYTHON" -c 'import json, sys
sys.exit(sys.argv[2] not in json.load(open(sys.argv[1]))["packages"])' \
		"$R/var/lib/gpuprov/state.json" "$1"
}

# assert_driver_set VERSION [proprietary]: rpm has the driver's set at
# VERSION (nvidia-open and kmod-nvidia-open-dkms, or cuda-drivers and
# kmod-nvidia-latest-dkms, and the split packages; the kernel's headers),
# nothing of another version, and versionlock locks exactly the set.
assert_driver_set() {
	local got want names
	names="kmod-nvidia-open-dkms nvidia-open"
	[ "${2-}" != proprietary ] || names="cuda-drivers kmod-nvidia-latest-dkms"
	names="$names nvidia-driver-cuda nvidia-driver-cuda-libs nvidia-driver-libs nvidia-kmod-common"
	got=$(chroot "$R" rpm -qa --qf '%{NAME} %{VERSION}\n' | grep -v '^gpg-pubkey ' | sort)
	# shellcheck disable=SC2086 # a list of names
	want=$({
		echo "kernel-devel ${KVER%%-*}"
		printf '%s '"$1"'\n' $names
	} | sort)
	[ "$got" = "$want" ] || fail "rpm has:" "$got" "expected:" "$want"
	got=$(grep -v '^#' "$R/etc/dnf/plugins/versionlock.list" | grep . | sort)
	# shellcheck disable=SC2086 # a list of names
	want=$(printf '%s-3:'"$1"'-1.el10.*\n' $names | sort)
	[ "$got" = "$want" ] || fail "versionlock.list:" "$got" "expected:" "$want"
}

@test "dnf: install $A with open modules from NVIDIA's repository, held by versionlock, as planned" {
	profile "$A"
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	assert_stdout_has "install kernel-devel-$KVER nvidia-open-$A"
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P"
	assert_status 5
	assert_driver_set "$A"
	# dnf imported the repository's key for its first package: recorded as
	# that one key (rpm's gpg-pubkey-KEYID-DATE), never as every gpg-pubkey.
	local key
	key=$(chroot "$R" rpm -q gpg-pubkey)
	[ "$key" = "gpg-pubkey-$(tail -c 9 "$RR/key.fpr" | tr A-F a-f)-$(chroot "$R" rpm -q --qf '%{RELEASE}' gpg-pubkey)" ] ||
		fail "rpm -q gpg-pubkey: $key"
	journal_has_package "$key"
	journal_has_package "kernel-devel-$KVER"
	! journal_has_package gpg-pubkey || fail "the journal names every key (gpg-pubkey)"
	loaded "$A" open
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 0
}

@test "dnf: upgrade to $B: each package's old -> new version, the lock released and set again, as planned" {
	profile "$B"
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	assert_stdout_has "nvidia-open 3:$A-1.el10 -> $B"
	assert_stdout_has "versionlock delete"
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P"
	assert_status 5
	assert_driver_set "$B"
	loaded "$B" open
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 0
}

@test "dnf: uninstall --only driver blocks when another stage's package requires a driver package (rpm's own Requires), and changes nothing" {
	# Installed with rpm itself, recorded as the fabric manager stage records its own.
	cp "$RR/extra/nvidia-fabric-manager-$B-1.el10.noarch.rpm" "$R/tmp/fm.rpm"
	chroot "$R" rpm -i /tmp/fm.rpm
	rm "$R/tmp/fm.rpm"
	journal_edit 'j["packages"]["nvidia-fabric-manager"] = {"version": "3:'"$B"'-1.el10", "stage": "fabric_manager"}'
	# shellcheck disable=SC2086 # a list of paths
	snapshot "$R" installed $VOLATILE
	gp --root "$R" uninstall --only driver --dry-run
	assert_status 4
	assert_stdout_has "driver: blocked - nothing changed: removing "
	assert_stdout_has " would take along nvidia-fabric-manager (stage fabric_manager), which gpuprov installed for that stage and which depends on them"
	gp --root "$R" uninstall --only driver
	assert_status 4
	# shellcheck disable=SC2086 # a list of paths
	assert_unchanged "$R" installed $VOLATILE
	chroot "$R" rpm -e nvidia-fabric-manager
	journal_edit 'del j["packages"]["nvidia-fabric-manager"]'
}

@test "dnf: rollback --dry-run plans dnf's downgrade to entry 1's versions and changes nothing; rollback does it, held again, as planned" {
	# shellcheck disable=SC2086 # a list of paths
	snapshot "$R" before $VOLATILE
	gp --root "$R" rollback --dry-run
	assert_status 5
	assert_stdout_has "back to history entry 1: installs nvidia-open=3:$A-1.el10"
	assert_stdout_has "install nvidia-open-3:$A-1.el10"
	# shellcheck disable=SC2086 # a list of paths
	assert_unchanged "$R" before $VOLATILE
	local queries
	queries=$(grep -c "run dnf -q -C " "$R/var/log/gpuprov.log" || true)
	PLAN_CMD="rollback --dry-run" RUN_CMD=rollback assert_plan_matches_run "$R"
	assert_status 5
	# The real run asks dnf once: its check and the step that follows it
	# share the answer (the log had the query twice before they did).
	[ "$(grep -c "run dnf -q -C " "$R/var/log/gpuprov.log")" -eq $((queries + 1)) ] ||
		fail "dnf was not asked exactly once:" "$(grep "run dnf -q -C " "$R/var/log/gpuprov.log")"
	assert_driver_set "$A"
	loaded "$A" open
	gp --root "$R" --ca-file "$CA" install
	assert_status 0
}

@test "dnf: a rollback is refused before any change, naming them, when no repository offers the older versions any more" {
	# Entry 1's versions leave the repository; dnf's cache learns it.
	rm "$R/srv/rpmrepo/"*"-$B-1.el10.noarch.rpm"
	createrepo_c -q --update "$R/srv/rpmrepo"
	chroot "$R" dnf -q makecache --refresh
	# shellcheck disable=SC2086 # a list of paths
	snapshot "$R" before $VOLATILE
	gp --root "$R" rollback --dry-run
	assert_status 4
	assert_stdout_has "cannot roll back to history entry 2: no configured repository offers nvidia-open-3:$B-1.el10"
	assert_stdout_has "(the repositories in dnf's cache of the root)"
	gp --root "$R" rollback
	assert_status 4
	assert_stderr_has "nothing was changed"
	# shellcheck disable=SC2086 # a list of paths
	assert_unchanged "$R" before $VOLATILE
	assert_driver_set "$A"
}

@test "dnf: uninstall removes what gpuprov added, the one key dnf imported for its repository too: the root as before the first install, as planned" {
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 5
	chroot "$R" rpm -q gpg-pubkey && fail "the repository's key is still imported"
	diff -u "$BATS_FILE_TMPDIR/before.state" <(dnf_state) || fail "the root differs from before the first install"
}

@test "dnf: open -> proprietary modules (RHEL 10, no streams): nvidia-open and kmod-nvidia-open-dkms the stage installed go, released first, as planned; uninstall after it gives the root back" {
	profile "$A"
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 5
	assert_driver_set "$A"
	loaded "$A" open
	profile "$A" proprietary
	gp --root "$R" --ca-file "$CA" plan --profile "$P"
	assert_status 5
	assert_stdout_has "nvidia-open 3:$A-1.el10 -> removed"
	assert_stdout_has "kmod-nvidia-open-dkms 3:$A-1.el10 -> removed"
	assert_stdout_line "      run dnf -y -q remove --noautoremove kmod-nvidia-open-dkms nvidia-open"
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P"
	assert_status 5
	assert_driver_set "$A" proprietary
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 5
	diff -u "$BATS_FILE_TMPDIR/before.state" <(dnf_state) || fail "the root differs from before the first install"
}
