package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// egressSocketFile is the Unix socket, in the run dir, of the cluster egress proxy.
const egressSocketFile = "egress.sock"

// egressConfigFile is the kube-apiserver's EgressSelectorConfiguration.
const egressConfigFile = "egress-selector.yaml"

// maxUnixSocketPath is the longest path a Unix socket address holds on Linux.
const maxUnixSocketPath = 107

// egressProxy is an HTTP CONNECT proxy on a Unix socket: kube-apiserver sends it every
// connection into the cluster network (its pod, service and node proxies), as it would
// to a konnectivity server, and the proxy dials each with Options.ClusterDialer.
type egressProxy struct {
	ln   net.Listener
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startEgressProxy listens on socket and serves until close.
func startEgressProxy(socket string, dial func(ctx context.Context, addr string) (net.Conn, error)) (*egressProxy, error) {
	if len(socket) > maxUnixSocketPath {
		return nil, fmt.Errorf("egress socket path %s is longer than %d bytes; use a shorter RunDirParent", socket, maxUnixSocketPath)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	p := &egressProxy{ln: ln, dial: dial, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// egressSelectorConfig routes the "cluster" egress (and only it) to the proxy's socket.
func egressSelectorConfig(socket string) string {
	return fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, strconv.Quote(socket))
}

func (p *egressProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(conn) {
			_ = conn.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(conn)
			p.handle(conn)
		}()
	}
}

// handle answers one CONNECT and then copies bytes both ways until either side closes.
func (p *egressProxy) handle(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	upstream, err := p.dial(ctx, req.Host)
	cancel()
	if err != nil {
		msg := err.Error()
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
		return
	}
	if !p.track(upstream) {
		_ = upstream.Close()
		return
	}
	defer p.untrack(upstream)
	defer func() { _ = upstream.Close() }()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// Bytes the client sent after its request line and headers, if any, come first.
		_, _ = io.Copy(upstream, br)
		closeWrite(upstream)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, upstream)
		closeWrite(conn)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func (p *egressProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *egressProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// close stops accepting, closes every open connection and waits for the handlers.
func (p *egressProxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
	_ = os.Remove(p.ln.Addr().String())
}
