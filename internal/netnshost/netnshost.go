package netnshost

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

// Host is a test host of its own for one replica: a network namespace
// joined to the root namespace by a veth pair on a /30 of testNet. HostIP
// is the root namespace's end, where the replica reaches kube-apiserver; NSIP is the
// replica's own address, named in the EndpointSlice.
type Host struct {
	NetNS    string
	HostVeth string
	NSVeth   string
	HostIP   net.IP
	NSIP     net.IP
}

// testNet holds the hosts' addresses: TEST-NET-2 (RFC 5737), reserved for
// documentation and never routed. Not TEST-NET-1 (192.0.2.0/24): some
// sandboxes number their own network from it, and a veth address there
// would shadow the machine's gateway. SetUp skips the test when
// testNet overlaps an address of this machine.
var testNet = &net.IPNet{IP: net.IPv4(198, 51, 100, 0), Mask: net.CIDRMask(24, 32)}

// Hosts are the two replicas' hosts. The names are fixed, so that a run
// killed before its cleanup leaves nothing the next run does not remove.
var Hosts = []Host{
	{NetNS: "implicit-replica-1", HostVeth: "impl-rep1-h", NSVeth: "impl-rep1-n", HostIP: net.IPv4(198, 51, 100, 1), NSIP: net.IPv4(198, 51, 100, 2)},
	{NetNS: "implicit-replica-2", HostVeth: "impl-rep2-h", NSVeth: "impl-rep2-n", HostIP: net.IPv4(198, 51, 100, 5), NSIP: net.IPv4(198, 51, 100, 6)},
}

// testNetInUse returns an address of this machine, outside the test's own
// veths, that overlaps testNet, or "".
func testNetInUse() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if slices.ContainsFunc(Hosts, func(h Host) bool { return h.HostVeth == iface.Name }) {
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

// SetUp creates every host's namespace and veth pair, removing
// leftovers of an earlier run first, and removes them when the test ends.
// It skips the test when network namespaces can't be made without root; as
// root (CI runs as root) a failure to make them fails the test: a skip
// there would hide that the replicas were never tested.
func SetUp(t *testing.T) {
	t.Helper()
	lockHosts(t)
	for _, h := range Hosts {
		h.remove()
	}
	if inUse, err := testNetInUse(); err != nil {
		t.Fatalf("listing this machine's addresses: %v", err)
	} else if inUse != "" {
		t.Skipf("this machine has %s, in %s: the replicas' test hosts would collide with it", inUse, testNet)
	}
	for i, h := range Hosts {
		if err := ip("netns", "add", h.NetNS); err != nil {
			if i == 0 && os.Geteuid() != 0 {
				t.Skipf("network namespaces can't be made here (the test needs root and ip(8)): %v", err)
			}
			t.Fatal(err)
		}
		t.Cleanup(h.remove)
		prefix := func(a net.IP) string { return a.String() + "/30" }
		for _, args := range [][]string{
			{"link", "add", h.HostVeth, "type", "veth", "peer", "name", h.NSVeth, "netns", h.NetNS},
			{"addr", "add", prefix(h.HostIP), "dev", h.HostVeth},
			{"link", "set", h.HostVeth, "up"},
			{"-n", h.NetNS, "addr", "add", prefix(h.NSIP), "dev", h.NSVeth},
			{"-n", h.NetNS, "link", "set", h.NSVeth, "up"},
			{"-n", h.NetNS, "link", "set", "lo", "up"},
		} {
			if err := ip(args...); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("host %s: %s (%s) <-> %s (%s in netns %s)", h.NetNS, h.HostIP, h.HostVeth, h.NSIP, h.NSVeth, h.NetNS)
	}
}

// remove deletes the namespace (which deletes its veth end, and so the
// pair) and the root end, should it outlive the namespace. Either may be
// absent.
func (h Host) remove() {
	_ = ip("netns", "del", h.NetNS)
	_ = ip("link", "del", h.HostVeth)
}

// Wrapper writes an executable that runs binary in the host's network
// namespace with the arguments it is given, for
// controlplane.AggregatedServerOptions.Binary. ip netns exec replaces itself
// with the binary, so the process the control plane signals is the server.
func (h Host) Wrapper(dir, binary string) (string, error) {
	path := filepath.Join(dir, "in-"+h.NetNS)
	script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", h.NetNS, binary)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
