#!/usr/bin/env bats
# Lock contention, backups of replaced files, the RHEL-family (dracut) path
# and the stock profile's plan on a fresh server.

load helpers

# A lock test that goes wrong must not hang the suite.
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-60}

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	HOLDER_PID=
	GP_PID=
}

teardown() {
	# A lock holder still waiting (the test failed half-way): let it go.
	if [ -n "${RELEASE_FIFO:-}" ] && [ -p "$RELEASE_FIFO" ]; then
		release "$RELEASE_FIFO" $HOLDER_PID $GP_PID || true
	fi
}

# release FIFO PID...: tells the process(es) waiting on FIFO to go on and
# waits for them. The fifo stays open (read-write) until they have exited,
# so the line is never lost when the reader opens the fifo only later.
release() {
	local fifo=$1 pid rc=0
	shift
	exec 8<> "$fifo"
	echo go >&8
	for pid in "$@"; do
		wait "$pid" || rc=$?
	done
	exec 8>&-
	return "$rc"
}

# alive PID: the process runs (an ended one stays a zombie until reaped).
alive() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# read_fifo FIFO PID: one line from FIFO, written by process PID. The fifo
# is opened read-write (which never blocks on Linux) and read with a timeout;
# it fails at once when PID has ended without writing.
read_fifo() {
	local fifo=$1 pid=$2 line i
	exec 7<> "$fifo"
	for ((i = 0; i < 30; i++)); do
		if read -r -t 1 -u 7 line; then
			exec 7<&-
			printf '%s\n' "$line"
			return 0
		fi
		alive "$pid" || break
	done
	exec 7<&-
	fail "nothing arrived on $fifo from pid $pid (it ended, or 30 s passed)"
}

@test "lock: a run holding the lock (flock) makes install exit 6 naming the holder's pid" {
	mkroot "$R" --cuda --nouveau unloaded
	mkdir -p "$R/var/lib/gpuprov"
	lock=$R/var/lib/gpuprov/lock
	ready=$BATS_TEST_TMPDIR/ready
	RELEASE_FIFO=$BATS_TEST_TMPDIR/release
	mkfifo "$ready" "$RELEASE_FIFO"
	# The holder takes the lock, writes its pid into it as gpuprov does, says
	# so, and keeps the lock until told to go.
	flock -n "$lock" sh -c 'echo $$ > "$1"; echo "locked $$" > "$2"; read -r _ < "$3"' \
		holder "$lock" "$ready" "$RELEASE_FIFO" 3>&- > /dev/null 2>&1 &
	HOLDER_PID=$!
	msg=$(read_fifo "$ready" "$HOLDER_PID")
	holder=${msg#locked }
	[ "$msg" = "locked $holder" ] || fail "holder said: $msg"
	snapshot "$R" locked

	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 6
	assert_stderr_has "another gpuprov run"
	assert_stderr_has "pid $holder"
	assert_stderr_has "$lock"
	assert_one_stderr_line
	# It stopped at once: nothing ran, nothing changed (the holder's pid is
	# still in the lock file).
	assert_unchanged "$R" locked
	[ ! -e "$R/var/log/stub-commands.log" ] || fail "a command ran while locked out"

	# The dry run takes no lock: it still works while another run holds it.
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	assert_unchanged "$R" locked

	release "$RELEASE_FIFO" "$HOLDER_PID"
	HOLDER_PID=
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
}

@test "lock: a second install while a real install runs exits 6 naming its pid" {
	mkroot "$R" --cuda --nouveau unloaded
	# An update-initramfs that waits (inside the chroot) until the test lets
	# it go, so the first gpuprov holds the lock meanwhile.
	mkfifo "$R/tmp/started" "$R/tmp/continue"
	RELEASE_FIFO=$R/tmp/continue
	cp -p "$R/usr/sbin/update-initramfs" "$BATS_TEST_TMPDIR/update-initramfs.orig"
	cat > "$R/usr/sbin/update-initramfs" <<-'EOF'
	#!/bin/sh
	echo "$0 $*" >> /var/log/stub-commands.log
	echo started > /tmp/started
	read -r _ < /tmp/continue
	EOF
	"$GPUPROV" --root "$R" install --profile "$PROFILE" --only "$ONLY" \
		3>&- > "$BATS_TEST_TMPDIR/first.out" 2>&1 &
	GP_PID=$!
	msg=$(read_fifo "$R/tmp/started" "$GP_PID") ||
		fail "the first install did not reach update-initramfs:" \
			"$(cat "$BATS_TEST_TMPDIR/first.out")"
	[ "$msg" = started ]
	snapshot "$R" running

	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 6
	assert_stderr_has "another gpuprov run (pid $GP_PID)"
	assert_stderr_has "$R/var/lib/gpuprov/lock"
	assert_unchanged "$R" running
	# status and verify only read: they are not locked out.
	gp --root "$R" status
	assert_status 0

	rc=0
	release "$RELEASE_FIFO" "$GP_PID" || rc=$?
	GP_PID=
	[ "$rc" -eq 0 ] || fail "the first install exited $rc:" "$(cat "$BATS_TEST_TMPDIR/first.out")"
	# The lock is free again and holds no stale pid.
	[ ! -s "$R/var/lib/gpuprov/lock" ] || fail "stale pid in the lock: $(cat "$R/var/lib/gpuprov/lock")"
	cp -p "$BATS_TEST_TMPDIR/update-initramfs.orig" "$R/usr/sbin/update-initramfs"
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
}

@test "backup: a replaced file is backed up and the journal names the backup" {
	mkroot "$R" --cuda --nouveau unloaded
	printf '# the operator'"'"'s own settings\nexport PATH=/opt/other/bin:$PATH\n' \
		> "$R/etc/profile.d/gpuprov-cuda.sh"
	chmod 0640 "$R/etc/profile.d/gpuprov-cuda.sh"
	cp -p "$R/etc/profile.d/gpuprov-cuda.sh" "$BATS_TEST_TMPDIR/original"

	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	backup=$R/var/lib/gpuprov/backup/etc/profile.d/gpuprov-cuda.sh
	assert_same_file "$BATS_TEST_TMPDIR/original" "$backup"
	[ "$(stat -c %a "$backup")" = 640 ] || fail "backup mode $(stat -c %a "$backup"), want 640"
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.sh" "$R/etc/profile.d/gpuprov-cuda.sh"
	[ "$(stat -c %a "$R/etc/profile.d/gpuprov-cuda.sh")" = 644 ]
	j=$R/var/lib/gpuprov/state.json
	[ "$(json_get "$j" 'd["files"]["/etc/profile.d/gpuprov-cuda.sh"].get("backup")')" = \
		/var/lib/gpuprov/backup/etc/profile.d/gpuprov-cuda.sh ] ||
		fail "journal: $(cat "$j")"
	# Files that did not exist were not "backed up".
	[ "$(json_get "$j" 'd["files"]["/etc/ld.so.conf.d/gpuprov-cuda.conf"].get("backup")')" = null ]
	[ ! -e "$R/var/lib/gpuprov/backup/etc/ld.so.conf.d" ]
	grep -q 'backed up /etc/profile.d/gpuprov-cuda.sh' "$R/var/log/gpuprov.log"

	# Changed again by hand: the next install backs the new version up too,
	# without overwriting the first backup.
	echo 'export FOO=1' > "$R/etc/profile.d/gpuprov-cuda.sh"
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	assert_same_file "$BATS_TEST_TMPDIR/original" "$backup"
	grep -rqx 'export FOO=1' "$R/var/lib/gpuprov/backup/etc/profile.d" ||
		fail "the second hand-edited version was not backed up:" \
			"$(ls -la "$R/var/lib/gpuprov/backup/etc/profile.d")"
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.sh" "$R/etc/profile.d/gpuprov-cuda.sh"
}

@test "rocky9: the RHEL-family fixture rebuilds the initramfs with dracut --force" {
	mkroot "$R" --cuda --distro rocky9
	gp --root "$R" --profile-dir "$FIXTURE_PROFILES" install --profile a100-rocky9
	assert_status 5
	assert_one_stderr_line
	assert_same_file "$EXPECTED/rocky9/stub-commands.log" "$R/var/log/stub-commands.log"
	assert_same_file "$EXPECTED/rocky9/initramfs.img" \
		"$R/boot/initramfs-5.14.0-362.8.1.el9_3.x86_64.img"
	assert_same_file "$EXPECTED/ubuntu2204/blacklist-nouveau.conf" \
		"$R/etc/modprobe.d/blacklist-nouveau.conf"
	assert_same_file "$EXPECTED/rocky9/gpuprov-cuda.sh" "$R/etc/profile.d/gpuprov-cuda.sh"
	[ ! -e "$R/usr/sbin/update-initramfs" ]
	assert_stdout_has "run dracut --force"
	refute_stdout_has "update-initramfs"
	# The profile was found through --profile-dir and inherits distro/rocky9.
	gp --root "$R" status
	assert_stdout_has "profile: a100-rocky9"
	assert_stdout_has "$FIXTURE_PROFILES/a100-rocky9.json"
	# The fixture profile directory is clean and the inheritance resolves.
	gp --profile-dir "$FIXTURE_PROFILES" profiles list
	assert_status 0
	assert_stderr_empty
	assert_stdout_has "a100-rocky9"
	gp --profile-dir "$FIXTURE_PROFILES" profiles show a100-rocky9 --resolved
	assert_status 0
	assert_stdout_has '"dracut"'
}

@test "stock profile on a fresh server: every stage planned, cudnn after the cuda stage of the same run" {
	mkroot "$R"
	gp --root "$R" plan --profile "$PROFILE"
	assert_status 5 # a reboot will follow (nouveau)
	refute_stdout_has "not implemented"
	refute_stdout_has "blocked"
	assert_stdout_has "[5/9] cuda: needed - cuda-toolkit-11-8 is not installed"
	# The toolkit directory does not exist yet: the cuda stage installs it first.
	assert_stdout_has "[6/9] cudnn: needed - no cuDNN in /usr/local/cuda-11.8"
	assert_untouched_by_gpuprov "$R"
	# Without the cuda stage in the run, cudnn has nowhere to go.
	gp --root "$R" plan --profile "$PROFILE" --skip cuda
	assert_status 4
	assert_stdout_has "cudnn: blocked - the CUDA toolkit directory /usr/local/cuda-11.8 does not exist"
	assert_untouched_by_gpuprov "$R"
}

@test "usage: empty or repeated stage lists, a missing --profile-dir or --ca-file, a repeated option -> exit 2 saying so" {
	local root=$BATS_TEST_TMPDIR/r
	mkdir -p "$root"
	check_usage() {
		local want=$1
		shift
		gp --root "$root" "$@"
		assert_status 2
		assert_stderr_has "$want"
		assert_usage_on_stderr
		assert_stdout_empty
	}
	check_usage "--only needs one or more stages" plan --profile x --only ""
	check_usage "--skip needs one or more stages" plan --profile x --skip ""
	check_usage "--only nouveau,,env: an empty stage name" \
		plan --profile x --only nouveau,,env
	check_usage "--only ,env: an empty stage name" plan --profile x --only ,env
	check_usage "--skip env,: an empty stage name" plan --profile x --skip env,
	check_usage "--only env,env: names stage 'env' twice" plan --profile x --only env,env
	check_usage "--only and --skip both name stage 'env'" \
		verify --profile x --only nouveau,env --skip env
	check_usage "--profile-dir $BATS_TEST_TMPDIR/nowhere: No such file or directory" \
		--profile-dir "$BATS_TEST_TMPDIR/nowhere" profiles list
	check_usage "--profile-dir /etc/os-release: not a directory" \
		--profile-dir /etc/os-release profiles list
	check_usage "--ca-file $BATS_TEST_TMPDIR/no-ca.pem: No such file or directory" \
		plan --profile x --ca-file "$BATS_TEST_TMPDIR/no-ca.pem"
	check_usage "--ca-file $BATS_TEST_TMPDIR: not a regular file" \
		plan --profile x --ca-file "$BATS_TEST_TMPDIR"
	check_usage "--root given twice ('$root', then '/')" --root / status
	check_usage "--profile given twice ('x', then 'y')" plan --profile x --profile y
	check_usage "--skip given twice ('cuda', then 'env')" \
		plan --profile x --skip cuda --skip env
}

# The man page as plain words: roff font macros and escapes dropped, one
# line, so that phrases can be matched across the source's line breaks.
man_words() {
	sed -E -e 's/^\.(B|I|BR|RB|IR|RI|BI|IB) //' -e '/^\./d' \
		-e 's/\\-/-/g; s/\\\(dq/"/g; s/\\&//g; s/\\f[BIRP]//g' "$1" | tr '\n' ' '
}

# The text of the man page's STAGES entry for stage $2: from its ".B NAME"
# paragraph tag to the next stage's.
man_stage_section() {
	awk -v s="$2" -v all="$3" '
		/^\.SH / { in_stages = ($2 == "STAGES") }
		in_stages && prev == ".TP" && /^\.B / {
			n = split(all, names, " ")
			for (i = 1; i <= n; i++) if ($2 == names[i]) cur = $2
		}
		in_stages && cur == s { print }
		{ prev = $0 }' "$1"
}

@test "docs: every stage, method and background download of the code is in gpuprov(8) and --help, none said to be missing" {
	local man=$REPO_ROOT/docs/gpuprov.8 root=$BATS_TEST_TMPDIR/r p=$BATS_TEST_TMPDIR/p
	mkdir -p "$root" "$p"
	# The stages, in the order of the code's table: a plan of a profile
	# that enables none still lists every stage.
	printf '{ "name": "t-none" }\n' > "$p/t-none.json"
	gp --root "$root" --profile-dir "$p" --json plan --profile t-none --force
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	local stages
	stages=$(json_get "$BATS_TEST_TMPDIR/plan.json" '" ".join(s["name"] for s in d["stages"])')
	[ "$(wc -w <<< "$stages")" -ge 6 ] || fail "stages from the plan: $stages" "$output"
	gp --help
	assert_stdout_has "stages, in order: ${stages// /, }"
	# The "methods:" line with its continuation lines, as one.
	local global_help
	global_help=$(awk '/^methods:/ { on = 1; printf "%s", $0; next }
		on && /^ / { printf " %s", $0; next } { on = 0 }' <<< "$output" | tr -s ' ')
	local words
	words=$(man_words "$man")
	local s m methods
	for s in $stages; do
		man_stage_section "$man" "$s" "$stages" | grep -q . ||
			fail "gpuprov(8) STAGES has no entry for stage $s"
		# The methods the loader accepts for the stage, from its own error.
		printf '{ "name": "t-m", "stages": { "%s": { "method": "?" } } }\n' "$s" > "$p/t-m.json"
		gp --profile-dir "$p" profiles lint "$p/t-m.json"
		methods=$(sed -n 's/.*"method" must be one of \(.*\) (got "?").*/\1/p' <<< "$output" |
			tr -d ,)
		for m in $methods; do
			man_words <(man_stage_section "$man" "$s" "$stages") | grep -qw -- "$m" ||
				fail "gpuprov(8) does not name method $m in stage $s"
			grep -qE "^methods: (.*, )?$s ([a-z]+\|)*$m(\||,|$)" <<< "$global_help" ||
				fail "gpuprov --help does not list method $m of stage $s" "$global_help"
			! grep -qE "method $m (is|are) not|$m is not implemented" <<< "$words" ||
				fail "gpuprov(8) says method $m of $s is not there"
		done
	done
	# Background downloads: every stage with a prefetch hook in the code is
	# named where install --help and gpuprov(8) say what is downloaded early.
	local f name help
	help=$("$GPUPROV" install --help | tr '\n' ' ')
	for f in $(grep -l '\.prefetch = ' "$REPO_ROOT"/src/stages/*.c); do
		name=$(sed -n 's/^\t\.name = "\([a-z]*\)",$/\1/p' "$f")
		[ -n "$name" ] || fail "no stage name in $f"
		grep -qE "background[^.]*\b$name\b|\b$name\b[^.]*background" <<< "$help" ||
			fail "install --help does not name stage $name among background downloads" "$help"
		grep -qE "background[^.]*\b$name\b|\b$name\b[^.]*background" <<< "$words" ||
			fail "gpuprov(8) does not name stage $name among background downloads"
	done
}
