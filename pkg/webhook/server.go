package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ConvertPath is where the conversion webhook is served; the CRD's clientConfig names it.
const ConvertPath = "/convert"

// CertificateSource hands the TLS server its certificate. A source that replaces the
// certificate is served the new one from the next handshake on.
type CertificateSource interface {
	// Certificate returns the certificate to serve, with its Leaf, or nil while there is
	// none.
	Certificate() *tls.Certificate
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// BindAddress is host:port to listen on, such as ":9443".
	BindAddress string
	// Certificates gives the serving certificate.
	Certificates CertificateSource
	// Handler serves ConvertPath.
	Handler http.Handler
	// Clock tells the time for the readiness check; nil means the real clock.
	Clock clock.PassiveClock
}

// Server serves the conversion webhook over HTTPS (TLS 1.2 or later). Every replica
// runs one, leader or not: the API server calls any of them through the Service.
type Server struct {
	opts     ServerOptions
	listener net.Listener
	serving  atomic.Bool
}

// NewServer listens on opts.BindAddress; Serve serves.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Certificates == nil || opts.Handler == nil {
		return nil, errors.New("webhook server: a certificate source and a handler are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	ln, err := net.Listen("tcp", opts.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("serving the conversion webhook on %s: %w", opts.BindAddress, err)
	}
	return &Server{opts: opts, listener: ln}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// tlsConfig serves the source's current certificate. HTTP/2 is left out, as in
// Kubernetes' own webhooks, since its stream handling has been the way to exhaust a
// server (CVE-2023-44487, CVE-2023-39325) and a webhook gains nothing by it.
func (s *Server) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.opts.Certificates.Certificate(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate yet")
		},
	}
}

// Serve serves until ctx ends, then shuts down, giving requests in flight five seconds.
func (s *Server) Serve(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	mux := http.NewServeMux()
	mux.Handle(ConvertPath, s.opts.Handler)
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         s.tlsConfig(),
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ReadHeaderTimeout: 10 * time.Second,
		// The API server gives a conversion up to 30 seconds.
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  90 * time.Second,
		BaseContext:  func(net.Listener) context.Context { return ctx },
		// TLS handshake errors (a client that does not trust the CA yet, a TCP probe).
		ErrorLog: log.New(logWriter{logger}, "", 0),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		s.serving.Store(false)
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("Serving the conversion webhook", "address", s.listener.Addr().String(), "path", ConvertPath)
	s.serving.Store(true)
	err := srv.Serve(tls.NewListener(s.listener, srv.TLSConfig))
	s.serving.Store(false)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return fmt.Errorf("serving the conversion webhook: %w", err)
}

// Ready returns nil once the server serves with a certificate valid now, and the reason
// otherwise. The controller's /readyz calls it, so that a replica gets conversion
// requests through the Service only when it can answer them.
func (s *Server) Ready() error {
	if !s.serving.Load() {
		return errors.New("the conversion webhook is not serving")
	}
	c := s.opts.Certificates.Certificate()
	if c == nil || c.Leaf == nil {
		return errors.New("the conversion webhook has no serving certificate yet")
	}
	now := s.opts.Clock.Now()
	if now.Before(c.Leaf.NotBefore) || !now.Before(c.Leaf.NotAfter) {
		return fmt.Errorf("the conversion webhook's certificate is valid from %s to %s, not now",
			c.Leaf.NotBefore.Format(time.RFC3339), c.Leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// logWriter takes the HTTP server's own messages into the contextual log, at V(4).
type logWriter struct{ logger klog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.logger.V(4).Info("Conversion webhook server", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}
