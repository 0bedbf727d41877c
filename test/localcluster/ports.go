package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are taken below the kernel's ephemeral range: a port in that range
// can be taken by any outgoing connection between the moment it is picked
// and the moment the component binds it.
const (
	lowestPort           = 10000
	defaultEphemeralLow  = 32768
	ephemeralRangeSysctl = "/proc/sys/net/ipv4/ip_local_port_range"
)

var (
	portsMu sync.Mutex
	// portsHeld are the ports handed to clusters of this process that have
	// not been stopped, so that concurrent Start calls never pick the same.
	portsHeld = map[int]bool{}
)

// portRange returns the inclusive range ports are picked from.
func portRange() (lo, hi int) {
	ephemeralLow := defaultEphemeralLow
	if data, err := os.ReadFile(ephemeralRangeSysctl); err == nil {
		if fields := strings.Fields(string(data)); len(fields) == 2 {
			if n, err := strconv.Atoi(fields[0]); err == nil && n > 1024 {
				ephemeralLow = n
			}
		}
	}
	lo, hi = lowestPort, ephemeralLow-1
	if hi-lo < 1000 {
		lo = 1025
	}
	return lo, hi
}

// portFree reports whether nothing listens on 127.0.0.1:port, by listening on
// it and closing the listener again.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// reservePorts picks n distinct free loopback ports, random within portRange,
// and holds them until release is called.
func reservePorts(n int) (ports []int, release func(), err error) {
	lo, hi := portRange()
	if hi <= lo {
		return nil, nil, fmt.Errorf("no port range below the ephemeral ports (%s)", ephemeralRangeSysctl)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 1000 {
			for _, p := range ports {
				delete(portsHeld, p)
			}
			return nil, nil, fmt.Errorf("found only %d free ports in %d-%d", len(ports), lo, hi)
		}
		p := lo + rand.IntN(hi-lo+1)
		if portsHeld[p] || !portFree(p) {
			continue
		}
		portsHeld[p] = true
		ports = append(ports, p)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			portsMu.Lock()
			defer portsMu.Unlock()
			for _, p := range ports {
				delete(portsHeld, p)
			}
		})
	}
	return ports, release, nil
}
