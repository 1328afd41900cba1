// delay_line: a one-way delay between the test cluster's hosts, where the kernel has no tc netem.
//
//   delay_line DELAY_US TAP PORT=ADDRESS...
//
// Creates the TAP device TAP (IFF_TAP | IFF_VNET_HDR, offloads on, so whole GSO frames arrive),
// brings it up and prints "ready" on stdout; delay_line.py then redirects the IPv4 frames that a
// host sends to another host from each bridge port's ingress into TAP (tc mirred), so that the
// bridge never forwards them. Each frame read from TAP is held for DELAY_US microseconds after it
// arrived and then sent, as it was, out of the bridge port of the host its IPv4 destination is
// (PORT=ADDRESS pairs, e.g. chcl-n2=198.18.0.12), through an AF_PACKET socket with the same
// virtio-net header: the frame enters that host's network namespace as the bridge would have
// delivered it, only later. Every frame waits the same time, so their order is kept. Frames
// for an address with no port are dropped (none are redirected here).
//
// Runs until SIGTERM or SIGINT. Exits 1 with a message on a setup error.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS 16
#define MAX_FRAME (sizeof(struct virtio_net_hdr) + 65536 + ETH_HLEN)

struct port {
  uint32_t address;  // network order
  int socket;        // AF_PACKET, bound to the port, with virtio-net headers
};

struct frame {
  struct frame* next;
  int64_t due_ns;
  size_t length;
  unsigned char data[];  // virtio-net header, then the Ethernet frame
};

static volatile sig_atomic_t stopping = 0;
static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char* what) {
  fprintf(stderr, "delay_line: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int open_tap(const char* name) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) die("open /dev/net/tun");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("TUNSETIFF");
  // Offloads on: GSO frames and partial checksums reach us whole, described by the header.
  if (ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0) die("TUNSETOFFLOAD");
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) die("socket");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) die("SIOCGIFFLAGS");
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) die("SIOCSIFFLAGS");
  close(s);
  return fd;
}

static int open_port(const char* name) {
  int fd = socket(AF_PACKET, SOCK_RAW, 0);  // protocol 0: sends only, receives nothing
  if (fd < 0) die("socket AF_PACKET");
  int on = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &on, sizeof(on)) < 0) die("PACKET_VNET_HDR");
  struct sockaddr_ll addr;
  memset(&addr, 0, sizeof(addr));
  addr.sll_family = AF_PACKET;
  addr.sll_ifindex = (int)if_nametoindex(name);
  if (addr.sll_ifindex == 0) die(name);
  if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) < 0) die("bind");
  return fd;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: delay_line DELAY_US TAP PORT=ADDRESS...\n");
    return 2;
  }
  const int64_t delay_ns = atoll(argv[1]) * 1000;
  struct port ports[MAX_PORTS];
  int n = 0;
  for (int i = 3; i < argc && n < MAX_PORTS; ++i, ++n) {
    char* eq = strchr(argv[i], '=');
    if (eq == NULL) {
      fprintf(stderr, "delay_line: %s is not PORT=ADDRESS\n", argv[i]);
      return 2;
    }
    *eq = '\0';
    if (inet_pton(AF_INET, eq + 1, &ports[n].address) != 1) {
      fprintf(stderr, "delay_line: %s is not an IPv4 address\n", eq + 1);
      return 2;
    }
    ports[n].socket = open_port(argv[i]);
  }
  const int tap = open_tap(argv[2]);
  // SIGTERM and SIGINT are blocked except inside ppoll, so one that arrives while frames are
  // handled ends the very next wait instead of being missed until it times out.
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = on_signal;
  sigset_t stop_signals, waiting_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  if (sigprocmask(SIG_BLOCK, &stop_signals, &waiting_mask) < 0) die("sigprocmask");
  sigdelset(&waiting_mask, SIGTERM);
  sigdelset(&waiting_mask, SIGINT);
  if (sigaction(SIGTERM, &action, NULL) < 0 || sigaction(SIGINT, &action, NULL) < 0) {
    die("sigaction");
  }
  printf("ready\n");
  fflush(stdout);

  struct frame *head = NULL, *tail = NULL;
  const size_t hdr = sizeof(struct virtio_net_hdr);
  while (!stopping) {
    // Send what is due.
    int64_t now = now_ns();
    while (head != NULL && head->due_ns <= now) {
      struct frame* f = head;
      head = f->next;
      if (head == NULL) tail = NULL;
      const unsigned char* eth = f->data + hdr;
      uint32_t dst = 0;
      memcpy(&dst, eth + ETH_HLEN + 16, sizeof(dst));  // IPv4 destination address
      for (int p = 0; p < n; ++p) {
        if (ports[p].address == dst) {
          if (send(ports[p].socket, f->data, f->length, 0) < 0 && errno != ENOBUFS) {
            fprintf(stderr, "delay_line: send: %s\n", strerror(errno));
          }
          break;
        }
      }
      free(f);
    }
    // Wait for a frame, or until the next one is due.
    struct timespec timeout = {1, 0};
    if (head != NULL) {
      const int64_t wait = head->due_ns - now_ns();
      timeout.tv_sec = wait > 0 ? wait / 1000000000 : 0;
      timeout.tv_nsec = wait > 0 ? wait % 1000000000 : 0;
    }
    struct pollfd pfd = {tap, POLLIN, 0};
    const int ready = ppoll(&pfd, 1, &timeout, &waiting_mask);
    if (ready < 0 && errno != EINTR) die("ppoll");
    if (ready <= 0) continue;
    for (;;) {
      struct frame* f = malloc(sizeof(struct frame) + MAX_FRAME);
      if (f == NULL) die("malloc");
      const ssize_t got = read(tap, f->data, MAX_FRAME);
      if (got < 0) {
        free(f);
        if (errno == EAGAIN || errno == EINTR) break;
        die("read");
      }
      if ((size_t)got < hdr + ETH_HLEN + 20 ||
          ((f->data[hdr + 12] << 8) | f->data[hdr + 13]) != ETH_P_IP) {
        free(f);
        continue;
      }
      f->length = (size_t)got;
      f->due_ns = now_ns() + delay_ns;
      f->next = NULL;
      if (tail != NULL) {
        tail->next = f;
      } else {
        head = f;
      }
      tail = f;
    }
  }
  close(tap);
  return 0;
}
