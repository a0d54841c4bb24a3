#!/usr/bin/env python3
"""A link with latency, jitter and loss, for hosts made of network namespaces (hosts.sh), on
kernels without netem. Two uses:

  link_emulator.py offloads-off IFACE
      turns off IFACE's checksum and segmentation offloads (as `ethtool -K IFACE tx off sg
      off tso off gso off gro off`, by ioctl): a frame copied by a packet socket must carry
      its checksum and be no larger than the link's MTU.
  link_emulator.py forward A B DELAY_MS JITTER_MS LOSS
      forwards every Ethernet frame arriving on A out of B and back, each after DELAY_MS
      plus a uniform draw in [-JITTER_MS, +JITTER_MS] (frames may overtake each other, as
      netem's jitter lets them), dropping a fraction LOSS of them (drawn from a seeded
      generator, but in the order frames arrive, which varies from run to run). Runs until
      killed.
"""
import ctypes
import fcntl
import heapq
import random
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 3
PACKET_OUTGOING = 4  # a frame this host sent, seen by its own packet socket
SIOCETHTOOL = 0x8946
ETHTOOL_SET = {"gso": 0x24, "tso": 0x1f, "sg": 0x19, "tx": 0x17, "gro": 0x2c}


def offloads_off(name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for feature, command in ETHTOOL_SET.items():
        value = ctypes.create_string_buffer(struct.pack("II", command, 0))
        request = struct.pack("16sP", name.encode(), ctypes.addressof(value))
        try:
            fcntl.ioctl(s, SIOCETHTOOL, request)
        except OSError as e:
            print(f"link_emulator.py: {name}: {feature} off: {e}", file=sys.stderr)


def forward(a, b, delay_s, jitter_s, loss):
    rng = random.Random(0)
    sockets = {}
    for name in (a, b):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.setblocking(False)
        sockets[name] = s
    other = {sockets[a]: sockets[b], sockets[b]: sockets[a]}
    due = []  # (time, sequence, socket, frame)
    sequence = 0
    while True:
        wait = max(0.0, due[0][0] - time.monotonic()) if due else 1.0
        ready, _, _ = select.select(list(other), [], [], wait)
        for s in ready:
            while True:
                try:
                    frame, address = s.recvfrom(65536)
                except BlockingIOError:
                    break
                if address[2] == PACKET_OUTGOING or rng.random() < loss:
                    continue
                sequence += 1
                at = time.monotonic() + max(0.0, delay_s + rng.uniform(-jitter_s, jitter_s))
                heapq.heappush(due, (at, sequence, other[s], frame))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, out, frame = heapq.heappop(due)
            try:
                out.send(frame)
            except OSError as e:
                print(f"link_emulator.py: a frame of {len(frame)} bytes lost: {e}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "offloads-off":
        offloads_off(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "forward":
        forward(sys.argv[2], sys.argv[3], float(sys.argv[4]) / 1e3, float(sys.argv[5]) / 1e3,
                float(sys.argv[6]))
    else:
        sys.exit(__doc__)
