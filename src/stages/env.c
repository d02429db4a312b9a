/* Stage env: the shell and linker environment for CUDA.
 * check:  /etc/profile.d/gpuprov-cuda.sh and /etc/ld.so.conf.d/gpuprov-cuda.conf
 *         hold exactly what the profile asks for, and ldconfig ran for that
 *         ld.so.conf.d content; with conda_init, /etc/profile.d/gpuprov-conda.sh
 *         sources the conda prefix's etc/profile.d/conda.sh (without it, that
 *         file is absent).
 * apply:  writes (or removes) the files and runs ldconfig chrooted.
 * verify: sourcing the script twice in the root's sh gives the expected
 *         values with no duplicate PATH entries; the directories exist; the
 *         conda snippet matches and conda.sh is there. */
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/json.h"
#include "gpuprov/run.h"
#include "gpuprov/stages.h"

#define PROFILE_SCRIPT "/etc/profile.d/gpuprov-cuda.sh"
#define LD_CONF "/etc/ld.so.conf.d/gpuprov-cuda.conf"
#define DEFAULT_CUDA_HOME "/usr/local/cuda"
#define MARK_LDCONFIG "ldconfig_ran_for"
#define CONDA_SCRIPT "/etc/profile.d/gpuprov-conda.sh"

/* --- profile keys (stages.env) ------------------------------------------- */

#define KEY_CUDA_HOME GP_ENV_KEY_CUDA_HOME
#define KEY_PATH GP_ENV_KEY_PATH
#define KEY_LD_LIBRARY_PATH "ld_library_path"
#define KEY_VARS "vars"
#define KEY_CONDA_INIT "conda_init"

static bool valid_var_name(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	return gp_schema_only(s, GP_ALNUM "_");
}

/* Variables that make every program, or every shell, run code or change
 * how it reads its input: set system-wide by the env stage, each would be
 * a way into every login. */
static const struct {
	const char *name;
	const char *why;
} unsafe_vars[] = {
	{ "BASH_ENV", "bash runs the file it names in every non-interactive shell" },
	{ "ENV", "sh and bash run the file it names in every interactive shell" },
	{ "PROMPT_COMMAND", "bash runs it before every prompt" },
	{ "PS0", "bash expands it, command substitutions included, at every command" },
	{ "PS1", "bash expands it, command substitutions included, at every prompt" },
	{ "PS2", "bash expands it, command substitutions included, at every prompt" },
	{ "PS4", "bash expands it, command substitutions included, in every traced "
	         "command" },
	{ "IFS", "it changes how every shell splits words" },
	{ "SHELLOPTS", "it turns on shell options in every bash script" },
	{ "BASHOPTS", "it turns on shell options in every bash script" },
	{ "GLOBIGNORE", "it changes what every bash glob matches" },
	{ "CDPATH", "it changes where cd in every script goes" },
	{ "GCONV_PATH", "glibc loads character-set modules (code) from it" },
};

/* Why a variable may not be set system-wide, or NULL. */
static char *unsafe_var(const char *name)
{
	if (gp_str_starts_with(name, "LD_"))
		return gp_xasprintf("must not set %s: the dynamic loader reads LD_* "
		                    "variables in every program it starts (LD_PRELOAD "
		                    "and LD_AUDIT load code into each); library "
		                    "directories go in ld_library_path",
		                    name);
	for (size_t k = 0; k < ARRAY_SIZE(unsafe_vars); k++)
		if (strcmp(name, unsafe_vars[k].name) == 0)
			return gp_xasprintf("must not set %s: %s, so a system-wide "
			                    "value reaches every login",
			                    name, unsafe_vars[k].why);
	return NULL;
}

/* Environment variables (one map entry): names a shell accepts; PATH,
 * LD_LIBRARY_PATH and CUDA_HOME come from their own keys; none that
 * injects code into every program or shell; values are single lines. */
static char *env_var_check(const cJSON *item, size_t i)
{
	static const char *const own[] = { "PATH", "LD_LIBRARY_PATH", "CUDA_HOME" };
	for (size_t k = 0; k < ARRAY_SIZE(own); k++)
		if (strcmp(item->string, own[k]) == 0)
			return gp_xasprintf(
			    "must not set %s: it comes from cuda_home, path "
			    "and ld_library_path",
			    own[k]);
	char *unsafe = unsafe_var(item->string);
	if (unsafe)
		return unsafe;
	if (!valid_var_name(item->string)) {
		_cleanup_free_ char *q = gp_schema_quoted(item->string);
		return gp_xasprintf("has %s, which is not a variable name (letters, "
		                    "digits and _, not starting with a digit)",
		                    q);
	}
	if (strpbrk(item->valuestring, "\n\r"))
		return gp_xasprintf("has a value for %s that spans lines", item->string);
	return NULL;
}

static const struct gp_value_check check_env_var = {
	.check = env_var_check,
	.schema =
	    "{\"propertyNames\": {\"pattern\": \"^[A-Za-z_][A-Za-z0-9_]*$\", \"not\": "
	    "{\"anyOf\": [{\"enum\": [\"PATH\", \"CUDA_HOME\", \"BASH_ENV\", \"ENV\", "
	    "\"PROMPT_COMMAND\", \"PS0\", \"PS1\", \"PS2\", \"PS4\", \"IFS\", "
	    "\"SHELLOPTS\", "
	    "\"BASHOPTS\", \"GLOBIGNORE\", \"CDPATH\", \"GCONV_PATH\"]}, {\"pattern\": "
	    "\"^LD_\"}]}}, \"additionalProperties\": {\"type\": \"string\", \"pattern\": "
	    "\"^[^\\\\n\\\\r]*$\"}}",
	.whole = true,
};

static const struct gp_key env_keys[] = {
	GP_KEY_STRING_ROW(KEY_CUDA_HOME, &gp_check_directory,
	                  .doc = "The value of CUDA_HOME.",
	                  .default_value = "\"" DEFAULT_CUDA_HOME "\"",
	                  .example = "\"/usr/local/cuda-12.4\""),
	GP_KEY_STRINGS_ROW(KEY_PATH, &gp_check_directory,
	                   .doc = "Directories prepended to PATH (default: "
	                          "<cuda_home>/bin).",
	                   .example = "[\"/usr/local/cuda-12.4/bin\"]"),
	GP_KEY_STRINGS_ROW(
	    KEY_LD_LIBRARY_PATH, &gp_check_directory,
	    .doc = "Directories prepended to LD_LIBRARY_PATH and listed in "
	           "ld.so.conf.d (default: <cuda_home>/lib64).",
	    .example = "[\"/usr/local/cuda-12.4/lib64\"]"),
	{ .name = KEY_VARS,
	  .type = GP_KEY_STRING_MAP,
	  .check = &check_env_var,
	  .doc = "More environment variables: shell names, not PATH, LD_LIBRARY_PATH or "
	         "CUDA_HOME; none that runs code in every program or shell (LD_*, "
	         "BASH_ENV, ENV, PROMPT_COMMAND, PS0-PS2, PS4, IFS, SHELLOPTS, "
	         "BASHOPTS, GLOBIGNORE, CDPATH, GCONV_PATH); one-line values.",
	  .example = "{\"NCCL_DEBUG\": \"WARN\"}" },
	GP_KEY_BOOL_ROW(KEY_CONDA_INIT,
	                .doc = "Also make conda available in login shells.",
	                .example = "true"),
	GP_KEY_END,
};

/* Settings resolved from the profile with defaults. */
struct env_settings {
	const char *cuda_home;
	char **path; /* prepended to PATH */
	char **ld_library_path; /* prepended to LD_LIBRARY_PATH, and ld.so.conf.d */
	const cJSON *vars; /* object of strings, may be NULL */
};

static void env_settings_free(struct env_settings *s)
{
	gp_strv_free(s->path);
	gp_strv_free(s->ld_library_path);
}

/* Settings with their defaults. The profile loader has already checked
 * the directories and variable names (with line:column errors). */
static void settings(const cJSON *cfg, struct env_settings *s)
{
	*s = (struct env_settings){ 0 };
	s->cuda_home = gp_json_string(cfg, KEY_CUDA_HOME, DEFAULT_CUDA_HOME);
	s->path = gp_json_strv(cfg, KEY_PATH);
	if (!s->path) {
		s->path = gp_xcalloc(1, sizeof(char *));
		_cleanup_free_ char *d = gp_xasprintf("%s/bin", s->cuda_home);
		gp_strv_push(&s->path, d);
	}
	s->ld_library_path = gp_json_strv(cfg, KEY_LD_LIBRARY_PATH);
	if (!s->ld_library_path) {
		s->ld_library_path = gp_xcalloc(1, sizeof(char *));
		_cleanup_free_ char *d = gp_xasprintf("%s/lib64", s->cuda_home);
		gp_strv_push(&s->ld_library_path, d);
	}
	s->vars = cJSON_GetObjectItemCaseSensitive(cfg, KEY_VARS);
}

static void append_sh_quoted(struct gp_buf *b, const char *s)
{
	gp_buf_puts(b, "'");
	for (; *s; s++) {
		if (*s == '\'')
			gp_buf_puts(b, "'\\''");
		else
			gp_buf_append(b, s, 1);
	}
	gp_buf_puts(b, "'");
}

/* Prepends dirs (first one first) to a colon list, skipping any already present,
 * so sourcing twice changes nothing. */
static void append_prepend(struct gp_buf *b, const char *var, char *const *dirs)
{
	size_t n = gp_strv_len(dirs);
	for (size_t i = n; i-- > 0;) {
		gp_buf_printf(b, "case \":${%s-}:\" in\n*:", var);
		append_sh_quoted(b, dirs[i]);
		gp_buf_printf(b, ":*) ;;\n*) %s=", var);
		append_sh_quoted(b, dirs[i]);
		gp_buf_printf(b, "\"${%s:+:$%s}\" ;;\nesac\n", var, var);
	}
	gp_buf_printf(b, "export %s\n", var);
}

static char *render_script(const struct gp_ctx *c, const struct env_settings *s)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage env) from profile %s; gpuprov replaces",
	                  c->profile->name);
	gp_buf_puts(
	    &b, "# this file, so change the profile instead. POSIX sh, safe to source\n"
	        "# more than once.\n");
	gp_buf_puts(&b, "CUDA_HOME=");
	append_sh_quoted(&b, s->cuda_home);
	gp_buf_puts(&b, "\nexport CUDA_HOME\n");
	append_prepend(&b, "PATH", s->path);
	append_prepend(&b, "LD_LIBRARY_PATH", s->ld_library_path);
	for (const cJSON *v = s->vars ? s->vars->child : NULL; v; v = v->next) {
		gp_buf_printf(&b, "%s=", v->string);
		append_sh_quoted(&b, v->valuestring);
		gp_buf_printf(&b, "\nexport %s\n", v->string);
	}
	return gp_buf_steal(&b);
}

static char *render_ld_conf(const struct gp_ctx *c, const struct env_settings *s)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage env) from profile %s.", c->profile->name);
	for (size_t i = 0; s->ld_library_path[i]; i++)
		gp_buf_printf(&b, "%s\n", s->ld_library_path[i]);
	return gp_buf_steal(&b);
}

static void sha_of(const char *s, char out[65])
{
	gp_sha256_hex(s, strlen(s), out);
}

static bool conda_init(const cJSON *cfg)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, KEY_CONDA_INIT));
}

/* The conda prefix of stages.pytorch (method conda), or NULL. */
static const char *conda_prefix(const struct gp_ctx *c)
{
	const cJSON *py = gp_stage_settings(c, &gp_stage_env, "pytorch");
	if (!py ||
	    strcmp(gp_json_string(py, GP_PYTORCH_KEY_METHOD, "conda"), "conda") != 0)
		return NULL;
	return gp_json_string(py, GP_PYTORCH_KEY_PREFIX, "/opt/conda");
}

/* The snippet for login shells: conda's own conda.sh makes `conda` a shell
 * function (activate/deactivate), without touching anyone's ~/.bashrc. */
static char *render_conda(const struct gp_ctx *c, const char *prefix)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage env) from profile %s; gpuprov replaces",
	                  c->profile->name);
	gp_buf_puts(
	    &b, "# this file, so change the profile instead. Makes `conda` a shell\n"
	        "# function in login shells, as `conda init` would, without ~/.bashrc.\n"
	        "if [ -f ");
	_cleanup_free_ char *sh = gp_xasprintf("%s/etc/profile.d/conda.sh", prefix);
	append_sh_quoted(&b, sh);
	gp_buf_puts(&b, " ]; then\n\t. ");
	append_sh_quoted(&b, sh);
	gp_buf_puts(&b, "\nfi\n");
	return gp_buf_steal(&b);
}

/* conda_init: "" when the snippet is as the profile wants, else why not
 * (NULL when it cannot be: no conda prefix). */
static char *conda_state(struct gp_ctx *c, const cJSON *cfg)
{
	if (!conda_init(cfg))
		return gp_xstrdup(gp_ctx_exists(c, CONDA_SCRIPT) ? CONDA_SCRIPT
		                      " is there but conda_init is off"
		                                                 : "");
	const char *prefix = conda_prefix(c);
	if (!prefix)
		return NULL;
	_cleanup_free_ char *want = render_conda(c, prefix);
	return gp_xstrdup(gp_stage_file_is(c, CONDA_SCRIPT, want) ? ""
	                                                          : CONDA_SCRIPT
	                      " differs from the profile");
}

static int apply_conda(struct gp_ctx *c, const cJSON *cfg)
{
	if (!conda_init(cfg))
		return gp_effect_remove(c, CONDA_SCRIPT);
	_cleanup_free_ char *want = render_conda(c, conda_prefix(c));
	return gp_effect_write(c, CONDA_SCRIPT, want, strlen(want), 0644);
}

static int env_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	_cleanup_free_ char *conda = conda_state(c, cfg);
	if (!conda) {
		gp_check_set(
		    ck, GP_STATE_BLOCKED,
		    "stages.env.conda_init needs stages.pytorch with method "
		    "conda (the snippet sources <prefix>/etc/profile.d/conda.sh); "
		    "set conda_init to false or remove it");
		return 0;
	}
	struct env_settings s;
	settings(cfg, &s);
	_cleanup_free_ char *script = render_script(c, &s);
	_cleanup_free_ char *ld_conf = render_ld_conf(c, &s);
	char sha[65];
	sha_of(ld_conf, sha);
	bool script_ok = gp_stage_file_is(c, PROFILE_SCRIPT, script);
	bool ld_ok = gp_stage_file_is(c, LD_CONF, ld_conf);
	bool ldconfig_ok = gp_stage_mark_is(c, "env", MARK_LDCONFIG, sha);
	if (script_ok && ld_ok && ldconfig_ok && !*conda)
		gp_check_set(ck, GP_STATE_SATISFIED, "%s and %s up to date%s",
		             PROFILE_SCRIPT, LD_CONF,
		             conda_init(cfg) ? "; conda initialised for login shells"
		                             : "");
	else {
		struct gp_buf why = { 0 };
		if (!script_ok)
			gp_buf_puts(&why, PROFILE_SCRIPT " differs from the profile");
		if (!ld_ok)
			gp_buf_printf(&why, "%s" LD_CONF " differs from the profile",
			              why.len ? "; " : "");
		else if (!ldconfig_ok)
			gp_buf_printf(&why, "%sldconfig not run for " LD_CONF,
			              why.len ? "; " : "");
		if (*conda)
			gp_buf_printf(&why, "%s%s", why.len ? "; " : "", conda);
		gp_check_set(ck, GP_STATE_NEEDED, "%s", why.data);
		gp_buf_free(&why);
	}
	env_settings_free(&s);
	return 0;
}

static int env_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct env_settings s;
	settings(cfg, &s);
	_cleanup_free_ char *script = render_script(c, &s);
	_cleanup_free_ char *ld_conf = render_ld_conf(c, &s);
	char sha[65];
	sha_of(ld_conf, sha);
	int rc = gp_effect_write(c, PROFILE_SCRIPT, script, strlen(script), 0644);
	if (rc == 0)
		rc = apply_conda(c, cfg);
	if (rc == 0)
		rc = gp_effect_write(c, LD_CONF, ld_conf, strlen(ld_conf), 0644);
	char *const ldconfig[] = { "ldconfig", NULL };
	if (rc == 0)
		rc = gp_stage_run_once(c, "env", MARK_LDCONFIG, sha, ldconfig);
	env_settings_free(&s);
	return rc;
}

/* Value of NAME in `env` output, or NULL. */
static const char *env_value(char *const *lines, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; lines[i]; i++)
		if (strncmp(lines[i], name, n) == 0 && lines[i][n] == '=')
			return lines[i] + n + 1;
	return NULL;
}

/* Each of dirs once in var; the findings' ids are id_base.<dir>. */
static void verify_list(struct gp_ctx *c, struct gp_report *rep, char *const *env,
                        const char *var, const char *id_base, char *const *dirs)
{
	_cleanup_free_ char *install = gp_install_hint(c, "env");
	_cleanup_free_ char *hint = gp_xasprintf("%s to rewrite " PROFILE_SCRIPT,
	                                         install);
	const char *value = env_value(env, var);
	_cleanup_strv_ char **items = gp_strv_split(value ? value : "", ':');
	for (size_t i = 0; dirs[i]; i++) {
		size_t count = 0;
		for (size_t j = 0; items[j]; j++)
			count += strcmp(items[j], dirs[i]) == 0;
		_cleanup_free_ char *check = gp_xasprintf("%s has %s", var, dirs[i]);
		if (count == 1)
			gp_report_add_subject(rep, id_base, dirs[i], GP_PASS, check, NULL,
			                      "once, after sourcing twice");
		else
			gp_report_add_subject(rep, id_base, dirs[i], GP_FAIL, check, hint,
			                      "%zu times after sourcing twice: %s=%s",
			                      count, var, value ? value : "");
	}
}

static void verify_dirs(struct gp_ctx *c, struct gp_report *rep, char *const *dirs)
{
	_cleanup_free_ char *cuda = gp_hint_command(c, "install", "cuda");
	_cleanup_free_ char *hint = gp_xasprintf(
	    "install the CUDA toolkit ('%s') or correct the profile's stages.env "
	    "paths",
	    cuda);
	for (size_t i = 0; dirs[i]; i++) {
		struct stat st;
		_cleanup_free_ char *check = gp_xasprintf("%s exists", dirs[i]);
		if (gp_root_stat(&c->root, dirs[i], &st) == 0 && S_ISDIR(st.st_mode))
			gp_report_add_subject(rep, "env.directory", dirs[i], GP_PASS,
			                      check, NULL, "directory present");
		else
			gp_report_add_subject(rep, "env.directory", dirs[i], GP_FAIL,
			                      check, hint, "no such directory in %s",
			                      c->root.dir);
	}
}

static void verify_conda(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	if (!conda_init(cfg))
		return;
	const char *prefix = conda_prefix(c);
	if (!prefix) {
		gp_report_add(
		    rep, "env.conda_init", GP_FAIL, "conda_init",
		    "set stages.pytorch.method to conda, or conda_init to false",
		    "stages.pytorch has no conda prefix");
		return;
	}
	_cleanup_free_ char *want = render_conda(c, prefix);
	_cleanup_free_ char *sh = gp_xasprintf("%s/etc/profile.d/conda.sh", prefix);
	bool ok = gp_stage_file_is(c, CONDA_SCRIPT, want);
	_cleanup_free_ char *install = gp_install_hint(c, "env");
	gp_report_add(rep, "env.conda_init", ok ? GP_PASS : GP_FAIL, "conda_init",
	              install, "%s %s", CONDA_SCRIPT,
	              ok ? "sources conda.sh" : "is missing or differs");
	bool there = gp_root_exists(&c->root, sh);
	_cleanup_free_ char *pytorch = gp_hint_command(c, "install", "pytorch");
	_cleanup_free_ char *conda_hint = gp_xasprintf("install conda first: '%s'",
	                                               pytorch);
	gp_report_add(rep, "env.conda_sh", there ? GP_PASS : GP_FAIL, "conda.sh",
	              conda_hint, "%s %s", sh, there ? "present" : "missing");
}

static int env_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct env_settings s;
	settings(cfg, &s);
	_cleanup_free_ char *install = gp_install_hint(c, "env");
	_cleanup_free_ char *ld_conf = render_ld_conf(c, &s);
	gp_report_add(rep, "env.ld_conf",
	              gp_stage_file_is(c, LD_CONF, ld_conf) ? GP_PASS : GP_FAIL,
	              "linker configuration", install, "%s %s", LD_CONF,
	              gp_stage_file_is(c, LD_CONF, ld_conf) ? "matches the profile"
	                                                    : "is missing or differs");
	/* The script path is an argument, not part of the (fixed) shell program. */
	char *const argv[] = { "sh", "-c",           ". \"$1\" && . \"$1\" && env",
		               "sh", PROFILE_SCRIPT, NULL };
	struct gp_run_result res = { 0 };
	int rc = gp_ctx_run_readonly(c, argv, &res);
	if (rc < 0 || !gp_run_succeeded(&res)) {
		_cleanup_free_ char *how = rc < 0
		                               ? gp_xstrdup(strerror(-rc))
		                               : gp_run_describe(&res, c->cmd_timeout_ms);
		_cleanup_free_ char *hint = gp_xasprintf(
		    "%s; check that the root has /bin/sh", install);
		gp_report_add(rep, "env.profile_script", GP_FAIL, "profile script", hint,
		              "sourcing %s in the root's sh failed: %s%s%s",
		              PROFILE_SCRIPT, how, res.output_len ? ": " : "",
		              res.output_len ? res.output : "");
		gp_run_result_free(&res);
		env_settings_free(&s);
		return 0;
	}
	_cleanup_strv_ char **env = gp_strv_split(res.output, '\n');
	gp_run_result_free(&res);
	const char *home = env_value(env, "CUDA_HOME");
	if (gp_streq(home, s.cuda_home))
		gp_report_add(rep, "env.cuda_home", GP_PASS, "CUDA_HOME", NULL, "%s",
		              home);
	else
		gp_report_add(rep, "env.cuda_home", GP_FAIL, "CUDA_HOME", install,
		              "expected %s, got %s", s.cuda_home,
		              home ? home : "(unset)");
	verify_list(c, rep, env, "PATH", "env.path", s.path);
	verify_list(c, rep, env, "LD_LIBRARY_PATH", "env.ld_library_path",
	            s.ld_library_path);
	for (const cJSON *v = s.vars ? s.vars->child : NULL; v; v = v->next) {
		const char *got = env_value(env, v->string);
		if (gp_streq(got, v->valuestring))
			gp_report_add_subject(rep, "env.variable", v->string, GP_PASS,
			                      v->string, NULL, "%s", got);
		else
			gp_report_add_subject(rep, "env.variable", v->string, GP_FAIL,
			                      v->string, install, "expected %s, got %s",
			                      v->valuestring, got ? got : "(unset)");
	}
	verify_conda(c, cfg, rep);
	char *const home_dir[] = { (char *)s.cuda_home, NULL };
	verify_dirs(c, rep, home_dir);
	verify_dirs(c, rep, s.path);
	verify_dirs(c, rep, s.ld_library_path);
	env_settings_free(&s);
	return 0;
}

const struct gp_stage gp_stage_env = {
	.name = "env",
	.summary = "CUDA environment for login shells and the dynamic linker",
	.keys = env_keys,
	.doc = "CUDA_HOME, PATH and LD_LIBRARY_PATH for login shells and the "
	       "dynamic linker.",
	.reads = (const char *const[]){ "pytorch", NULL },
	.check = env_check,
	.apply = env_apply,
	.verify = env_verify,
};
