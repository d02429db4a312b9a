#!/usr/bin/env bats
# Every gpuprov command a verify hint prints works as printed: it names the
# profile (and root) of the run, so typed as it is it parses. Each quoted
# 'gpuprov ...' of verify's hint lines, with install turned into plan, must
# not end in a usage error (exit 2).

load helpers

teardown() {
	stop_https_server
}

# hint_commands: the 'gpuprov ...' commands quoted in the hint lines of
# $output, one a line.
hint_commands() {
	printf '%s\n' "$output" | grep '^ *hint: ' | grep -o "'gpuprov [^']*'" | tr -d "'" |
		sort -u
}

# assert_hints_parse MIN: verify's $output has at least MIN distinct hint
# commands; each names --profile and --root, and each, run as plan, exits
# with no usage error. $output is verify's again afterwards.
assert_hints_parse() {
	local min=$1 cmds n=0 line verify_output=$output
	cmds=$(hint_commands)
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		n=$((n + 1))
		case " $line " in
		*" --profile "*" --root "*) ;;
		*) fail "hint command without --profile and --root: $line" ;;
		esac
		eval "set -- $line"
		shift
		[ "$1" = install ] && set -- plan "${@:2}"
		gp "$@"
		[ "$status" -ne 2 ] || {
			show_run
			fail "the hint '$line' is not a command that works as printed"
		}
		assert_documented_status
	done <<< "$cmds"
	[ "$n" -ge "$min" ] || fail "expected at least $min hint commands, found $n:" "$cmds"
	output=$verify_output
}

@test "hints: a fresh server's verify hints are commands that parse (profile by name)" {
	setup_ubuntu_root
	gp --root "$R" verify --profile "$PROFILE"
	assert_status 3
	assert_hints_parse 5
	assert_stdout_has "'gpuprov install --profile $PROFILE --only nouveau --root "
}

@test "hints: cuDNN, CUDA and pytorch hints are commands that parse (profile by path)" {
	setup_cudnn_root
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_hints_parse 5
	for stage in cuda cudnn pytorch; do
		assert_stdout_has "'gpuprov install --profile $P --only $stage --root "
	done
}

@test "hints: an installed cuDNN's linker-cache hint parses and its plan repairs" {
	setup_cudnn_root
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	: > "$R/etc/ld.so.cache"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "not in the linker cache"
	assert_hints_parse 1
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_stdout_has "run ldconfig"
}

@test "hints: the pending reboot's hint is the full install command" {
	setup_ubuntu_root
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	gp --root "$R" verify --only "$ONLY"
	assert_status 3
	assert_stdout_has "hint: reboot, then run 'gpuprov install --profile "
	assert_hints_parse 1
}
