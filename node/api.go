package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hookline/hookline/console"
)

// listen binds the API's listeners and builds the servers on them: gRPC,
// and REST with /metrics and the console, both with TLS when configured;
// and pprof's own listener when PprofAddr is set.
func (s *Server) listen(ctx context.Context) error {
	cfg := s.cfg
	var err error
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return fmt.Errorf("grpc listen %s: %w", cfg.GRPCAddr, err)
	}
	s.grpcLis = netutil.LimitListener(s.grpcLis, maxConns)
	if s.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http listen %s: %w", cfg.HTTPAddr, err)
	}
	s.httpLis = netutil.LimitListener(s.httpLis, maxConns)
	grpcOpts, gwCreds := []grpc.ServerOption(nil), insecure.NewCredentials()
	if cfg.TLSCertFile != "" {
		if s.certs, err = loadCertFile(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.Logger, time.Now); err != nil {
			return err
		}
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(s.certs.serverConfig())))
		gwCreds = credentials.NewTLS(s.certs.selfConfig())
	}
	s.grpc = s.control.NewGRPCServer(grpcOpts...)
	if s.gwConn, err = grpc.NewClient(s.grpcLis.Addr().String(), grpc.WithTransportCredentials(gwCreds)); err != nil {
		return fmt.Errorf("gateway connection: %w", err)
	}
	mux, err := s.restMux(ctx)
	if err != nil {
		return err
	}
	s.http = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	if s.certs != nil {
		s.http.TLSConfig = s.certs.serverConfig()
	}
	return s.listenPprof()
}

// restMux routes the REST listener: /metrics, the console, and the REST
// gateway of the control API for everything else.
func (s *Server) restMux(ctx context.Context) (*http.ServeMux, error) {
	gw, err := s.control.Handler(ctx, s.gwConn)
	if err != nil {
		return nil, err
	}
	ch, err := console.Handler(console.Config{PortalOrigins: s.cfg.PortalOrigins})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.Handle(console.Path, ch)
	mux.Handle("/", gw)
	return mux, nil
}

// listenPprof serves net/http/pprof on PprofAddr, for development only.
func (s *Server) listenPprof() error {
	if s.cfg.PprofAddr == "" {
		return nil
	}
	var err error
	if s.pprofLis, err = net.Listen("tcp", s.cfg.PprofAddr); err != nil {
		return fmt.Errorf("pprof listen %s: %w", s.cfg.PprofAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.pprof = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.logger.Warn("pprof is ON: profiles of this process are served for development only", slog.String("pprof_addr", s.pprofLis.Addr().String()))
	return nil
}
