/*
 * wsview: N WebSocket viewers in one epoll loop, for the steady-rate fan-out
 * scenario. A viewer costs the load generator ~11-12 us of CPU per message
 * with Deno's WebSocket (or npm:ws, or socket.io-client); on two shared
 * cores that much client work queues up behind the server under test and
 * becomes most of the latency measured. This client reads many frames per
 * read(2) and does no allocation per message.
 *
 *   wsview <kind> <host> <port> <count> [api-key] [session-id]
 *
 * kind: baton (GET /_viewer with x-api-key, then subscribe and wait for
 * caught_up), bare (GET /), socketio (Engine.IO v4 over a WebSocket,
 * main namespace; answers pings).
 *
 * Every event in an events frame is `{"seq":N,"ts":T,...}` (for socket.io the
 * frame is a JSON string inside the packet, so its quotes are escaped). T is
 * the publisher's send time in milliseconds on this program's clock
 * (CLOCK_MONOTONIC; the publisher learns the offset with "clock");
 * latency is now - T. Events are checked per viewer to
 * continue its sequence (a gap or duplicate counts in "gaps").
 *
 * stdin, one command per line: "clock" prints {"clock":<now in ms>},
 * "measure" starts recording, "stop" stops it
 * and prints the result as one JSON line, "drain <seq> <ms>" waits until every
 * viewer has seen <seq> (or <ms> pass) and prints {"undelivered":..}, "quit"
 * exits. stdout: "ready" once every viewer is ready.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum kind { BATON, BARE, SOCKETIO };
enum state { HANDSHAKE, WAIT_HELLO, WAIT_CAUGHT_UP, WAIT_EIO_OPEN, WAIT_NS, READY, CLOSED };

typedef struct {
  int fd;
  enum state state;
  char *buf;
  size_t len, cap;
  long long last_seq;
} viewer;

static enum kind kind;
static const char *api_key = "", *session_id = "";
static viewer *views;
static int count, ready_count;
static int measuring;
static double *lat;
static size_t lat_len, lat_cap;
static long long frames, deliveries, gaps, closed_count;
static double measure_start, measure_secs;

/* CLOCK_MONOTONIC: the clock Deno's performance.now() runs on. */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void die(const char *what) {
  fprintf(stderr, "wsview: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    p += w;
    n -= (size_t)w;
  }
}

/* A masked client frame (the mask is zero: allowed, and the payload stays as is). */
static void send_frame(viewer *v, int opcode, const char *payload, size_t n) {
  char head[14];
  size_t h = 0;
  head[h++] = (char)(0x80 | opcode);
  if (n < 126) {
    head[h++] = (char)(0x80 | n);
  } else {
    head[h++] = (char)(0x80 | 126);
    head[h++] = (char)(n >> 8);
    head[h++] = (char)n;
  }
  memset(head + h, 0, 4);
  h += 4;
  char out[16 + 1024];
  if (n > 1024) return;
  memcpy(out, head, h);
  memcpy(out + h, payload, n);
  write_all(v->fd, out, h + n);
}

static void send_text(viewer *v, const char *s) { send_frame(v, 1, s, strlen(s)); }

static void record(double ms) {
  if (lat_len == lat_cap) {
    lat_cap = lat_cap ? lat_cap * 2 : 1 << 20;
    lat = realloc(lat, lat_cap * sizeof *lat);
    if (!lat) die("realloc");
  }
  lat[lat_len++] = ms;
}

static long long int_at(const char *p, const char *end) {
  long long n = 0;
  while (p < end && *p >= '0' && *p <= '9') n = n * 10 + (*p++ - '0');
  return n;
}

static double num_at(const char *p, const char *end) {
  char tmp[40];
  size_t i = 0;
  while (p < end && i < sizeof tmp - 1 && ((*p >= '0' && *p <= '9') || *p == '.')) tmp[i++] = *p++;
  tmp[i] = 0;
  return strtod(tmp, NULL);
}

/* Walks `"seq":N,"ts":T` (quotes possibly escaped) through an events frame. */
static void on_events(viewer *v, const char *p, const char *end) {
  double t = now_ms();
  int any = 0;
  for (;;) {
    const char *s = memmem(p, (size_t)(end - p), "seq", 3);
    if (!s) break;
    p = s + 3;
    while (p < end && (*p == '\\' || *p == '"')) p++;
    if (p >= end || *p != ':') continue;
    p++;
    long long seq = int_at(p, end);
    const char *ts = memmem(p, (size_t)(end - p) < 64 ? (size_t)(end - p) : 64, "ts", 2);
    double sent = 0;
    if (ts) {
      ts += 2;
      while (ts < end && (*ts == '\\' || *ts == '"')) ts++;
      if (ts < end && *ts == ':') sent = num_at(ts + 1, end);
    }
    if (seq != v->last_seq + 1) gaps++;
    v->last_seq = seq;
    any = 1;
    if (measuring) {
      deliveries++;
      if (sent > 0) record(t - sent);
    }
  }
  if (any && measuring) frames++;
}

static void became_ready(viewer *v) {
  v->state = READY;
  if (++ready_count == count) {
    printf("ready\n");
    fflush(stdout);
  }
}

static void on_text(viewer *v, const char *p, size_t n) {
  const char *end = p + n;
  switch (v->state) {
    case WAIT_HELLO:
      if (memmem(p, n, "\"hello\"", 7)) {
        char sub[512];
        snprintf(sub, sizeof sub, "{\"t\":\"subscribe\",\"sessionId\":\"%s\",\"since\":0}", session_id);
        send_text(v, sub);
        v->state = WAIT_CAUGHT_UP;
      }
      return;
    case WAIT_CAUGHT_UP:
      if (memmem(p, n, "\"caught_up\"", 11)) became_ready(v);
      else if (memmem(p, n, "\"t\":\"events\"", 12)) on_events(v, p, end);
      return;
    case WAIT_EIO_OPEN:
      if (n > 0 && p[0] == '0') {
        send_text(v, "40");
        v->state = WAIT_NS;
      }
      return;
    case WAIT_NS:
      if (n >= 2 && p[0] == '4' && p[1] == '0') became_ready(v);
      return;
    case READY:
      if (kind == SOCKETIO) {
        if (n == 1 && p[0] == '2') {
          send_text(v, "3");
          return;
        }
        if (n >= 2 && p[0] == '4' && p[1] == '2') on_events(v, p, end);
        return;
      }
      if (kind == BARE || (n > 12 && memcmp(p, "{\"t\":\"events\"", 12) == 0)) on_events(v, p, end);
      return;
    default:
      return;
  }
}

static void close_viewer(viewer *v) {
  if (v->state == CLOSED) return;
  v->state = CLOSED;
  closed_count++;
  close(v->fd);
}

/* Consumes whole frames from the buffer; returns bytes used. */
static size_t parse_frames(viewer *v) {
  size_t off = 0;
  for (;;) {
    unsigned char *b = (unsigned char *)v->buf + off;
    size_t avail = v->len - off;
    if (avail < 2) break;
    int opcode = b[0] & 0x0f;
    uint64_t n = b[1] & 0x7f;
    size_t h = 2;
    if (n == 126) {
      if (avail < 4) break;
      n = ((uint64_t)b[2] << 8) | b[3];
      h = 4;
    } else if (n == 127) {
      if (avail < 10) break;
      n = 0;
      for (int i = 0; i < 8; i++) n = (n << 8) | b[2 + i];
      h = 10;
    }
    if (b[1] & 0x80) h += 4; /* servers do not mask, but be safe */
    if (avail < h + n) {
      if (h + n > v->cap) {
        v->cap = h + n + 65536;
        v->buf = realloc(v->buf, v->cap);
        if (!v->buf) die("realloc");
      }
      break;
    }
    const char *payload = (const char *)b + h;
    if (opcode == 1 || opcode == 0) on_text(v, payload, (size_t)n);
    else if (opcode == 9) send_frame(v, 10, payload, (size_t)n);
    else if (opcode == 8) {
      close_viewer(v);
      return v->len;
    }
    off += h + (size_t)n;
  }
  return off;
}

static void on_readable(viewer *v) {
  for (;;) {
    if (v->cap - v->len < 65536) {
      v->cap = v->cap * 2;
      v->buf = realloc(v->buf, v->cap);
      if (!v->buf) die("realloc");
    }
    ssize_t r = read(v->fd, v->buf + v->len, v->cap - v->len);
    if (r == 0) {
      close_viewer(v);
      return;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) close_viewer(v);
      return;
    }
    v->len += (size_t)r;
    if (v->state == HANDSHAKE) {
      char *end = memmem(v->buf, v->len, "\r\n\r\n", 4);
      if (!end) continue;
      if (v->len < 12 || memcmp(v->buf + 9, "101", 3) != 0) {
        fprintf(stderr, "wsview: upgrade refused: %.*s\n", (int)(end - v->buf), v->buf);
        exit(1);
      }
      size_t used = (size_t)(end + 4 - v->buf);
      memmove(v->buf, v->buf + used, v->len - used);
      v->len -= used;
      if (kind == BATON) v->state = WAIT_HELLO;
      else if (kind == SOCKETIO) v->state = WAIT_EIO_OPEN;
      else became_ready(v);
    }
    size_t used = parse_frames(v);
    if (v->state == CLOSED) return;
    if (used > 0) {
      memmove(v->buf, v->buf + used, v->len - used);
      v->len -= used;
    }
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double p) {
  if (lat_len == 0) return 0;
  size_t i = (size_t)(p * (double)(lat_len - 1));
  return lat[i];
}

static void print_result(void) {
  qsort(lat, lat_len, sizeof *lat, cmp_double);
  double sum = 0;
  for (size_t i = 0; i < lat_len; i++) sum += lat[i];
  printf("{\"secs\":%.6f,\"frames\":%lld,\"deliveries\":%lld,\"gaps\":%lld,\"closed\":%lld,"
         "\"latency\":{\"count\":%zu,\"mean\":%.4f,\"p50\":%.4f,\"p90\":%.4f,\"p99\":%.4f,\"max\":%.4f}}\n",
         measure_secs, frames, deliveries, gaps, closed_count, lat_len,
         lat_len ? sum / (double)lat_len : 0, pct(0.5), pct(0.9), pct(0.99), lat_len ? lat[lat_len - 1] : 0);
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: wsview baton|bare|socketio host port count [api-key] [session-id]\n");
    return 2;
  }
  kind = strcmp(argv[1], "baton") == 0 ? BATON : strcmp(argv[1], "socketio") == 0 ? SOCKETIO : BARE;
  const char *host = argv[2];
  int port = atoi(argv[3]);
  count = atoi(argv[4]);
  if (argc > 5) api_key = argv[5];
  if (argc > 6) session_id = argv[6];
  const char *path = kind == BATON ? "/_viewer" : kind == SOCKETIO ? "/socket.io/?EIO=4&transport=websocket" : "/";

  int ep = epoll_create1(0);
  if (ep < 0) die("epoll_create1");
  views = calloc((size_t)count, sizeof *views);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &addr.sin_addr);
  char req[1024];
  int reqlen = snprintf(req, sizeof req,
                        "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                        "%s%s%s\r\n",
                        path, host, port, kind == BATON ? "x-api-key: " : "", kind == BATON ? api_key : "",
                        kind == BATON ? "\r\n" : "");
  for (int i = 0; i < count; i++) {
    viewer *v = &views[i];
    v->cap = 65536;
    v->buf = malloc(v->cap);
    v->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (v->fd < 0) die("socket");
    int one = 1;
    setsockopt(v->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(v->fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
    write_all(v->fd, req, (size_t)reqlen);
    fcntl(v->fd, F_SETFL, O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = v};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, v->fd, &ev) < 0) die("epoll_ctl");
  }
  fcntl(0, F_SETFL, O_NONBLOCK);
  struct epoll_event sev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev);

  char cmd[256];
  size_t cmdlen = 0;
  long long drain_seq = -1;
  double drain_deadline = 0;
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, drain_seq >= 0 ? 5 : 100);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr) {
        on_readable(evs[i].data.ptr);
        continue;
      }
      ssize_t r = read(0, cmd + cmdlen, sizeof cmd - 1 - cmdlen);
      if (r == 0) return 0;
      if (r < 0) continue;
      cmdlen += (size_t)r;
      char *nl;
      while ((nl = memchr(cmd, '\n', cmdlen))) {
        *nl = 0;
        if (strcmp(cmd, "measure") == 0) {
          measuring = 1;
          frames = deliveries = 0;
          lat_len = 0;
          measure_start = now_ms();
        } else if (strcmp(cmd, "stop") == 0) {
          measuring = 0;
          measure_secs = (now_ms() - measure_start) / 1000;
        } else if (strncmp(cmd, "drain ", 6) == 0) {
          double ms = 0;
          sscanf(cmd + 6, "%lld %lf", &drain_seq, &ms);
          drain_deadline = now_ms() + ms;
        } else if (strcmp(cmd, "clock") == 0) {
          printf("{\"clock\":%.4f}\n", now_ms());
          fflush(stdout);
        } else if (strcmp(cmd, "quit") == 0) {
          return 0;
        }
        size_t used = (size_t)(nl + 1 - cmd);
        memmove(cmd, cmd + used, cmdlen - used);
        cmdlen -= used;
      }
    }
    if (drain_seq >= 0) {
      long long least = -1;
      for (int i = 0; i < count; i++) {
        if (views[i].state == CLOSED) continue;
        if (least < 0 || views[i].last_seq < least) least = views[i].last_seq;
      }
      if (least < 0) least = 0;
      if (least >= drain_seq || now_ms() > drain_deadline) {
        print_result();
        printf("{\"undelivered\":%lld}\n", drain_seq - least);
        fflush(stdout);
        drain_seq = -1;
      }
    }
  }
}
