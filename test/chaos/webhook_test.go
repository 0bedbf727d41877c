//go:build e2e

package chaos

import (
	"io"
	"net"
	"sync"
	"time"
)

// webhookFront is what the webhook Service is in a cluster: one address, the CRD's
// clientConfig.url, in front of the conversion webhooks of the replicas that run. Each
// connection goes to the first replica that accepts it, starting from a different one
// each time; with no replica up, the connection is closed and the API server's
// conversion fails, as it would with a Service without endpoints. TLS passes through:
// the replicas share their certificate through the Secret.
type webhookFront struct {
	ln   net.Listener
	port int

	mu       sync.Mutex
	backends []string
	next     int
}

func startWebhookFront() (*webhookFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &webhookFront{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	go f.serve()
	return f, nil
}

func (f *webhookFront) close() { _ = f.ln.Close() }

func (f *webhookFront) add(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = append(f.backends, addr)
}

func (f *webhookFront) remove(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, b := range f.backends {
		if b == addr {
			f.backends = append(f.backends[:i], f.backends[i+1:]...)
			return
		}
	}
}

// candidates are the backends in the order to try, rotated at each call.
func (f *webhookFront) candidates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.backends)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, f.backends[(f.next+i)%n])
	}
	f.next++
	return out
}

func (f *webhookFront) serve() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.forward(conn)
	}
}

func (f *webhookFront) forward(conn net.Conn) {
	defer conn.Close()
	var backend net.Conn
	for _, addr := range f.candidates() {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			backend = c
			break
		}
	}
	if backend == nil {
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(backend, conn)
	go pipe(conn, backend)
	<-done
	<-done
}
