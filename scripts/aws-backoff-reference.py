#!/usr/bin/env python3
# The simulator behind the AWS Architecture Blog post "Exponential Backoff And Jitter" (Marc
# Brooker, 2015), from https://github.com/aws-samples/aws-arch-backoff-simulator
# (src/backoff_simulator.py, Apache License 2.0, Copyright Amazon.com, Inc. or its affiliates),
# ported to Python 3 for comparison with scenarios/16-19. Changes from the original: `range` for
# `xrange`; no per-write timestamp files; a seed and the run count as arguments; the clients
# 10, 20, 50 and 100 only; output as a Markdown table of writes and completion time per run.
# The model itself (messages, server, client, backoff kinds and their parameters) is unchanged.
#
#   python3 scripts/aws-backoff-reference.py [SEED] [RUNS]
import heapq
import random
import sys


class Net:
    def __init__(self, mean, sd):
        self.mean = mean
        self.sd = sd

    def delay(self):
        return abs(random.normalvariate(self.mean, self.sd))


class Backoff:
    def __init__(self, base, cap):
        self.base = base
        self.cap = cap

    def expo(self, n):
        return min(self.cap, pow(2, n) * self.base)


class NoBackoff(Backoff):
    def backoff(self, n):
        return 0


class ExpoBackoff(Backoff):
    def backoff(self, n):
        return self.expo(n)


class ExpoBackoffEqualJitter(Backoff):
    def backoff(self, n):
        v = self.expo(n)
        return v / 2 + random.uniform(0, v / 2)


class ExpoBackoffFullJitter(Backoff):
    def backoff(self, n):
        v = self.expo(n)
        return random.uniform(0, v)


class ExpoBackoffDecorr(Backoff):
    def __init__(self, base, cap):
        Backoff.__init__(self, base, cap)
        self.sleep = self.base

    def backoff(self, n):
        self.sleep = min(self.cap, random.uniform(self.base, self.sleep * 3))
        return self.sleep


class Stats:
    def __init__(self):
        self.failures = 0
        self.calls = 0


def msg(tm, send_to, reply_to, payload):
    assert tm >= 0
    assert send_to is not None
    return (tm, send_to, reply_to, payload)


class OccServer:
    def __init__(self, net, stats):
        self.version = 0
        self.net = net
        self.stats = stats

    def write(self, tm, request):
        success = False
        self.stats.calls += 1
        if request[3] == self.version:
            self.version += 1
            success = True
        else:
            self.stats.failures += 1
        return msg(tm + self.net.delay(), request[2], None, success)

    def read(self, tm, request):
        return msg(tm + self.net.delay(), request[2], None, self.version)


class OccClient:
    def __init__(self, server, net, backoff):
        self.server = server
        self.net = net
        self.attempt = 0
        self.backoff = backoff

    def start(self, tm):
        return msg(tm + self.net.delay(), self.server.read, self.read_rsp, None)

    def read_rsp(self, tm, request):
        return msg(tm + self.net.delay(), self.server.write, self.write_rsp, request[3])

    def write_rsp(self, tm, request):
        if not request[3]:
            self.attempt += 1
            return msg(tm + self.net.delay() + self.backoff.backoff(self.attempt), self.server.read, self.read_rsp, None)
        return None


def run_sim(queue):
    tm = 0
    while len(queue) > 0:
        m = heapq.heappop(queue)
        assert m[0] >= tm
        tm = m[0]
        next_msg = m[1](tm, m)
        if next_msg is not None:
            heapq.heappush(queue, next_msg)
    return tm


def setup_sim(clients, backoff_cls, stats):
    net = Net(10, 2)
    queue = []
    server = OccServer(net, stats)
    for _ in range(0, clients):
        client = OccClient(server, net, backoff_cls(5, 2000))
        heapq.heappush(queue, client.start(0))
    return (queue, stats)


# In the order of the scenarios' strategies.
backoff_types = (
    (NoBackoff, "none"),
    (ExpoBackoff, "exponential"),
    (ExpoBackoffEqualJitter, "equal jitter"),
    (ExpoBackoffFullJitter, "full jitter"),
    (ExpoBackoffDecorr, "decorrelated"),
)


def main():
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 2015
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    random.seed(seed)
    print(f"writes / ms per run, means of {runs} runs (seed {seed})\n")
    print("| clients | " + " | ".join(name for _, name in backoff_types) + " |")
    print("|---" * (len(backoff_types) + 1) + "|")
    for clients in (10, 20, 50, 100):
        cells = []
        for cls, _ in backoff_types:
            stats = Stats()
            tm = 0
            for _ in range(runs):
                queue, stats = setup_sim(clients, cls, stats)
                tm += run_sim(queue)
            cells.append(f"{stats.calls / runs:.1f} / {tm / runs:.0f}")
        print(f"| {clients} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
