//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts the child in its own process group, so that signals reach
// everything it spawns and a terminal's Ctrl-C reaches only us.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
