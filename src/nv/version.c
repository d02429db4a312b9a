/* Version strings of the NVIDIA stack ("535.104.05", "570.26", "12.4"):
 * compared part by part as integers, so 535.104.05 > 535.54.03 although a
 * plain strcmp says otherwise. */
#include <string.h>

#include "gpuprov/version.h"

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

/* Compares the digit runs a[0..na) and b[0..nb) as unbounded integers, so
 * that neither leading zeros ("05" == "5") nor long runs can overflow. */
static int compare_digits(const char *a, size_t na, const char *b, size_t nb)
{
	while (na > 0 && *a == '0') {
		a++;
		na--;
	}
	while (nb > 0 && *b == '0') {
		b++;
		nb--;
	}
	if (na != nb)
		return na < nb ? -1 : 1;
	return sign(memcmp(a, b, na));
}

int gp_version_compare(const char *a, const char *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);

	/* A missing part reads as "" here, which compares like "0". */
	while (*a || *b) {
		size_t da = strspn(a, "0123456789"), db = strspn(b, "0123456789");
		int c = compare_digits(a, da, b, db);
		if (c)
			return c;
		a += da;
		b += db;

		/* What follows the number up to the next dot ("05-1ubuntu1"). */
		size_t ta = strcspn(a, "."), tb = strcspn(b, ".");
		size_t n = ta < tb ? ta : tb;
		c = sign(memcmp(a, b, n));
		if (c)
			return c;
		if (ta != tb)
			return ta < tb ? -1 : 1;
		a += ta;
		b += tb;

		if (*a == '.')
			a++;
		if (*b == '.')
			b++;
	}
	return 0;
}

bool gp_version_is_valid(const char *s)
{
	if (!s || !*s)
		return false;
	for (;;) {
		size_t n = strspn(s, "0123456789");
		if (n == 0)
			return false;
		s += n;
		if (*s == '\0')
			return true;
		if (*s != '.')
			return false;
		s++;
	}
}
