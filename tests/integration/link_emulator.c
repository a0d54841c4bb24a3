/* A link with latency, jitter and loss between two interfaces, for hosts made of network
 * namespaces (hosts.sh) on kernels without netem. hosts.sh compiles it (cc -O2) as a test
 * needs it.
 *
 *   link_emulator A B DELAY_MS JITTER_MS LOSS
 *
 * forwards every Ethernet frame arriving on A out of B and back, each after DELAY_MS plus
 * a uniform draw in [-JITTER_MS, +JITTER_MS] (frames may overtake each other, as netem's
 * jitter lets them), dropping a fraction LOSS of them (drawn from a generator with a fixed
 * seed, in the order frames arrive, which varies from run to run). Runs until killed.
 *
 * Frames travel with their virtio-net header (PACKET_VNET_HDR), as a tap device carries
 * them: a TCP segment the sender left for the NIC to cut (segmentation offload, up to 64
 * KiB) and to checksum crosses as one frame, and the kernel finishes it on the far side.
 * So the hosts keep their offloads, a forwarded megabyte is about 16 frames, not 700, and
 * a lost frame is a lost segment, as in netem, which drops a whole buffer too. docs/multi-host.md
 * has its throughput.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

enum { kVnetHeaderBytes = 10, kLargestFrame = 256 * 1024 };

struct frame {
  int64_t due_ns;
  uint64_t sequence; /* equal due times leave in arrival order */
  int out;           /* the socket it leaves by */
  size_t size;       /* header and frame */
  unsigned char* bytes;
};

/* Frames waiting for their time: a binary heap, the earliest first. */
static struct frame* waiting;
static size_t waiting_count, waiting_capacity;

static int earlier(const struct frame* a, const struct frame* b) {
  return a->due_ns != b->due_ns ? a->due_ns < b->due_ns : a->sequence < b->sequence;
}

static void push(struct frame f) {
  if (waiting_count == waiting_capacity) {
    waiting_capacity = waiting_capacity ? 2 * waiting_capacity : 1024;
    waiting = realloc(waiting, waiting_capacity * sizeof *waiting);
    if (!waiting) {
      perror("link_emulator: realloc");
      exit(1);
    }
  }
  size_t i = waiting_count++;
  while (i > 0 && earlier(&f, &waiting[(i - 1) / 2])) {
    waiting[i] = waiting[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  waiting[i] = f;
}

static struct frame pop(void) {
  struct frame first = waiting[0], last = waiting[--waiting_count];
  size_t i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= waiting_count) break;
    if (child + 1 < waiting_count && earlier(&waiting[child + 1], &waiting[child])) ++child;
    if (!earlier(&waiting[child], &last)) break;
    waiting[i] = waiting[child];
    i = child;
  }
  if (waiting_count > 0) waiting[i] = last;
  return first;
}

static void* allocate(size_t bytes) {
  void* p = malloc(bytes);
  if (!p) {
    perror("link_emulator: malloc");
    exit(1);
  }
  return p;
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A uniform draw in [0, 1) from xorshift64*, seeded the same in every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static int open_link(const char* name) {
  int s = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (s < 0) {
    perror("link_emulator: socket(AF_PACKET)");
    exit(1);
  }
  int one = 1, buffer = 8 << 20;
  if (setsockopt(s, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) {
    fprintf(stderr, "link_emulator: %s: PACKET_VNET_HDR: %s\n", name, strerror(errno));
    exit(1);
  }
  /* Without it the socket on A also reads back what this program sends out of A. */
  setsockopt(s, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  setsockopt(s, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  struct sockaddr_ll address = {0};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_ALL);
  address.sll_ifindex = (int)if_nametoindex(name);
  if (address.sll_ifindex == 0 || bind(s, (struct sockaddr*)&address, sizeof address) != 0) {
    fprintf(stderr, "link_emulator: %s: %s\n", name, strerror(errno));
    exit(1);
  }
  return s;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: link_emulator A B DELAY_MS JITTER_MS LOSS\n");
    return 2;
  }
  const int64_t delay_ns = (int64_t)(atof(argv[3]) * 1e6);
  const int64_t jitter_ns = (int64_t)(atof(argv[4]) * 1e6);
  const double loss = atof(argv[5]);
  prctl(PR_SET_TIMERSLACK, 1UL); /* wake within a microsecond of a frame's time, not 50 */
  struct pollfd links[2] = {{open_link(argv[1]), POLLIN, 0}, {open_link(argv[2]), POLLIN, 0}};
  unsigned char* buffer = allocate(kLargestFrame);
  uint64_t sequence = 0, truncated = 0;
  for (;;) {
    struct timespec wait = {1, 0};
    if (waiting_count > 0) {
      int64_t left = waiting[0].due_ns - now_ns();
      if (left < 0) left = 0;
      wait.tv_sec = left / 1000000000;
      wait.tv_nsec = left % 1000000000;
    }
    if (ppoll(links, 2, &wait, NULL) < 0 && errno != EINTR) {
      perror("link_emulator: ppoll");
      return 1;
    }
    for (int i = 0; i < 2; ++i) {
      if (!(links[i].revents & POLLIN)) continue;
      for (;;) {
        struct sockaddr_ll from;
        socklen_t from_size = sizeof from;
        ssize_t size = recvfrom(links[i].fd, buffer, kLargestFrame, MSG_DONTWAIT | MSG_TRUNC,
                                (struct sockaddr*)&from, &from_size);
        if (size < 0) break;
        if (from.sll_pkttype == PACKET_OUTGOING) continue;
        if (size > kLargestFrame) {
          if (truncated++ == 0)
            fprintf(stderr, "link_emulator: a frame of %zd bytes dropped (larger than %d)\n", size,
                    kLargestFrame);
          continue;
        }
        if (uniform() < loss) continue;
        int64_t delay = delay_ns + (int64_t)((2 * uniform() - 1) * (double)jitter_ns);
        struct frame f = {now_ns() + (delay > 0 ? delay : 0), ++sequence, links[1 - i].fd,
                          (size_t)size, allocate((size_t)size)};
        memcpy(f.bytes, buffer, (size_t)size);
        push(f);
      }
    }
    int64_t now = now_ns();
    while (waiting_count > 0 && waiting[0].due_ns <= now) {
      struct frame f = pop();
      if (send(f.out, f.bytes, f.size, 0) < 0)
        fprintf(stderr, "link_emulator: a frame of %zu bytes lost: %s\n", f.size - kVnetHeaderBytes,
                strerror(errno));
      free(f.bytes);
    }
  }
}
