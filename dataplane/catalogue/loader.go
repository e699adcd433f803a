package catalogue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// LoaderConfig is blocking.catalogue.*.
type LoaderConfig struct {
	URL                 string // empty: embedded catalogue
	ImportedServicesURL string // empty: off
	SafeSearchEngines   int
}

// Loader keeps the current catalogue and replaces it on Refresh. An invalid
// or unreachable document keeps the current catalogue and is reported in
// Info().Refresh.
type Loader struct {
	client *http.Client
	now    func() time.Time
	log    *slog.Logger
	cur    atomic.Pointer[Catalogue]

	mu       sync.Mutex
	cfg      LoaderConfig
	refresh  *Refresh
	imported *Refresh
}

// NewLoader starts with the embedded catalogue. client fetches documents
// (the node passes one with the list fetcher's address checks); now is the
// clock.
func NewLoader(ctx context.Context, cfg LoaderConfig, client *http.Client, now func() time.Time, log *slog.Logger) (*Loader, error) {
	if client == nil {
		client = &http.Client{Timeout: time.Minute}
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := Builtin(ctx, cfg.SafeSearchEngines)
	if err != nil {
		return nil, fmt.Errorf("embedded catalogue: %w", err)
	}
	l := &Loader{client: client, now: now, log: log, cfg: cfg}
	l.cur.Store(c)
	return l, nil
}

// Current returns the catalogue in use.
func (l *Loader) Current() *Catalogue { return l.cur.Load() }

// SetConfig changes the URLs; the next Refresh uses them.
func (l *Loader) SetConfig(cfg LoaderConfig) {
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
}

// Info is the current catalogue's Info with the refresh state.
func (l *Loader) Info() Info {
	in := l.cur.Load().Info()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refresh != nil {
		r := *l.refresh
		in.Refresh = &r
	}
	for i := range in.Sources {
		if in.Sources[i].ID == SourceImported && l.imported != nil {
			r := *l.imported
			in.Sources[i].Refresh = &r
		}
	}
	return in
}

// Refresh fetches the configured documents and swaps in the new catalogue.
// It reports whether the catalogue changed. On any error the current
// catalogue stays.
func (l *Loader) Refresh(ctx context.Context) (bool, error) {
	l.mu.Lock()
	cfg := l.cfg
	l.mu.Unlock()
	in := Input{SafeSearchEngines: cfg.SafeSearchEngines}
	var errs []error
	if cfg.URL != "" {
		body, err := l.get(ctx, cfg.URL)
		if err == nil {
			_, err = ParseDocument(body)
		}
		l.record(&l.refresh, cfg.URL, err)
		if err != nil {
			l.log.Warn("catalogue refresh failed, keeping current", "url", cfg.URL, "err", err)
			return false, fmt.Errorf("catalogue %s: %w", cfg.URL, err)
		}
		in.Document, in.Origin = body, cfg.URL
	} else {
		l.mu.Lock()
		l.refresh = nil
		l.mu.Unlock()
	}
	if cfg.ImportedServicesURL != "" {
		body, err := l.get(ctx, cfg.ImportedServicesURL)
		if err == nil {
			_, err = ParseImported(body)
		}
		l.record(&l.imported, cfg.ImportedServicesURL, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("imported services %s: %w", cfg.ImportedServicesURL, err))
			// keep the imported part of the current catalogue out rather than
			// half-apply: the builtin part still refreshes.
		} else {
			in.Imported, in.ImportedOrigin = body, cfg.ImportedServicesURL
		}
	}
	c, err := Build(ctx, in)
	if err != nil {
		return false, errors.Join(append(errs, err)...)
	}
	old := l.cur.Load()
	changed := old.info.Digest != c.info.Digest || len(old.info.Sources) != len(c.info.Sources) ||
		(len(c.info.Sources) > 1 && old.info.Sources[len(old.info.Sources)-1].Digest != c.info.Sources[1].Digest)
	if changed {
		l.cur.Store(c)
	}
	return changed, errors.Join(errs...)
}

func (l *Loader) record(dst **Refresh, url string, err error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &Refresh{URL: url, LastAttempt: &now}
	if *dst != nil && (*dst).URL == url {
		r.LastSuccess = (*dst).LastSuccess
	}
	if err != nil {
		r.LastError = err.Error()
	} else {
		r.LastSuccess = &now
	}
	*dst = r
}

func (l *Loader) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get: status %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return b, nil
}
