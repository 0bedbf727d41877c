package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long a component gets to exit after SIGTERM before it
// is killed.
const stopTimeout = 15 * time.Second

// process is one running component, started and waited for by the cluster.
type process struct {
	name    string
	args    []string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited and been reaped
	waitErr error         // valid after done is closed
}

// startProcess starts bin with args; stdout and stderr go to logPath and, if
// logs is not nil, to logs with every line prefixed by the component name.
func startProcess(name, bin string, args []string, logPath string, logs io.Writer) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = componentSysProcAttr()
	cmd.Stdin = nil
	if logs == nil {
		// The child writes to the file itself; nothing to copy.
		cmd.Stdout, cmd.Stderr = f, f
	} else {
		w := io.MultiWriter(f, &prefixWriter{prefix: "[" + name + "] ", w: logs})
		cmd.Stdout, cmd.Stderr = w, w
		cmd.WaitDelay = 5 * time.Second
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, args: args, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = p.logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitDescription describes how an exited process ended.
func (p *process) exitDescription() string {
	if p.waitErr == nil {
		return "exit status 0"
	}
	return p.waitErr.Error()
}

// signal sends sig to the process unless it has exited already.
func (p *process) signal(sig os.Signal) {
	if p.exited() {
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		// The process is gone or cannot be signalled; wait() reports it.
		return
	}
}

// wait waits until the process has exited, sending SIGKILL after timeout. It
// reports an error only if the process had to be killed.
func (p *process) wait(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s (pid %d) did not exit within %s of SIGTERM and was killed", p.name, p.cmd.Process.Pid, timeout)
}

// prefixWriter writes whole lines to w, each starting with prefix. Writers of
// several components may share w; lines are written under one lock.
type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    []byte
}

var prefixWriterMu sync.Mutex

func (pw *prefixWriter) Write(b []byte) (int, error) {
	pw.buf = append(pw.buf, b...)
	for {
		i := bytes.IndexByte(pw.buf, '\n')
		if i < 0 {
			break
		}
		prefixWriterMu.Lock()
		_, err := fmt.Fprintf(pw.w, "%s%s\n", pw.prefix, pw.buf[:i])
		prefixWriterMu.Unlock()
		pw.buf = pw.buf[i+1:]
		if err != nil {
			// The copy for the caller failed; keep the component running.
			pw.buf = nil
			break
		}
	}
	return len(b), nil
}

// tailFile returns the last n lines of the file at path ("" if unreadable).
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || n <= 0 {
		return ""
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
