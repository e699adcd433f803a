package blockpage

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"
)

// TLSConfig is the HTTPS listener's: the configured certificate when
// certFile and keyFile are set, else a leaf per server name minted by ca.
func TLSConfig(certFile, keyFile string, ca *CA) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	switch {
	case certFile != "" || keyFile != "":
		if certFile == "" || keyFile == "" {
			return nil, errors.New("listeners.blockPage.tls: set both certFile and keyFile, or neither to use the generated CA")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("listeners.blockPage.tls: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case ca != nil:
		cfg.GetCertificate = ca.GetCertificate
	default:
		return nil, errors.New("block page HTTPS: no certificate and no CA")
	}
	return cfg, nil
}

// HTTPServer wraps a handler with the listener's timeouts and limits: a
// page is small and a form is 16 KiB, so slow or large requests are cut.
func HTTPServer(h http.Handler, tlsCfg *tls.Config, errLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          errLog,
	}
}
