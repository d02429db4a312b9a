#!/usr/bin/env bats
# tests/lint/layers.py, the layering check of `make lint`, on tiny trees of
# its own: a tree that keeps the rules passes; an include that runs upward, two
# source files of one name and a header no .c implements each fail, naming the
# file. The real tree is checked by `make lint` itself.

load helpers

setup() {
	LAYERS=$REPO_ROOT/tests/lint/layers.py
	T=$BATS_TEST_TMPDIR/tree
	mkdir -p "$T/src/sys" "$T/src/stages" "$T/src/pure" "$T/include/gpuprov"
	# A root adapter, the effect door and a stage, each with its header.
	printf '#include "gpuprov/util.h"\n' > "$T/src/sys/root.c"
	printf '#pragma once\n#include "gpuprov/util.h"\n' > "$T/include/gpuprov/root.h"
	printf '#pragma once\n' > "$T/include/gpuprov/util.h"
	printf '#include "gpuprov/util.h"\n' > "$T/src/util.c"
	printf '#pragma once\n#include "gpuprov/root.h"\n' > "$T/include/gpuprov/context.h"
	printf '#include "gpuprov/context.h"\n' > "$T/src/context.c"
	printf '#include "gpuprov/context.h"\n#include "gpuprov/exitcodes.h"\n' \
		> "$T/src/stages/nouveau.c"
	printf '#pragma once\n' > "$T/include/gpuprov/pkg_types.h"
}

@test "layers: a tree whose includes run downward passes" {
	run python3 "$LAYERS" "$T"
	[ "$status" -eq 0 ] || fail "$output"
	[ -z "$output" ] || fail "$output"
}

@test "layers: an adapter that includes the effect door's header fails, naming the file and the include" {
	printf '#include "gpuprov/util.h"\n#include "gpuprov/context.h"\n' > "$T/src/sys/root.c"
	run python3 "$LAYERS" "$T"
	[ "$status" -eq 1 ] || fail "status $status: $output"
	[[ "$output" == *"src/sys/root.c:2: includes gpuprov/context.h of layer 'door', above its own layer 'low'"* ]] ||
		fail "$output"
}

@test "layers: a header that includes a header of a layer above fails too" {
	printf '#pragma once\n#include "gpuprov/context.h"\n' > "$T/include/gpuprov/util.h"
	run python3 "$LAYERS" "$T"
	[ "$status" -eq 1 ] || fail "status $status: $output"
	[[ "$output" == *"include/gpuprov/util.h:2: includes gpuprov/context.h of layer 'door', above its own layer 'pure'"* ]] ||
		fail "$output"
}

@test "layers: two source files of one basename fail" {
	mkdir -p "$T/src/nv"
	printf '\n' > "$T/src/nv/nouveau.c"
	run python3 "$LAYERS" "$T"
	[ "$status" -eq 1 ] || fail "status $status: $output"
	[[ "$output" == *"src/nv/nouveau.c and src/stages/nouveau.c: two source files named nouveau.c"* ]] ||
		fail "$output"
}

@test "layers: a header no .c of its name implements fails, unless it is listed as header-only" {
	printf '#pragma once\n' > "$T/include/gpuprov/facts.h"
	run python3 "$LAYERS" "$T"
	[ "$status" -eq 1 ] || fail "status $status: $output"
	[[ "$output" == *"include/gpuprov/facts.h: no source file facts.c implements it"* ]] || fail "$output"
	[[ "$output" != *"pkg_types.h"* ]] || fail "$output"
}

@test "layers: a .c file in no layer fails" {
	mkdir -p "$T/src/extra"
	printf '\n' > "$T/src/extra/thing.c"
	run python3 "$LAYERS" "$T"
	[ "$status" -eq 1 ] || fail "status $status: $output"
	[[ "$output" == *"src/extra/thing.c: in no layer"* ]] || fail "$output"
}
