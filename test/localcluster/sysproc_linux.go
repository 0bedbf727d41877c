package localcluster

import "syscall"

// componentSysProcAttr puts a component in its own process group, so that a
// Ctrl-C at the terminal reaches the test or the run command (which then
// stops the cluster in order) and not every component at once. If the
// process that started the cluster dies without stopping it, the kernel
// sends the component SIGKILL (the run dir is then left behind).
func componentSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// buildSysProcAttr puts the build script in its own process group, so that
// cancelling the build stops the go commands it runs too.
func buildSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup sends SIGTERM to the process group led by pid.
func terminateGroup(pid int) error {
	return syscall.Kill(-pid, syscall.SIGTERM)
}
