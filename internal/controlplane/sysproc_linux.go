package controlplane

import "syscall"

// sysProcAttr puts the child in its own process group, so that signals reach
// everything it spawns and a terminal's Ctrl-C reaches only us, and asks the
// kernel to kill it should this process die without stopping it (a test
// binary killed by `go test -timeout`, a `kill -9`).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
