package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
)

// A port something listens on is skipped, and no two arguments get the same port.
func TestFreePortsSkipsTakenPorts(t *testing.T) {
	// A taken port with room above it (the kernel rarely hands out the last few).
	var l net.Listener
	for l == nil || l.Addr().(*net.TCPAddr).Port > 65530 {
		if l != nil {
			_ = l.Close()
		}
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"free-ports", strconv.Itoa(taken), strconv.Itoa(taken)}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr.String())
	}
	fields := strings.Fields(stdout.String())
	if len(fields) != 2 {
		t.Fatalf("output %q, want two ports", stdout.String())
	}
	var ports []int
	for _, f := range fields {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q: %v", stdout.String(), err)
		}
		if p <= taken {
			t.Errorf("port %d: want one above the taken %d", p, taken)
		}
		ports = append(ports, p)
	}
	if ports[0] == ports[1] {
		t.Errorf("both arguments got port %d", ports[0])
	}
	for _, p := range ports {
		if !canListen(p) {
			t.Errorf("port %d cannot be listened on", p)
		}
	}
}

func TestFreePortsRejectsANonPort(t *testing.T) {
	for _, arg := range []string{"x", "0", "65536", "-1"} {
		var stdout, stderr bytes.Buffer
		if code := realMain([]string{"free-ports", arg}, &stdout, &stderr); code != exitUsage {
			t.Errorf("free-ports %s: exit code %d, want %d", arg, code, exitUsage)
		}
		if stdout.Len() != 0 {
			t.Errorf("free-ports %s printed %q", arg, stdout.String())
		}
	}
}
