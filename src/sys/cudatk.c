/* Version probes of an installed CUDA toolkit (cudatk.h). Read state, not
 * prose: the version files and the header macro first; nvcc's banner is
 * the one text parsed, because it is what users see and what goes wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gpuprov/cudatk.h"
#include "gpuprov/json.h"
#include "gpuprov/util.h"

char *gp_cuda_header_parse(const char *text)
{
	long v;
	if (gp_header_define(text, "CUDA_VERSION", &v) && v > 0)
		return gp_xasprintf("%ld.%ld", v / 1000, (v % 1000) / 10);
	return NULL;
}

char *gp_cuda_version_json_parse(const char *text)
{
	cJSON *doc = cJSON_Parse(text);
	const char *v = gp_json_string(cJSON_GetObjectItemCaseSensitive(doc, "cuda"),
	                               "version", NULL);
	char *version = v ? gp_xstrdup(v) : NULL;
	cJSON_Delete(doc);
	return version;
}

char *gp_cuda_version_txt_parse(const char *text)
{
	char v[32];
	return sscanf(text, "CUDA Version %31s", v) == 1 ? gp_xstrdup(v) : NULL;
}

char *gp_cudnn_header_parse(const char *text)
{
	const char *keys[] = { "CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL" };
	long v[3];
	for (int i = 0; i < 3; i++)
		if (!gp_header_define(text, keys[i], &v[i]) || v[i] < 0)
			return NULL;
	return gp_xasprintf("%ld.%ld.%ld", v[0], v[1], v[2]);
}

char *gp_nvcc_version_parse(const char *text)
{
	const char *p = strstr(text, "Cuda compilation tools, release ");
	if (!p)
		return NULL;
	p += strlen("Cuda compilation tools, release ");
	const char *v = strstr(p, ", V");
	const char *nl = strchr(p, '\n');
	if (v && (!nl || v < nl)) {
		v += 3;
		size_t n = strspn(v, "0123456789.");
		if (n)
			return gp_xstrndup(v, n);
	}
	size_t n = strspn(p, "0123456789.");
	return n ? gp_xstrndup(p, n) : NULL;
}

void gp_cuda_probe_files(const struct gp_root *r, const char *dir,
                         struct gp_cuda_probe *p)
{
	*p = (struct gp_cuda_probe){ 0 };
	_cleanup_free_ char *jpath = gp_xasprintf("%s/version.json", dir);
	_cleanup_free_ char *tpath = gp_xasprintf("%s/version.txt", dir);
	_cleanup_free_ char *hpath = gp_xasprintf("%s/include/cuda.h", dir);
	_cleanup_free_ char *text = NULL;
	if (gp_root_read(r, jpath, &text, NULL) == 0)
		p->json = gp_cuda_version_json_parse(text);
	free(text);
	text = NULL;
	if (gp_root_read(r, tpath, &text, NULL) == 0)
		p->txt = gp_cuda_version_txt_parse(text);
	free(text);
	text = NULL;
	if (gp_root_read(r, hpath, &text, NULL) == 0)
		p->header = gp_cuda_header_parse(text);
}

void gp_cuda_probe_free(struct gp_cuda_probe *p)
{
	free(p->json);
	free(p->txt);
	free(p->header);
	free(p->nvcc);
	*p = (struct gp_cuda_probe){ 0 };
}

/* Length of the "X.Y" prefix of v. */
static size_t major_minor_len(const char *v)
{
	const char *dot = strchr(v, '.');
	if (!dot)
		return strlen(v);
	return (size_t)(dot - v) + 1 + strcspn(dot + 1, ".");
}

bool gp_cuda_version_agrees(const char *v, const char *want)
{
	size_t a = major_minor_len(v), b = major_minor_len(want);
	if (a != b || strncmp(v, want, a) != 0)
		return false;
	/* A third part of want (a release "12.4.1") must match v's when v has one. */
	if (want[b] == '.' && v[a] == '.')
		return strcmp(v, want) == 0;
	return true;
}

bool gp_cuda_probe_consistent(const struct gp_cuda_probe *p, char **a, char **b)
{
	*a = *b = NULL;
	const char *names[] = { "version.json", "version.txt", "cuda.h", "nvcc" };
	const char *vals[] = { p->json, p->txt, p->header, p->nvcc };
	const char *first = NULL, *first_name = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		if (!vals[i])
			continue;
		if (!first) {
			first = vals[i];
			first_name = names[i];
			continue;
		}
		size_t n = major_minor_len(first);
		if (major_minor_len(vals[i]) != n || strncmp(vals[i], first, n) != 0) {
			*a = gp_xasprintf("%s says %s", first_name, first);
			*b = gp_xasprintf("%s says %s", names[i], vals[i]);
			return false;
		}
	}
	return true;
}
