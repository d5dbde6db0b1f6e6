#include "json_min.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JM_MAX_DEPTH 64

struct jm_parser {
	const char *s, *end, *start;
	char *why;
	size_t whylen;
	int failed;
};

static void fail(struct jm_parser *p, const char *what)
{
	int line = 1, col = 1;
	const char *c;

	if (p->failed)
		return;
	p->failed = 1;
	for (c = p->start; c < p->s && c < p->end; c++) {
		if (*c == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	snprintf(p->why, p->whylen, "%s at line %d, column %d", what, line, col);
}

static void skip_ws(struct jm_parser *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

void jm_free(struct jm_node *n)
{
	int i;

	if (!n)
		return;
	for (i = 0; i < n->n; i++)
		jm_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n->key);
	free(n);
}

static struct jm_node *node_new(struct jm_parser *p, enum jm_type t)
{
	struct jm_node *n = calloc(1, sizeof(*n));

	if (!n)
		fail(p, "out of memory");
	else
		n->type = t;
	return n;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int hex4(struct jm_parser *p, unsigned *out)
{
	unsigned v = 0;
	int i, h;

	if (p->end - p->s < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		if ((h = hexval(p->s[i])) < 0)
			return -1;
		v = v * 16 + (unsigned)h;
	}
	p->s += 4;
	*out = v;
	return 0;
}

static size_t utf8_put(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string at p->s (the opening quote), unescaped into a new buffer. The
 * output is never longer than the input. */
static char *parse_string(struct jm_parser *p)
{
	const char *q = p->s + 1;
	char *out, *o;

	while (q < p->end && *q != '"')
		q += *q == '\\' ? 2 : 1;
	if (q >= p->end) {
		fail(p, "unterminated string");
		return NULL;
	}
	if (!(out = malloc((size_t)(q - p->s) + 1))) {
		fail(p, "out of memory");
		return NULL;
	}
	o = out;
	p->s++;
	while (*p->s != '"') {
		unsigned char c = (unsigned char)*p->s;

		if (c < 0x20) {
			fail(p, "control character in a string");
			goto bad;
		}
		if (c != '\\') {
			*o++ = (char)c;
			p->s++;
			continue;
		}
		p->s++;
		switch (*p->s++) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;

			if (hex4(p, &cp) < 0) {
				fail(p, "bad \\u escape");
				goto bad;
			}
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u') {
					fail(p, "unpaired surrogate");
					goto bad;
				}
				p->s += 2;
				if (hex4(p, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff) {
					fail(p, "bad surrogate pair");
					goto bad;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				fail(p, "unpaired surrogate");
				goto bad;
			}
			/* a 6-byte escape yields at most 3 bytes, a 12-byte pair 4 */
			o += utf8_put(o, cp);
			break;
		}
		default:
			p->s--;
			fail(p, "bad escape");
			goto bad;
		}
	}
	p->s++;
	*o = 0;
	return out;
bad:
	free(out);
	return NULL;
}

static struct jm_node *parse_value(struct jm_parser *p, int depth);

static int add_kid(struct jm_parser *p, struct jm_node *n, struct jm_node *k, int *cap)
{
	if (n->n == *cap) {
		int c = *cap ? 2 * *cap : 8;
		struct jm_node **nk = realloc(n->kids, (size_t)c * sizeof(*nk));

		if (!nk) {
			fail(p, "out of memory");
			return -1;
		}
		n->kids = nk;
		*cap = c;
	}
	n->kids[n->n++] = k;
	return 0;
}

static struct jm_node *parse_container(struct jm_parser *p, int depth, int object)
{
	struct jm_node *n = node_new(p, object ? JM_OBJECT : JM_ARRAY), *k = NULL;
	char close = object ? '}' : ']';
	int cap = 0;

	if (!n)
		return NULL;
	p->s++;
	skip_ws(p);
	if (p->s < p->end && *p->s == close) {
		p->s++;
		return n;
	}
	for (;;) {
		char *key = NULL;

		skip_ws(p);
		if (object) {
			if (p->s >= p->end || *p->s != '"') {
				fail(p, "expected a member name");
				goto bad;
			}
			if (!(key = parse_string(p)))
				goto bad;
			skip_ws(p);
			if (p->s >= p->end || *p->s != ':') {
				free(key);
				fail(p, "expected ':'");
				goto bad;
			}
			p->s++;
		}
		if (!(k = parse_value(p, depth + 1))) {
			free(key);
			goto bad;
		}
		k->key = key;
		if (add_kid(p, n, k, &cap) < 0) {
			jm_free(k);
			goto bad;
		}
		skip_ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->end && *p->s == close) {
			p->s++;
			return n;
		}
		fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
		goto bad;
	}
bad:
	jm_free(n);
	return NULL;
}

/* The end of the run of digits that starts at q, or NULL (the parse failed:
 * "bad number") when no digit starts there. */
static const char *digits(struct jm_parser *p, const char *q)
{
	if (q >= p->end || *q < '0' || *q > '9') {
		fail(p, "bad number");
		return NULL;
	}
	while (q < p->end && *q >= '0' && *q <= '9')
		q++;
	return q;
}

static struct jm_node *parse_number(struct jm_parser *p)
{
	const char *q = p->s;
	char buf[64], *end;
	struct jm_node *n;
	size_t len;

	if (q < p->end && *q == '-')
		q++;
	/* JSON: one 0, or digits without a leading zero */
	if (q < p->end && *q == '0')
		q++;
	else if (!(q = digits(p, q)))
		return NULL;
	if (q < p->end && *q == '.' && !(q = digits(p, q + 1)))
		return NULL;
	if (q < p->end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < p->end && (*q == '+' || *q == '-'))
			q++;
		if (!(q = digits(p, q)))
			return NULL;
	}
	len = (size_t)(q - p->s);
	if (len >= sizeof(buf)) {
		fail(p, "number too long");
		return NULL;
	}
	memcpy(buf, p->s, len);
	buf[len] = 0;
	if (!(n = node_new(p, JM_NUMBER)))
		return NULL;
	n->num = strtod(buf, &end);
	p->s = q;
	return n;
}

static int literal(struct jm_parser *p, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
		return 0;
	p->s += n;
	return 1;
}

static struct jm_node *parse_value(struct jm_parser *p, int depth)
{
	struct jm_node *n;

	if (depth > JM_MAX_DEPTH) {
		fail(p, "nested too deeply");
		return NULL;
	}
	skip_ws(p);
	if (p->s >= p->end) {
		fail(p, "unexpected end of text");
		return NULL;
	}
	switch (*p->s) {
	case '{':
		return parse_container(p, depth, 1);
	case '[':
		return parse_container(p, depth, 0);
	case '"':
		if (!(n = node_new(p, JM_STRING)))
			return NULL;
		if (!(n->str = parse_string(p))) {
			jm_free(n);
			return NULL;
		}
		return n;
	case 't':
		if (literal(p, "true"))
			return node_new(p, JM_TRUE);
		break;
	case 'f':
		if (literal(p, "false"))
			return node_new(p, JM_FALSE);
		break;
	case 'n':
		if (literal(p, "null"))
			return node_new(p, JM_NULL);
		break;
	default:
		if (*p->s == '-' || (*p->s >= '0' && *p->s <= '9'))
			return parse_number(p);
	}
	fail(p, "unexpected character");
	return NULL;
}

struct jm_node *jm_parse(const char *text, size_t len, char *why, size_t whylen)
{
	struct jm_parser p = { text, text + len, text, why, whylen, 0 };
	struct jm_node *n;

	if (whylen)
		why[0] = 0;
	if (!(n = parse_value(&p, 0)))
		return NULL;
	skip_ws(&p);
	if (p.s != p.end) {
		fail(&p, "text after the value");
		jm_free(n);
		return NULL;
	}
	return n;
}

const struct jm_node *jm_get(const struct jm_node *obj, const char *key)
{
	int i;

	if (!obj || obj->type != JM_OBJECT)
		return NULL;
	for (i = 0; i < obj->n; i++)
		if (strcmp(obj->kids[i]->key, key) == 0)
			return obj->kids[i];
	return NULL;
}

const char *jm_str(const struct jm_node *obj, const char *key, const char *def)
{
	const struct jm_node *n = jm_get(obj, key);

	return n && n->type == JM_STRING ? n->str : def;
}

double jm_num(const struct jm_node *obj, const char *key, double def)
{
	const struct jm_node *n = jm_get(obj, key);

	return n && n->type == JM_NUMBER ? n->num : def;
}
