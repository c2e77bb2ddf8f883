package robustness

// This file is test/replicas' netns_test.go: the same host names, addresses
// and lock, so that test/replicas and this package take turns on one
// machine instead of removing each other's namespaces.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// host is a test host of its own for one replica: a network namespace
// joined to the root namespace by a veth pair on a /30 of testNet. hostIP
// is the root
// namespace's end, where the replica reaches kube-apiserver; nsIP is the
// replica's own address, named in the EndpointSlice.
type host struct {
	netns    string
	hostVeth string
	nsVeth   string
	hostIP   net.IP
	nsIP     net.IP
}

// testNet holds the hosts' addresses: TEST-NET-2 (RFC 5737), reserved for
// documentation and never routed. Not TEST-NET-1 (192.0.2.0/24): some
// sandboxes number their own network from it, and a veth address there
// would shadow the machine's gateway. setUpHosts skips the test when
// testNet overlaps an address of this machine.
var testNet = &net.IPNet{IP: net.IPv4(198, 51, 100, 0), Mask: net.CIDRMask(24, 32)}

// hosts are the two replicas' hosts. The names are fixed, so that a run
// killed before its cleanup leaves nothing the next run does not remove.
var hosts = []host{
	{netns: "implicit-replica-1", hostVeth: "impl-rep1-h", nsVeth: "impl-rep1-n", hostIP: net.IPv4(198, 51, 100, 1), nsIP: net.IPv4(198, 51, 100, 2)},
	{netns: "implicit-replica-2", hostVeth: "impl-rep2-h", nsVeth: "impl-rep2-n", hostIP: net.IPv4(198, 51, 100, 5), nsIP: net.IPv4(198, 51, 100, 6)},
}

// testNetInUse returns an address of this machine, outside the test's own
// veths, that overlaps testNet, or "".
func testNetInUse() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if slices.ContainsFunc(hosts, func(h host) bool { return h.hostVeth == iface.Name }) {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return "", err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && (testNet.Contains(n.IP) || n.Contains(testNet.IP)) {
				return fmt.Sprintf("%s on %s", n, iface.Name), nil
			}
		}
	}
	return "", nil
}

// ipTimeout bounds every ip(8) command.
const ipTimeout = 10 * time.Second

// ip runs ip(8) with args; the error carries its output.
func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ipTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockHosts takes an exclusive lock on the fixed host names for the rest
// of the test binary's life (the kernel drops it when the process exits,
// however it exits), so that two runs on one machine take turns instead
// of deleting each other's namespaces.
func lockHosts(t *testing.T) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "implicit-replicas-test.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("opening the lock %s: %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return
	}
	t.Logf("another run holds %s: waiting for it", path)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("locking %s: %v", path, err)
	}
}

// setUpHosts creates every host's namespace and veth pair, removing
// leftovers of an earlier run first, and removes them when the test ends.
// It skips the test when network namespaces can't be made without root; as
// root (CI runs as root) a failure to make them fails the test: a skip
// there would hide that the replicas were never tested.
func setUpHosts(t *testing.T) {
	t.Helper()
	lockHosts(t)
	for _, h := range hosts {
		h.remove()
	}
	if inUse, err := testNetInUse(); err != nil {
		t.Fatalf("listing this machine's addresses: %v", err)
	} else if inUse != "" {
		t.Skipf("this machine has %s, in %s: the replicas' test hosts would collide with it", inUse, testNet)
	}
	for i, h := range hosts {
		if err := ip("netns", "add", h.netns); err != nil {
			if i == 0 && os.Geteuid() != 0 {
				t.Skipf("network namespaces can't be made here (the test needs root and ip(8)): %v", err)
			}
			t.Fatal(err)
		}
		t.Cleanup(h.remove)
		prefix := func(a net.IP) string { return a.String() + "/30" }
		for _, args := range [][]string{
			{"link", "add", h.hostVeth, "type", "veth", "peer", "name", h.nsVeth, "netns", h.netns},
			{"addr", "add", prefix(h.hostIP), "dev", h.hostVeth},
			{"link", "set", h.hostVeth, "up"},
			{"-n", h.netns, "addr", "add", prefix(h.nsIP), "dev", h.nsVeth},
			{"-n", h.netns, "link", "set", h.nsVeth, "up"},
			{"-n", h.netns, "link", "set", "lo", "up"},
		} {
			if err := ip(args...); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("host %s: %s (%s) <-> %s (%s in netns %s)", h.netns, h.hostIP, h.hostVeth, h.nsIP, h.nsVeth, h.netns)
	}
}

// remove deletes the namespace (which deletes its veth end, and so the
// pair) and the root end, should it outlive the namespace. Either may be
// absent.
func (h host) remove() {
	_ = ip("netns", "del", h.netns)
	_ = ip("link", "del", h.hostVeth)
}

// wrapper writes an executable that runs binary in the host's network
// namespace with the arguments it is given, for
// controlplane.AggregatedServerOptions.Binary. ip netns exec replaces itself
// with the binary, so the process the control plane signals is the server.
func (h host) wrapper(dir, binary string) (string, error) {
	path := filepath.Join(dir, "in-"+h.netns)
	script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", h.netns, binary)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
