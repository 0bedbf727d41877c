package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The egress proxy speaks HTTP CONNECT as kube-apiserver's egress selector expects:
// 200 and a tunnel to what the dialer returns, or 502 with the dialer's error.
func TestEgressProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	defer backend.Close()
	dir, err := os.MkdirTemp("", "egress")
	require.NoError(t, err)
	defer func() { _ = os.RemoveAll(dir) }()
	socket := filepath.Join(dir, "egress.sock")
	var asked []string
	p, err := startEgressProxy(socket, func(ctx context.Context, addr string) (net.Conn, error) {
		asked = append(asked, addr)
		if addr != "10.0.0.7:8321" {
			return nil, errors.New("no route to " + addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", strings.TrimPrefix(backend.URL, "http://"))
	})
	require.NoError(t, err)
	defer p.close()

	connect := func(addr string) (net.Conn, *bufio.Reader, *http.Response) {
		conn, err := net.Dial("unix", socket)
		require.NoError(t, err)
		_, err = fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", addr)
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		return conn, br, res
	}

	conn, br, res := connect("10.0.0.7:8321")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	_, err = io.WriteString(conn, "GET /v1/health HTTP/1.1\r\nHost: 10.0.0.7:8321\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	res, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	assert.Equal(t, "hello from /v1/health", string(body), "the tunnel reaches the dialed backend")
	_ = conn.Close()

	conn, _, res = connect("10.0.0.8:8321")
	body, _ = io.ReadAll(res.Body)
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	assert.Contains(t, string(body), "no route to 10.0.0.8:8321")
	_ = conn.Close()
	assert.Equal(t, []string{"10.0.0.7:8321", "10.0.0.8:8321"}, asked)

	p.close()
	_, err = os.Stat(socket)
	assert.True(t, os.IsNotExist(err), "the socket is removed on close")
	assert.Contains(t, egressSelectorConfig(socket), "name: cluster")
}

func TestEgressProxySocketTooLong(t *testing.T) {
	_, err := startEgressProxy("/"+strings.Repeat("x", 120), nil)
	assert.ErrorContains(t, err, "longer than")
}
