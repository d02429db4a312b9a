#!/usr/bin/env bats
# The source check of `make lint` (tests/lint/srccheck.sh): over a small tree
# with one breach of each rule it fails and names the file and line; over
# src/ it passes. Comments and strings that name a banned call are not code.

check=$BATS_TEST_DIRNAME/../lint/srccheck.sh
src=$BATS_TEST_DIRNAME/../../src

setup() {
	tree=$(mktemp -d)
	mkdir -p "$tree/stages" "$tree/sys"
}

teardown() {
	rm -rf "$tree"
}

@test "srccheck: src/ passes" {
	run sh "$check" "$src"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "srccheck: a banned call anywhere fails with FILE:LINE" {
	cat > "$tree/sys/a.c" <<'EOF'
/* sprintf(buf, "x") in a comment is fine */
static void f(char *buf, const char *s)
{
	const char *msg = "strcpy(a, b) in a string is fine";
	sprintf(buf, "%s", s);
	int n = atoi(s); // atoi in a line comment is fine
	system("true");
	(void)msg;
	(void)n;
}
EOF
	run sh "$check" "$tree"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$tree/sys/a.c:5: sprintf is banned: it cannot bound what it writes"* ]]
	[[ "$output" == *"$tree/sys/a.c:6: atoi is banned: it cannot report a bad number"* ]]
	[[ "$output" == *"$tree/sys/a.c:7: system is banned: it runs a shell string"* ]]
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 3 ]
}

@test "srccheck: a stage that writes, runs, opens or reads dry_run fails" {
	cat > "$tree/stages/s.c" <<'EOF'
static int apply(struct gp_ctx *c)
{
	gp_root_write_atomic(&c->root, "/etc/x", "", 0, 0644, 0, 0);
	gp_run(&opts, argv, &res);
	gp_run_result_free(&res);
	pid_t pid = fork();
	FILE *f = fopen("/etc/x", "r");
	if (c->dry_run)
		return 0;
	/* gp_root_unlink(r, p) in a comment is fine, and in one over
	 * lines: fork() */
	return unlink("/etc/x");
}
EOF
	run sh "$check" "$tree"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$tree/stages/s.c:3: a stage calls gp_root_write_atomic: stages change the target only through the effect door"* ]]
	[[ "$output" == *"$tree/stages/s.c:4: a stage calls gp_run: "* ]]
	[[ "$output" == *"$tree/stages/s.c:6: a stage calls fork: "* ]]
	[[ "$output" == *"$tree/stages/s.c:7: a stage calls fopen: "* ]]
	[[ "$output" == *"$tree/stages/s.c:8: a stage reads dry_run: "* ]]
	[[ "$output" == *"$tree/stages/s.c:12: a stage calls unlink: "* ]]
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 6 ]
}

@test "srccheck: the stage rules apply to stages only" {
	cat > "$tree/sys/w.c" <<'EOF'
static int w(const struct gp_root *r)
{
	return gp_root_unlink(r, "/etc/x");
}
EOF
	run sh "$check" "$tree"
	[ "$status" -eq 0 ]
}
