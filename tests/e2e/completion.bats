#!/usr/bin/env bats
# The bash completion (dist/bash-completion/gpuprov) in a real bash with
# bash-completion loaded, driven as readline drives it (COMP_WORDS,
# COMP_CWORD, COMP_LINE, COMP_POINT); and what it reads from the binary:
# --list-commands, --list-options [CMD], profiles list --names.

load helpers

COMPLETION=$REPO_ROOT/dist/bash-completion/gpuprov
BASH_COMPLETION=/usr/share/bash-completion/bash_completion

setup() {
	[ -x "$GPUPROV" ] || fail "no gpuprov binary at $GPUPROV (run make, or set GPUPROV)"
	[ -r "$BASH_COMPLETION" ] ||
		fail "no $BASH_COMPLETION: apt-get install bash-completion (make deps)"
}

# complete LINE: $output gets the candidates, one a line, for LINE typed
# after "gpuprov" with the cursor at its end. Words are split as readline
# splits them: at blanks, and "--opt=value" into "--opt" "=" "value".
complete() {
	run --separate-stderr bash -c '
		source "$1"; source "$2"; gp=$3 line=$4
		COMP_LINE="$gp $line"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=("$gp")
		read -ra ws <<<"$line"
		[[ -z $line || $line == *" " ]] && ws+=("")
		for w in "${ws[@]}"; do
			if [[ $w == *=* ]]; then
				COMP_WORDS+=("${w%%=*}" "=")
				[[ -z ${w#*=} ]] || COMP_WORDS+=("${w#*=}")
			else
				COMP_WORDS+=("$w")
			fi
		done
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_gpuprov "$gp" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
		printf "%s\n" "${COMPREPLY[@]}"' \
		_ "$BASH_COMPLETION" "$COMPLETION" "$GPUPROV" "$1"
	[ "$status" -eq 0 ] || { show_run; fail "completing '$1' failed"; }
	[ -z "$stderr" ] || { show_run; fail "completing '$1' wrote to stderr"; }
}

# offered WORD...: each WORD is a candidate; not_offered WORD...: none is.
offered() {
	local w
	for w in "$@"; do
		grep -qxF -- "$w" <<<"$output" || { show_run; fail "'$w' is not offered"; }
	done
}
not_offered() {
	local w
	for w in "$@"; do
		! grep -qxF -- "$w" <<<"$output" || { show_run; fail "'$w' is offered"; }
	done
}

# The options of `gpuprov CMD --help`'s synopsis (its lines up to the first
# blank one), one a line, sorted.
usage_options() {
	"$GPUPROV" "$1" --help | sed '/^$/q' | grep -oE -- '--[a-z][a-z-]*' | sort -u
}

# The options --list-options CMD adds to the global ones, sorted.
command_options() {
	comm -23 <("$GPUPROV" --list-options "$1" | cut -d' ' -f1 | tr -d = | sort) \
		<("$GPUPROV" --list-options status | cut -d' ' -f1 | tr -d = | sort)
}

@test "completion: --list-commands names each command of --help, subcommands after theirs" {
	run "$GPUPROV" --list-commands
	assert_status 0
	local c
	for c in $(cut -d' ' -f1 <<<"$output" | uniq); do
		"$GPUPROV" "$c" --help > /dev/null || fail "'$c --help' failed"
		"$GPUPROV" --help | grep -qE "^  $c( |$)" || fail "--help does not name $c"
	done
	grep -qx 'profiles show' <<<"$output" || fail "no 'profiles show' in: $output"
	grep -qx 'install' <<<"$output" || fail "no 'install' in: $output"
}

@test "completion: --list-options CMD offers what the command's usage names, and only those work" {
	local c o ca=$BATS_TEST_TMPDIR/ca.pem
	: > "$ca"
	for c in $("$GPUPROV" --list-commands | cut -d' ' -f1 | uniq); do
		diff <(usage_options "$c") <(command_options "$c") ||
			fail "gpuprov $c: its usage and --list-options $c disagree (< usage, > listing)"
		# Every command option the listing leaves out is refused there.
		for o in $(comm -23 <("$GPUPROV" --list-options | cut -d' ' -f1 | tr -d = | sort) \
			<("$GPUPROV" --list-options "$c" | cut -d' ' -f1 | tr -d = | sort)); do
			local v=()
			case $o in
			--profile) v=(x) ;;
			--only | --skip) v=(nouveau) ;;
			--cache-dir) v=(/var/cache/x) ;;
			--ca-file) v=("$ca") ;;
			--mirror) v=(a=b) ;;
			--textfile-dir) v=(/x) ;;
			--reboot) v=(auto) ;;
			--to) v=(1) ;;
			esac
			run --separate-stderr "$GPUPROV" --root "$BATS_TEST_TMPDIR" "$c" "$o" "${v[@]}"
			[ "$status" -eq 2 ] && [[ $stderr == *"does not apply"* ]] ||
				{ show_run; fail "gpuprov $c $o: not refused, though --list-options $c leaves it out"; }
		done
	done
	# Values: a trailing '=', and the fixed choices from the binary.
	run "$GPUPROV" --list-options install
	grep -qx -- '--dry-run' <<<"$output"
	grep -qx -- '--only= nouveau driver fabric_manager gpu_settings cuda cudnn pytorch env container_toolkit' <<<"$output" ||
		fail "--only's choices are not the stages:" "$output"
	grep -qx -- '--format= text json prometheus' <<<"$output"
	run -2 "$GPUPROV" --list-options no-such-command
}

@test "completion: profiles list --names prints the names of profiles list, broken files too" {
	local d=$FIXTURE_PROFILES
	run --separate-stderr "$GPUPROV" --profile-dir "$d" profiles list
	assert_status 0
	local listed
	listed=$(tail -n +2 <<<"$output" | cut -d' ' -f1)
	gp --profile-dir "$d" profiles list --names
	assert_status 0
	[ "$output" = "$listed" ] || fail "--names: $output" "list: $listed"
	grep -qx a100-ubuntu2204 <<<"$output"
	grep -qx distro/debian12 <<<"$output"
	gp --profile-dir "$d" --json profiles list --names
	assert_status 0
	"$PYTHON" -c 'import json,sys; v=json.load(sys.stdin); assert v and all(isinstance(x, str) for x in v), v' <<<"$output"
	# A file that does not load is still a name (list warns and exits 65).
	gp --profile-dir "$REPO_ROOT/tests/fixtures/broken-profiles" profiles list --names
	assert_status 0
	assert_stdout_has truncated
	gp profiles show a100-ubuntu2204 --names
	assert_status 2
	assert_stderr_has "--names applies to 'profiles list' only"
	gp status --names
	assert_status 2
}

@test "completion: commands, subcommands and each command's own options" {
	complete ""
	offered install plan verify status history uninstall rollback detect profiles stages
	[ "$(grep -cx profiles <<<"$output")" -eq 1 ] || fail "profiles twice: $output"
	complete "pro"
	[ "$output" = profiles ]
	complete "profiles "
	[ "$(sort <<<"$output" | tr '\n' ' ')" = "lint list show " ]
	complete "install --"
	offered --profile --dry-run --force --only --skip --mirror --offline --root --json
	not_offered --resolved --names --list-options
	complete "verify --"
	offered --profile --only --skip --root --deep --force
	not_offered --dry-run --offline
	complete "uninstall --"
	offered --dry-run --only --skip --root
	not_offered --profile --force --offline
	complete "rollback --"
	offered --to --dry-run --root --json --reboot
	not_offered --profile --force
	complete "history --"
	offered --root --json
	not_offered --profile --dry-run --only
	complete "--root /x profiles list --na"
	[ "$output" = --names ]
}

@test "completion: stage names for --only and --skip, as comma lists" {
	complete "install --only "
	[ "$(tr '\n' ' ' <<<"$output")" = "nouveau driver fabric_manager gpu_settings cuda cudnn pytorch env container_toolkit " ]
	complete "install --only nouveau,c"
	[ "$(tr '\n' ' ' <<<"$output")" = "nouveau,cuda nouveau,cudnn nouveau,container_toolkit " ]
	complete "verify --skip=driver,"
	offered driver,nouveau driver,env
	not_offered driver,driver
	complete "--format "
	[ "$(tr '\n' ' ' <<<"$output")" = "text json prometheus " ]
}

@test "completion: --profile and profiles show offer the profile names, --profile-dir's too, and .json files" {
	complete "install --profile a100-u"
	offered a100-ubuntu2204 a100-ubuntu2404
	not_offered h100-ubuntu2204
	complete "profiles show distro/"
	offered distro/debian12 distro/ubuntu2204
	local d=$BATS_TEST_TMPDIR/site
	mkdir -p "$d/sub"
	printf '{"name": "zz-site"}\n' > "$d/zz-site.json"
	: > "$d/notes.txt"
	complete "--profile-dir $d plan --profile zz"
	[ "$output" = zz-site ]
	complete "plan --profile-dir=$d --profile zz"
	[ "$output" = zz-site ]
	complete "plan --profile $d/"
	offered "$d/zz-site.json" "$d/sub"
	not_offered "$d/notes.txt"
	complete "profiles show a100-ubuntu2204 "
	[ -z "$output" ]
}

@test "completion: --root completes directories, --ca-file files" {
	local d=$BATS_TEST_TMPDIR/t
	mkdir -p "$d/rootdir"
	: > "$d/rootfile"
	complete "--root $d/root"
	[ "$output" = "$d/rootdir" ]
	complete "status --root=$d/root"
	[ "$output" = "$d/rootdir" ]
	complete "install --ca-file $d/root"
	offered "$d/rootdir" "$d/rootfile"
	complete "profiles lint $d/"
	offered "$d/rootdir"
	not_offered "$d/rootfile"
}
