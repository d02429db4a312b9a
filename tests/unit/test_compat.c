/* The compatibility preflight: for each rule a refusal and the allowed
 * neighbour next to it (so an off-by-one in either direction fails), the
 * wording an operator reads, overrides, and disabled stages. */
#include "testutil.h"

#include "gpuprov/compat.h"

/* A resolved profile from its parts, each a JSON fragment, or NULL to leave
 * the key out. */
struct parts {
	const char *gpus; /* ["10de:20b0"] */
	const char *driver; /* {...} or false */
	const char *cuda;
	const char *cudnn;
	const char *pytorch;
	const char *override; /* {...} or [...] */
};

static void member(char *buf, size_t size, const char *key, const char *val)
{
	if (!val)
		return;
	size_t len = strlen(buf);
	snprintf(buf + len, size - len, "%s\"%s\": %s", buf[len - 1] == '{' ? "" : ", ",
	         key, val);
}

static void run(const struct parts *p, struct gp_compat_report *rep)
{
	char stages[4096] = "{", text[8192] = "{", match[1024] = "{";
	member(stages, sizeof stages, "driver", p->driver);
	member(stages, sizeof stages, "cuda", p->cuda);
	member(stages, sizeof stages, "cudnn", p->cudnn);
	member(stages, sizeof stages, "pytorch", p->pytorch);
	strcat(stages, "}");
	member(match, sizeof match, "gpus", p->gpus);
	strcat(match, "}");
	member(text, sizeof text, "name", "\"test\"");
	member(text, sizeof text, "match", match);
	member(text, sizeof text, "stages", stages);
	member(text, sizeof text, "override", p->override);
	strcat(text, "}");
	cJSON *doc = cJSON_Parse(text);
	if (!doc)
		fail_msg("test profile is not JSON: %s", text);
	gp_compat_check(doc, rep);
	/* The report must not point into the document. */
	cJSON_Delete(doc);
}

static void print_report(const struct gp_compat_report *rep)
{
	for (size_t i = 0; i < rep->n; i++)
		print_message("  %s: %s%s%s\n", rep->issues[i].rule,
		              rep->issues[i].message,
		              rep->issues[i].override ? " [overridden: " : "",
		              rep->issues[i].override ? rep->issues[i].override : "");
}

/* No issue at all. */
static void expect_ok(const struct parts *p)
{
	struct gp_compat_report rep;
	run(p, &rep);
	if (rep.n) {
		print_report(&rep);
		gp_compat_report_free(&rep);
		fail_msg("expected no issue");
	}
	gp_compat_report_free(&rep);
}

/* Exactly one issue, of rule, blocking; its message contains every needle.
 * Returns the message for further checks (the caller frees it). */
static char *expect_one(const struct parts *p, const char *rule,
                        const char *const needles[])
{
	struct gp_compat_report rep;
	run(p, &rep);
	if (rep.n != 1 || strcmp(rep.issues[0].rule, rule) != 0) {
		print_report(&rep);
		gp_compat_report_free(&rep);
		fail_msg("expected one %s issue", rule);
	}
	assert_null(rep.issues[0].override);
	assert_int_equal(gp_compat_blocking(&rep), 1);
	char *msg = strdup(rep.issues[0].message);
	gp_compat_report_free(&rep);
	for (size_t i = 0; needles && needles[i]; i++)
		if (!strstr(msg, needles[i]))
			fail_msg("message lacks \"%s\": %s", needles[i], msg);
	return msg;
}

static void expect_message(const struct parts *p, const char *rule, const char *want)
{
	char *msg = expect_one(p, rule, NULL);
	if (strcmp(msg, want) != 0)
		fail_msg("message\n  got:  %s\n  want: %s", msg, want);
	free(msg);
}

static void expect_contains(const struct parts *p, const char *rule,
                            const char *const needles[])
{
	free(expect_one(p, rule, needles));
}

/* The rules of every issue, in order, joined by spaces. */
static void expect_rules(const struct parts *p, const char *want)
{
	struct gp_compat_report rep;
	run(p, &rep);
	char got[1024] = "";
	for (size_t i = 0; i < rep.n; i++) {
		assert_true(gp_compat_rule_known(rep.issues[i].rule));
		snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s",
		         i ? " " : "", rep.issues[i].rule);
	}
	if (strcmp(got, want) != 0) {
		print_report(&rep);
		gp_compat_report_free(&rep);
		fail_msg("rules \"%s\", want \"%s\"", got, want);
	}
	gp_compat_report_free(&rep);
}

#define NEEDLES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* driver-cuda */

static void test_driver_cuda_version(void **state)
{
	(void)state;
	expect_ok(&(struct parts){ .driver = "{\"version\": \"550.54.14\"}",
	                           .cuda = "{\"version\": \"12.4\"}" });
	expect_ok(&(struct parts){ .driver = "{\"version\": \"560.35.03\"}",
	                           .cuda = "{\"version\": \"12.4\"}" });
	expect_message(&(struct parts){ .driver = "{\"version\": \"550.54.13\"}",
	                                .cuda = "{\"version\": \"12.4\"}" },
	               GP_RULE_DRIVER_CUDA,
	               "driver 550.54.13 is older than CUDA 12.4's minimum driver "
	               "550.54.14; use driver 550.54.14 or newer, or CUDA 12.3");
	/* Compared as integers: 535.104.05 > 535.54.03 though strcmp disagrees. */
	expect_ok(&(struct parts){ .driver = "{\"version\": \"535.104.05\"}",
	                           .cuda = "{\"version\": \"12.2\"}" });
}

static void test_driver_cuda_update(void **state)
{
	(void)state;
	/* 12.2.2 is 12.2 Update 2, which needs more than 12.2 GA. */
	expect_ok(&(struct parts){ .driver = "{\"version\": \"535.104.05\"}",
	                           .cuda = "{\"version\": \"12.2.2\"}" });
	expect_contains(&(struct parts){ .driver = "{\"version\": \"535.86.09\"}",
	                                 .cuda = "{\"version\": \"12.2.2\"}" },
	                GP_RULE_DRIVER_CUDA,
	                NEEDLES("driver 535.86.09",
	                        "CUDA 12.2.2's minimum driver 535.104.05",
	                        "use driver 535.104.05 or newer"));
	expect_ok(&(struct parts){ .driver = "{\"version\": \"570.124.06\"}",
	                           .cuda = "{\"version\": \"12.8.1\"}" });
	expect_contains(&(struct parts){ .driver = "{\"version\": \"570.26\"}",
	                                 .cuda = "{\"version\": \"12.8.1\"}" },
	                GP_RULE_DRIVER_CUDA, NEEDLES("570.124.06"));
}

static void test_driver_cuda_branch(void **state)
{
	(void)state;
	/* The branch of the minimum itself: its latest driver is assumed. */
	expect_ok(&(struct parts){ .driver = "{\"branch\": \"550\"}",
	                           .cuda = "{\"version\": \"12.4\"}" });
	expect_ok(&(struct parts){ .driver = "{\"branch\": \"535\"}",
	                           .cuda = "{\"version\": \"12.2.2\"}" });
	expect_ok(&(struct parts){ .driver = "{\"branch\": \"580\"}",
	                           .cuda = "{\"version\": \"12.4\"}" });
	expect_message(&(struct parts){ .driver = "{\"branch\": \"545\"}",
	                                .cuda = "{\"version\": \"12.4\"}" },
	               GP_RULE_DRIVER_CUDA,
	               "driver branch 545 is older than CUDA 12.4's minimum driver "
	               "550.54.14; use driver branch 550 or newer, or CUDA 12.3");
	expect_message(&(struct parts){ .driver = "{\"method\": \"apt\", \"branch\": "
	                                          "\"470\", \"modules\": \"auto\"}",
	                                .cuda = "{\"version\": \"12.4\"}" },
	               GP_RULE_DRIVER_CUDA,
	               "driver branch 470 is older than CUDA 12.4's minimum driver "
	               "550.54.14; use driver branch 550 or newer, or CUDA 11.4");
	/* A version says more than a branch, so it is what counts. */
	expect_contains(&(struct parts){ .driver = "{\"branch\": \"550\", \"version\": "
	                                           "\"550.54.13\"}",
	                                 .cuda = "{\"version\": \"12.4\"}" },
	                GP_RULE_DRIVER_CUDA, NEEDLES("driver 550.54.13 is older"));
}

static void test_driver_cuda_suggestion_fits_gpus(void **state)
{
	(void)state;
	/* CUDA 11.4 would fit branch 470 but cannot target H100: not offered. */
	expect_message(&(struct parts){ .gpus = "[\"10de:2330\"]",
	                                .driver = "{\"branch\": \"470\"}",
	                                .cuda = "{\"version\": \"12.4\"}" },
	               GP_RULE_DRIVER_CUDA,
	               "driver branch 470 is older than CUDA 12.4's minimum driver "
	               "550.54.14; use driver branch 550 or newer");
}

static void test_driver_cuda_unknown(void **state)
{
	(void)state;
	/* A CUDA gpuprov does not know is refused, so a typo is caught. */
	expect_contains(&(struct parts){ .driver = "{\"branch\": \"550\"}",
	                                 .cuda = "{\"version\": \"12.7\"}" },
	                GP_RULE_DRIVER_CUDA,
	                NEEDLES("CUDA 12.7 is not in gpuprov's", "11.1 to 13.5",
	                        "driver branch 550"));
	expect_contains(&(struct parts){ .driver = "{\"version\": \"580.65.06\"}",
	                                 .cuda = "{\"version\": \"1.28\"}" },
	                GP_RULE_DRIVER_CUDA, NEEDLES("CUDA 1.28 is not in gpuprov's"));
	/* ... but only when there is a driver to check against it. */
	expect_ok(
	    &(struct parts){ .driver = "false", .cuda = "{\"version\": \"12.7\"}" });
}

/* gpu-cuda */

static void test_gpu_cuda_dropped(void **state)
{
	(void)state;
	expect_ok(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                           .cuda = "{\"version\": \"12.8\"}" });
	expect_message(
	    &(struct parts){ .gpus = "[\"10de:1db1\"]",
	                     .cuda = "{\"version\": \"13.0\"}" },
	    GP_RULE_GPU_CUDA,
	    "CUDA 13.0 cannot target V100 (10de:1db1, Volta, compute capability "
	    "7.0): CUDA 13 dropped compute capabilities below 7.5; use CUDA 12.9 "
	    "or older, or drop 10de:1db1 from match.gpus");
	/* T4 is CC 7.5: kept by CUDA 13. */
	expect_ok(&(struct parts){ .gpus = "[\"10de:1eb8\"]",
	                           .cuda = "{\"version\": \"13.1\"}" });
}

static void test_gpu_cuda_too_old(void **state)
{
	(void)state;
	expect_ok(&(struct parts){ .gpus = "[\"10de:2330\"]",
	                           .cuda = "{\"version\": \"11.8\"}" });
	expect_message(&(struct parts){ .gpus = "[\"10de:2330\"]",
	                                .cuda = "{\"version\": \"11.7\"}" },
	               GP_RULE_GPU_CUDA,
	               "CUDA 11.7 cannot target H100 SXM5 (10de:2330, Hopper, compute "
	               "capability 9.0), first supported by CUDA 11.8; use CUDA 11.8 or "
	               "newer, or drop 10de:2330 from match.gpus");
	expect_ok(&(struct parts){ .gpus = "[\"10de:2901\"]",
	                           .cuda = "{\"version\": \"12.8\"}" });
	expect_contains(&(struct parts){ .gpus = "[\"10de:2901\"]",
	                                 .cuda = "{\"version\": \"12.6.3\"}" },
	                GP_RULE_GPU_CUDA, NEEDLES("B200", "CUDA 12.8 or newer"));
}

/* PyTorch wheels bundle their own CUDA: it must target the GPUs too. */
static void test_gpu_cuda_wheels(void **state)
{
	(void)state;
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:2901\"]",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu128\"}" });
	expect_message(
	    &(struct parts){
	        .gpus = "[\"10de:2901\"]",
	        .pytorch =
	            "{\"index_url\": \"https://download.pytorch.org/whl/cu124\"}" },
	    GP_RULE_GPU_CUDA,
	    "the CUDA 12.4 wheels of PyTorch index "
	    "https://download.pytorch.org/whl/cu124 "
	    "cannot target B200 (10de:2901, Blackwell, compute capability 10.0), first "
	    "supported by CUDA 12.8; use a wheel index for CUDA 12.8 or newer, or drop "
	    "10de:2901 from match.gpus");
	expect_contains(
	    &(struct parts){
	        .gpus = "[\"10de:1db1\"]",
	        .pytorch =
	            "{\"index_url\": \"https://download.pytorch.org/whl/cu130\"}" },
	    GP_RULE_GPU_CUDA,
	    NEEDLES("V100", "CUDA 13 dropped", "a wheel index for CUDA"));
}

static void test_gpu_cuda_ids(void **state)
{
	(void)state;
	/* Unknown NVIDIA ids and other vendors are skipped, never guessed. */
	expect_ok(&(struct parts){ .gpus = "[\"10de:ffff\", \"1002:1db1\", \"junk\", 7]",
	                           .cuda = "{\"version\": \"13.0\"}" });
	/* Upper-case hex is the same id. */
	expect_contains(&(struct parts){ .gpus = "[\"10DE:1DB1\"]",
	                                 .cuda = "{\"version\": \"13.0\"}" },
	                GP_RULE_GPU_CUDA, NEEDLES("10de:1db1"));
	/* One issue per GPU, in the profile's order; a repeated id once. */
	expect_rules(
	    &(struct parts){ .gpus = "[\"10de:2330\", \"10de:2901\", \"10de:2330\"]",
	                     .cuda = "{\"version\": \"11.7\"}" },
	    "gpu-cuda gpu-cuda");
	struct gp_compat_report rep;
	run(&(struct parts){ .gpus = "[\"10de:2901\", \"10de:20b0\", \"10de:2330\"]",
	                     .cuda = "{\"version\": \"11.7\"}" },
	    &rep);
	assert_int_equal(rep.n, 2);
	assert_non_null(strstr(rep.issues[0].message, "B200"));
	assert_non_null(strstr(rep.issues[1].message, "H100"));
	gp_compat_report_free(&rep);
}

/* cudnn-cuda */

static void test_cudnn_cuda(void **state)
{
	(void)state;
	expect_ok(
	    &(struct parts){ .cuda = "{\"version\": \"12.4\"}",
	                     .cudnn = "{\"version\": \"9.8.0.87\", \"cuda\": \"12\"}" });
	expect_ok(
	    &(struct parts){ .cuda = "{\"version\": \"11.8\"}",
	                     .cudnn = "{\"version\": \"8.9.7.29\", \"cuda\": \"11\"}" });
	expect_message(
	    &(struct parts){ .cuda = "{\"version\": \"11.8\"}",
	                     .cudnn = "{\"version\": \"9.8.0.87\", \"cuda\": "
	                              "\"12\"}" },
	    GP_RULE_CUDNN_CUDA,
	    "cuDNN 9.8.0.87 is built for CUDA 12 but the cuda stage installs "
	    "CUDA 11.8; use the cuDNN build for CUDA 11 (cudnn \"cuda\": \"11\"), "
	    "or a CUDA 12.x toolkit");
	expect_contains(&(struct parts){ .cuda = "{\"version\": \"13.0\"}",
	                                 .cudnn = "{\"cuda\": \"12\"}" },
	                GP_RULE_CUDNN_CUDA,
	                NEEDLES("cuDNN is built for CUDA 12", "13.0"));
	/* No "cuda" in the cuDNN stage: nothing to compare. */
	expect_ok(&(struct parts){ .cuda = "{\"version\": \"11.8\"}",
	                           .cudnn = "{\"version\": \"9.8.0.87\"}" });
}

/* torch-driver */

static void test_torch_driver_minor_compat(void **state)
{
	(void)state;
	/* cu124 wheels run on 535 through minor-version compatibility. */
	expect_ok(&(struct parts){
	    .driver = "{\"branch\": \"535\"}",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu124\"}" });
	expect_ok(&(struct parts){
	    .driver = "{\"version\": \"525.60.13\"}",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu128/\"}" });
	expect_contains(&(struct parts){ .driver = "{\"version\": \"520.61.05\"}",
	                                 .pytorch = "{\"index_url\": "
	                                            "\"https://download.pytorch.org/whl/"
	                                            "cu128/\"}" },
	                GP_RULE_TORCH_DRIVER,
	                NEEDLES("driver 520.61.05 is older than driver 525.60.13",
	                        "use driver 525.60.13 or newer",
	                        "https://download.pytorch.org/whl/cu118/"));
	expect_ok(&(struct parts){
	    .driver = "{\"branch\": \"580\"}",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu130\"}" });
	expect_message(&(struct parts){ .driver = "{\"branch\": \"550\"}",
	                                .pytorch = "{\"index_url\": "
	                                           "\"https://download.pytorch.org/whl/"
	                                           "cu130\"}" },
	               GP_RULE_TORCH_DRIVER,
	               "driver branch 550 is older than driver 580, which the CUDA 13.0 "
	               "wheels of PyTorch index https://download.pytorch.org/whl/cu130 "
	               "need; use driver branch 580 or newer, or the wheel index "
	               "https://download.pytorch.org/whl/cu124");
}

static void test_torch_driver_cpu(void **state)
{
	(void)state;
	expect_message(
	    &(struct parts){ .driver = "{\"branch\": \"535\"}",
	                     .pytorch = "{\"index_url\": "
	                                "\"https://download.pytorch.org/whl/"
	                                "cpu\"}" },
	    GP_RULE_TORCH_DRIVER,
	    "CPU-only wheels cannot use the GPU: PyTorch index "
	    "https://download.pytorch.org/whl/cpu has no CUDA build, so driver "
	    "branch 535 would go unused; use a CUDA wheel index such as "
	    "https://download.pytorch.org/whl/cu121");
	/* The suggested wheel must target the GPUs too (B200 needs cu128+). */
	expect_contains(&(struct parts){ .gpus = "[\"10de:2901\"]",
	                                 .driver = "{\"branch\": \"570\"}",
	                                 .pytorch = "{\"index_url\": "
	                                            "\"https://download.pytorch.org/whl/"
	                                            "cpu/\"}" },
	                GP_RULE_TORCH_DRIVER,
	                NEEDLES("such as https://download.pytorch.org/whl/cu128/"));
}

static void test_torch_driver_unreadable(void **state)
{
	(void)state;
	/* No index_url: the default index, nothing to judge. */
	expect_ok(&(struct parts){ .driver = "{\"branch\": \"470\"}",
	                           .pytorch = "{\"method\": \"venv\"}" });
	/* A mirror without a tag: its CUDA cannot be told. */
	expect_ok(&(struct parts){
	    .driver = "{\"branch\": \"470\"}",
	    .pytorch = "{\"index_url\": \"https://pypi.internal.example/simple\"}" });
	/* A tag gpuprov has no floor for. */
	expect_contains(&(struct parts){ .driver = "{\"branch\": \"470\"}",
	                                 .pytorch = "{\"index_url\": "
	                                            "\"https://download.pytorch.org/whl/"
	                                            "cu102\"}" },
	                GP_RULE_TORCH_DRIVER,
	                NEEDLES("CUDA 10.2 wheels", "driver branch 470",
	                        "https://download.pytorch.org/whl/cu118"));
}

/* module-flavor */

static void test_module_flavor_blackwell(void **state)
{
	(void)state;
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:2901\"]",
	                     .driver = "{\"branch\": \"570\", \"modules\": \"open\"}" });
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:2901\"]",
	                     .driver = "{\"branch\": \"570\", \"modules\": \"auto\"}" });
	expect_message(
	    &(struct parts){ .gpus = "[\"10de:2901\"]",
	                     .driver = "{\"branch\": \"570\", \"modules\": "
	                               "\"proprietary\"}" },
	    GP_RULE_MODULE_FLAVOR,
	    "proprietary kernel modules cannot drive B200 (10de:2901, Blackwell, "
	    "compute capability 10.0), which needs the open modules; use "
	    "\"modules\": \"open\"");
}

static void test_module_flavor_volta(void **state)
{
	(void)state;
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:1db4\"]",
	    .driver = "{\"branch\": \"535\", \"modules\": \"proprietary\"}" });
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:1db4\"]",
	                     .driver = "{\"branch\": \"535\", \"modules\": \"auto\"}" });
	expect_message(&(struct parts){ .gpus = "[\"10de:1db4\"]",
	                                .driver = "{\"branch\": \"535\", \"modules\": "
	                                          "\"open\"}" },
	               GP_RULE_MODULE_FLAVOR,
	               "open kernel modules cannot drive V100 (10de:1db4, Volta, compute "
	               "capability 7.0), which needs the proprietary modules; use "
	               "\"modules\": \"proprietary\"");
	/* Turing takes either. */
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:1eb8\"]",
	                     .driver = "{\"branch\": \"535\", \"modules\": \"open\"}" });
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:1eb8\"]",
	    .driver = "{\"branch\": \"535\", \"modules\": \"proprietary\"}" });
}

static void test_module_flavor_mixed(void **state)
{
	(void)state;
	expect_message(
	    &(struct parts){ .gpus = "[\"10de:1db1\", \"10de:2901\"]",
	                     .driver = "{\"branch\": \"570\", \"modules\": "
	                               "\"auto\"}" },
	    GP_RULE_MODULE_FLAVOR,
	    "\"modules\": \"auto\" cannot serve V100 (10de:1db1, Volta), which "
	    "needs the proprietary modules, together with B200 (10de:2901, "
	    "Blackwell), which needs the open ones: no single flavor drives "
	    "both; give them separate profiles");
	/* Either explicit flavor fails one of them, and says why switching
	 * does not help. */
	expect_contains(&(struct parts){ .gpus = "[\"10de:1db1\", \"10de:2901\"]",
	                                 .driver = "{\"branch\": \"570\", \"modules\": "
	                                           "\"open\"}" },
	                GP_RULE_MODULE_FLAVOR,
	                NEEDLES("cannot drive V100", "no single flavor drives both"));
	expect_contains(&(struct parts){ .gpus = "[\"10de:1db1\", \"10de:2901\"]",
	                                 .driver = "{\"branch\": \"570\", \"modules\": "
	                                           "\"proprietary\"}" },
	                GP_RULE_MODULE_FLAVOR,
	                NEEDLES("cannot drive B200", "no single flavor drives both"));
	/* Old + new that both take the proprietary modules is not mixed. */
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:1db1\", \"10de:2330\"]",
	                     .driver = "{\"branch\": \"570\", \"modules\": \"auto\"}" });
}

static void test_module_flavor_open_branch(void **state)
{
	(void)state;
	expect_message(&(struct parts){ .driver = "{\"branch\": \"470\", \"modules\": "
	                                          "\"open\"}" },
	               GP_RULE_MODULE_FLAVOR,
	               "open kernel modules need driver branch 515 or newer (they first "
	               "shipped with R515), but the profile pins driver branch 470; use "
	               "driver branch 515 or newer, or \"modules\": \"proprietary\"");
	expect_ok(
	    &(struct parts){ .driver = "{\"branch\": \"515\", \"modules\": \"open\"}" });
	expect_ok(&(struct parts){
	    .driver = "{\"version\": \"515.43.04\", \"modules\": \"open\"}" });
	expect_contains(&(struct parts){ .driver = "{\"version\": \"510.39.01\", "
	                                           "\"modules\": \"open\"}" },
	                GP_RULE_MODULE_FLAVOR,
	                NEEDLES("pins driver 510.39.01", "use driver 515 or newer"));
	/* The floor is for the open flavor only. */
	expect_ok(&(struct parts){
	    .driver = "{\"branch\": \"470\", \"modules\": \"proprietary\"}" });
	/* Branch and GPU both wrong: branch first, then the GPUs. */
	struct gp_compat_report rep;
	run(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                     .driver = "{\"branch\": \"470\", \"modules\": \"open\"}" },
	    &rep);
	assert_int_equal(rep.n, 2);
	assert_non_null(strstr(rep.issues[0].message, "branch 470"));
	assert_non_null(strstr(rep.issues[1].message, "V100"));
	gp_compat_report_free(&rep);
}

/* Overrides */

static const struct parts v100_cuda13 = {
	.gpus = "[\"10de:1db1\"]",
	.cuda = "{\"version\": \"13.0\"}",
};

static void test_override_object(void **state)
{
	(void)state;
	struct parts p = v100_cuda13;
	p.override = "{\"rule\": \"gpu-cuda\", \"reason\": \"runs PTX built for 7.5\"}";
	struct gp_compat_report rep;
	run(&p, &rep);
	/* Kept, so plans and status can print it, but not blocking. */
	assert_int_equal(rep.n, 1);
	assert_string_equal(rep.issues[0].rule, GP_RULE_GPU_CUDA);
	assert_string_equal(rep.issues[0].override, "runs PTX built for 7.5");
	assert_non_null(strstr(rep.issues[0].message, "V100"));
	assert_int_equal(gp_compat_blocking(&rep), 0);
	gp_compat_report_free(&rep);
	assert_int_equal(rep.n, 0);
}

static void test_override_other_rule(void **state)
{
	(void)state;
	struct parts p = v100_cuda13;
	p.override = "{\"rule\": \"driver-cuda\", \"reason\": \"checked\"}";
	expect_contains(&p, GP_RULE_GPU_CUDA, NEEDLES("V100"));
	/* Without a reason an override is not explicit: ignored. */
	p.override = "{\"rule\": \"gpu-cuda\"}";
	expect_contains(&p, GP_RULE_GPU_CUDA, NEEDLES("V100"));
	p.override = "{\"rule\": \"gpu-cuda\", \"reason\": 1}";
	expect_contains(&p, GP_RULE_GPU_CUDA, NEEDLES("V100"));
}

static void test_override_array(void **state)
{
	(void)state;
	struct parts p = {
		.gpus = "[\"10de:1db1\"]",
		.driver = "{\"branch\": \"470\", \"modules\": \"open\"}",
		.cuda = "{\"version\": \"13.0\"}",
		.override = "[{\"rule\": \"module-flavor\", \"reason\": \"lab box\"}, "
		            "{\"rule\": \"gpu-cuda\", \"reason\": \"PTX\"}]",
	};
	struct gp_compat_report rep;
	run(&p, &rep);
	/* driver-cuda, gpu-cuda, and two module-flavor issues (branch, V100). */
	assert_int_equal(rep.n, 4);
	assert_string_equal(rep.issues[0].rule, GP_RULE_DRIVER_CUDA);
	assert_null(rep.issues[0].override);
	assert_string_equal(rep.issues[1].override, "PTX");
	assert_string_equal(rep.issues[2].override, "lab box");
	assert_string_equal(rep.issues[3].override, "lab box");
	assert_int_equal(gp_compat_blocking(&rep), 1);
	gp_compat_report_free(&rep);

	p.override = "[{\"rule\": \"module-flavor\", \"reason\": \"lab box\"}, "
	             "{\"rule\": \"gpu-cuda\", \"reason\": \"PTX\"}, \"junk\", "
	             "{\"rule\": \"driver-cuda\", \"reason\": \"old box\"}]";
	run(&p, &rep);
	assert_int_equal(rep.n, 4);
	assert_int_equal(gp_compat_blocking(&rep), 0);
	gp_compat_report_free(&rep);
}

/* Disabled stages and missing keys */

static void test_disabled_stages(void **state)
{
	(void)state;
	/* Each of these would be refused with the stage on. */
	expect_ok(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                           .driver = "{\"branch\": \"470\"}",
	                           .cuda = "false",
	                           .cudnn = "{\"cuda\": \"11\"}",
	                           .pytorch = "false" });
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:1db1\"]",
	                     .driver = "false",
	                     .cuda = "{\"version\": \"12.4\"}",
	                     .cudnn = "false",
	                     .pytorch = "{\"index_url\": "
	                                "\"https://download.pytorch.org/whl/cpu\"}" });
	/* A driver stage without version, branch or modules has no side. */
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:2901\"]",
	                     .driver = "{\"method\": \"apt\"}",
	                     .cuda = "{\"method\": \"repo\"}",
	                     .cudnn = "{\"version\": \"9.8.0.87\"}",
	                     .pytorch = "{\"index_url\": "
	                                "\"https://download.pytorch.org/whl/cpu\"}" });
	/* No GPUs: the GPU rules have nothing to look at. */
	expect_ok(&(struct parts){ .cuda = "{\"version\": \"13.0\"}",
	                           .driver = "{\"branch\": \"580\", \"modules\": "
	                                     "\"proprietary\"}" });
	expect_ok(&(struct parts){ 0 });

	struct gp_compat_report rep;
	gp_compat_check(NULL, &rep);
	assert_int_equal(rep.n, 0);
	gp_compat_report_free(&rep);
	cJSON *doc = cJSON_Parse("{\"stages\": 5, \"match\": [], \"override\": 3}");
	gp_compat_check(doc, &rep);
	assert_int_equal(rep.n, 0);
	gp_compat_report_free(&rep);
	cJSON_Delete(doc);
}

/* Every rule at once: reported in rule table order. */
static void test_order(void **state)
{
	(void)state;
	expect_rules(
	    &(struct parts){ .gpus = "[\"10de:1db1\", \"10de:2901\"]",
	                     .driver = "{\"branch\": \"470\", \"modules\": \"auto\"}",
	                     .cuda = "{\"version\": \"13.0\"}",
	                     .cudnn = "{\"version\": \"9.8.0.87\", \"cuda\": \"12\"}",
	                     .pytorch = "{\"index_url\": "
	                                "\"https://download.pytorch.org/whl/cpu\"}" },
	    "driver-cuda gpu-cuda cudnn-cuda torch-driver module-flavor");
}

/* A profile like the catalogue's classic A100 stack passes. */
static void test_classic_stack(void **state)
{
	(void)state;
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:20b0\", \"10de:20b2\", \"10de:20b5\", \"10de:20f1\"]",
	    .driver =
	        "{\"method\": \"apt\", \"branch\": \"535\", \"flavor\": \"server\", "
	        "\"modules\": \"auto\"}",
	    .cuda = "{\"method\": \"repo\", \"version\": \"11.8\"}",
	    .cudnn =
	        "{\"method\": \"tarball\", \"version\": \"8.9.7.29\", \"cuda\": \"11\"}",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu118\"}" });
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:2901\"]",
	    .driver = "{\"branch\": \"570\", \"modules\": \"open\"}",
	    .cuda = "{\"version\": \"12.8\"}",
	    .cudnn = "{\"version\": \"9.8.0.87\", \"cuda\": \"12\"}",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu128\"}" });
}

static void test_rule_known(void **state)
{
	(void)state;
	assert_true(gp_compat_rule_known("driver-cuda"));
	assert_true(gp_compat_rule_known("gpu-cuda"));
	assert_true(gp_compat_rule_known("cudnn-cuda"));
	assert_true(gp_compat_rule_known("torch-driver"));
	assert_true(gp_compat_rule_known("module-flavor"));
	assert_true(gp_compat_rule_known("driver-gpu"));
	assert_false(gp_compat_rule_known("driver"));
	assert_false(gp_compat_rule_known(""));
}

/* The 2026 stack: a refusal and its allowed neighbour for each new fact. */

static void test_r620_no_proprietary(void **state)
{
	(void)state;
	/* R620 removed the proprietary modules; R580 still has them. */
	expect_message(&(struct parts){ .gpus = "[\"10de:2330\"]",
	                                .driver = "{\"branch\": \"620\", \"modules\": "
	                                          "\"proprietary\"}" },
	               GP_RULE_MODULE_FLAVOR,
	               "driver branch 620 ships no proprietary kernel modules (NVIDIA "
	               "removed them from branch 620 on); use \"modules\": \"open\" "
	               "(Turing or later GPUs), or driver branch 580, the last "
	               "long-term branch with them");
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:2330\"]",
	                     .driver = "{\"branch\": \"620\", \"modules\": \"open\"}" });
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:2330\"]",
	    .driver = "{\"branch\": \"580\", \"modules\": \"proprietary\"}" });
	/* An exact version of the branch, and one just before it. */
	expect_contains(&(struct parts){ .driver = "{\"version\": \"620.70.06\", "
	                                           "\"modules\": \"proprietary\"}" },
	                GP_RULE_MODULE_FLAVOR,
	                NEEDLES("driver 620.70.06 ships no proprietary"));
	expect_ok(&(struct parts){ .driver = "{\"version\": \"615.71.10\", "
	                                     "\"modules\": \"proprietary\"}" });
}

static void test_pre_turing_last_branch(void **state)
{
	(void)state;
	/* R580 is the last branch for V100. */
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:1db1\"]",
	    .driver = "{\"branch\": \"580\", \"modules\": \"proprietary\"}" });
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:1db1\"]",
	    .driver = "{\"version\": \"580.173.02\", \"modules\": \"proprietary\"}" });
	expect_message(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                                .driver = "{\"branch\": \"595\", \"modules\": "
	                                          "\"proprietary\"}" },
	               GP_RULE_DRIVER_GPU,
	               "driver branch 595 no longer supports V100 (10de:1db1, Volta, "
	               "compute capability 7.0): branch 580 is the last for Maxwell, "
	               "Pascal and Volta; use driver branch 580, or drop 10de:1db1 "
	               "from match.gpus");
	/* A pre-Turing GPU with R620: no proprietary modules, and past its
	 * last branch; with "auto" the branch alone. */
	expect_rules(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                              .driver = "{\"branch\": \"620\", \"modules\": "
	                                        "\"proprietary\"}" },
	             "module-flavor driver-gpu");
	expect_rules(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                              .driver = "{\"version\": \"620.70.06\", "
	                                        "\"modules\": \"auto\"}" },
	             "driver-gpu");
	/* open on a V100 with R620: the fix cannot be "proprietary" alone. */
	struct gp_compat_report rep;
	run(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                     .driver = "{\"branch\": \"620\", \"modules\": \"open\"}" },
	    &rep);
	assert_int_equal(rep.n, 2);
	assert_string_equal(rep.issues[0].rule, GP_RULE_MODULE_FLAVOR);
	assert_non_null(strstr(rep.issues[0].message,
	                       "with driver branch 580, the last for it (driver branch "
	                       "620 ships no proprietary modules)"));
	gp_compat_report_free(&rep);
	/* Turing is not affected. */
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:1eb8\"]",
	                     .driver = "{\"branch\": \"620\", \"modules\": \"open\"}" });
}

static void test_gh200_open_only(void **state)
{
	(void)state;
	expect_message(&(struct parts){ .gpus = "[\"10de:2342\"]",
	                                .driver = "{\"branch\": \"580\", \"modules\": "
	                                          "\"proprietary\"}" },
	               GP_RULE_MODULE_FLAVOR,
	               "proprietary kernel modules cannot drive GH200 (10de:2342, Grace "
	               "Hopper, compute capability 9.0), which needs the open modules; "
	               "use \"modules\": \"open\"");
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:2348\"]",
	                     .driver = "{\"branch\": \"580\", \"modules\": \"open\"}" });
	/* H100, the same CC, takes either. */
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:2330\"]",
	    .driver = "{\"branch\": \"580\", \"modules\": \"proprietary\"}" });
}

static void test_cu132_wheels(void **state)
{
	(void)state;
	/* cu132 (CUDA 13.2) runs on R580 through minor-version compatibility. */
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:2335\"]",
	    .driver = "{\"branch\": \"580\"}",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu132\"}" });
	expect_message(&(struct parts){ .gpus = "[\"10de:2335\"]",
	                                .driver = "{\"branch\": \"575\"}",
	                                .pytorch = "{\"index_url\": "
	                                           "\"https://download.pytorch.org/whl/"
	                                           "cu132\"}" },
	               GP_RULE_TORCH_DRIVER,
	               "driver branch 575 is older than driver 580, which the CUDA 13.2 "
	               "wheels of PyTorch index https://download.pytorch.org/whl/cu132 "
	               "need; use driver branch 580 or newer, or the wheel index "
	               "https://download.pytorch.org/whl/cu129");
	/* cu13x wheels cannot target a V100; cu126 can. */
	expect_contains(&(struct parts){ .gpus = "[\"10de:1db1\"]",
	                                 .driver = "{\"branch\": \"580\"}",
	                                 .pytorch = "{\"index_url\": "
	                                            "\"https://download.pytorch.org/whl/"
	                                            "cu132\"}" },
	                GP_RULE_GPU_CUDA,
	                NEEDLES("CUDA 13.2 wheels", "V100", "CUDA 13 dropped"));
	expect_ok(&(struct parts){
	    .gpus = "[\"10de:1db1\"]",
	    .driver = "{\"branch\": \"580\"}",
	    .pytorch = "{\"index_url\": \"https://download.pytorch.org/whl/cu126\"}" });
	/* The newest tag a driver runs in full is suggested first: cu132 on
	 * R595. */
	expect_contains(&(struct parts){ .driver = "{\"branch\": \"595\"}",
	                                 .pytorch = "{\"index_url\": "
	                                            "\"https://download.pytorch.org/whl/"
	                                            "cpu\"}" },
	                GP_RULE_TORCH_DRIVER,
	                NEEDLES("such as https://download.pytorch.org/whl/cu132"));
}

static void test_b300_cuda(void **state)
{
	(void)state;
	/* sm_103 arrived with CUDA 12.9. */
	expect_contains(&(struct parts){ .gpus = "[\"10de:3182\"]",
	                                 .driver = "{\"branch\": \"580\", \"modules\": "
	                                           "\"open\"}",
	                                 .cuda = "{\"version\": \"12.8\"}" },
	                GP_RULE_GPU_CUDA,
	                NEEDLES("CUDA 12.8 cannot target B300 (10de:3182",
	                        "first supported by CUDA 12.9"));
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:3182\"]",
	                     .driver = "{\"branch\": \"580\", \"modules\": \"open\"}",
	                     .cuda = "{\"version\": \"12.9\"}" });
	expect_ok(
	    &(struct parts){ .gpus = "[\"10de:31c2\"]",
	                     .driver = "{\"branch\": \"580\", \"modules\": \"open\"}",
	                     .cuda = "{\"version\": \"13.0\"}" });
	/* CUDA 13.2 needs R595 in full (its bundled driver). */
	expect_contains(
	    &(struct parts){ .gpus = "[\"10de:3182\"]",
	                     .driver = "{\"branch\": \"580\"}",
	                     .cuda = "{\"version\": \"13.2\"}" },
	    GP_RULE_DRIVER_CUDA,
	    NEEDLES("older than CUDA 13.2's minimum driver 595.45.04", "or CUDA 13.0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_driver_cuda_version),
		cmocka_unit_test(test_driver_cuda_update),
		cmocka_unit_test(test_driver_cuda_branch),
		cmocka_unit_test(test_driver_cuda_suggestion_fits_gpus),
		cmocka_unit_test(test_driver_cuda_unknown),
		cmocka_unit_test(test_gpu_cuda_dropped),
		cmocka_unit_test(test_gpu_cuda_too_old),
		cmocka_unit_test(test_gpu_cuda_wheels),
		cmocka_unit_test(test_gpu_cuda_ids),
		cmocka_unit_test(test_cudnn_cuda),
		cmocka_unit_test(test_torch_driver_minor_compat),
		cmocka_unit_test(test_torch_driver_cpu),
		cmocka_unit_test(test_torch_driver_unreadable),
		cmocka_unit_test(test_module_flavor_blackwell),
		cmocka_unit_test(test_module_flavor_volta),
		cmocka_unit_test(test_module_flavor_mixed),
		cmocka_unit_test(test_module_flavor_open_branch),
		cmocka_unit_test(test_override_object),
		cmocka_unit_test(test_override_other_rule),
		cmocka_unit_test(test_override_array),
		cmocka_unit_test(test_disabled_stages),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_classic_stack),
		cmocka_unit_test(test_rule_known),
		cmocka_unit_test(test_r620_no_proprietary),
		cmocka_unit_test(test_pre_turing_last_branch),
		cmocka_unit_test(test_gh200_open_only),
		cmocka_unit_test(test_cu132_wheels),
		cmocka_unit_test(test_b300_cuda),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
