/*
 * http_client.h -- a minimal blocking HTTP/1.1 client for the server tests
 * (test-only; included by the test programs). One request per connection.
 */
#ifndef KT_TEST_HTTP_CLIENT_H
#define KT_TEST_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct hc_resp {
	int status;
	char *head;		/* status line and headers */
	char *body;		/* NUL-terminated */
	size_t body_len;
};

static __attribute__((unused)) void hc_free(struct hc_resp *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static int hc_send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* 0 with r filled (status 0 when the server closed without an answer). */
static __attribute__((unused)) int hc_request(int port, const char *method, const char *path,
					      const char *extra_headers, const char *body,
					      size_t body_len, struct hc_resp *r)
{
	struct sockaddr_in sa;
	struct timeval tv = { 20, 0 };
	size_t hcap = strlen(path) + (extra_headers ? strlen(extra_headers) : 0) + 256;
	char *head = malloc(hcap);
	char *buf = NULL, *sep;
	size_t len = 0, cap = 0;
	int fd, n;

	memset(r, 0, sizeof(*r));
	if (!head)
		return -1;
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) {
		free(head);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		free(head);
		return -1;
	}
	n = snprintf(head, hcap,
		     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s"
		     "Content-Length: %zu\r\n\r\n", method, path,
		     extra_headers ? extra_headers : "",
		     body ? "Content-Type: application/json\r\n" : "", body ? body_len : 0);
	if (hc_send_all(fd, head, (size_t)n) < 0 ||
	    (body && body_len && hc_send_all(fd, body, body_len) < 0)) {
		/* A server may answer (413) and close before the body is in. */
	}
	free(head);
	for (;;) {
		ssize_t k;

		if (cap - len < 65536) {
			char *nb = realloc(buf, cap ? cap * 2 : 131072);

			if (!nb) {
				free(buf);
				close(fd);
				return -1;
			}
			buf = nb;
			cap = cap ? cap * 2 : 131072;
		}
		k = recv(fd, buf + len, cap - len - 1, 0);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	if (!buf)
		return -1;
	buf[len] = 0;
	if (sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1)
		r->status = 0;
	sep = strstr(buf, "\r\n\r\n");
	if (sep) {
		r->head = strndup(buf, (size_t)(sep - buf));
		r->body_len = len - (size_t)(sep + 4 - buf);
		r->body = malloc(r->body_len + 1);
		memcpy(r->body, sep + 4, r->body_len);
		r->body[r->body_len] = 0;
	} else {
		r->head = strdup(buf);
		r->body = strdup("");
	}
	free(buf);
	return 0;
}

/* The response's JSON body (NULL when not JSON). */
static __attribute__((unused)) json_t *hc_json(const struct hc_resp *r)
{
	return r->body ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
}

#endif
