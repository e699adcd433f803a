package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/listfetch"
	"github.com/svcdns/svc/internal/runner"
	"github.com/svcdns/svc/internal/store"
)

// listFollower compiles BlockList objects on a data-plane node of the kube
// store without fetching list URLs: the operator leader fetches them and
// writes each body's digest into status.sources[].digest; the follower
// resolves a source URL to that digest and copies the body from a peer's
// internal listener (GET /internal/lists/{digest}) into its own list cache,
// which verifies the digest. configMapRef sources are read from the
// apiserver directly with the node's own credentials at each reconcile (a
// status update by the leader, which re-reads them at every refresh, brings
// edits here). Status is never written here (the leader owns
// it). A list gets a fresh reconciler whenever its URL->digest map changes,
// so a refresh of the leader reaches followers at once.
type listFollower struct {
	st            store.Store
	fetcher       *listfetch.Fetcher
	client        *internalapi.Client // nil: local cache only
	peers         []string            // host:port
	allowDegraded bool
	configMaps    blocklists.ConfigMaps // configMapRef sources are read directly
	onList        func(name string, l *blocklist.List, ok bool)
	compiler      genCompiler // notes each list's generation (visibility.go)
	log           *slog.Logger

	mu   sync.Mutex
	recs map[string]*followedList
}

type followedList struct {
	fp  string
	rec *blocklists.Reconciler[policy.CompiledSource, *blocklist.List]
	pf  *peerFetcher
}

func parsePeers(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// run reconciles every list on the local runner, reports the first pass on
// initial, then follows changes; lists whose bodies could not be copied are
// retried with backoff (2s doubling to a minute).
func (f *listFollower) run(ctx context.Context, initial chan<- error) error {
	f.recs = map[string]*followedList{}
	r, err := runner.New(f.st, f.log, runner.Controller{
		Kind: blocklists.Kind, Initial: initial, MinBackoff: 2 * time.Second, MaxBackoff: time.Minute,
		QuietRetries: true, // a body the leader has not fetched yet is expected
		Reconciler: runner.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
			return 0, f.reconcile(ctx, ns+"/"+name)
		}),
	})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// reconcile compiles one list; an error means some body is missing (not yet
// fetched by the leader, or no peer had it) and the list is retried.
func (f *listFollower) reconcile(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	u, err := f.st.Get(ctx, blocklists.Kind, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		f.mu.Lock()
		delete(f.recs, key)
		f.mu.Unlock()
		f.onList(key, nil, false)
		return nil
	}
	if err != nil {
		return err
	}
	var bl v1alpha1.BlockList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &bl); err != nil {
		return fmt.Errorf("decode blocklist %s: %w", key, err)
	}
	digests := sourceDigests(&bl)
	fpb, _ := json.Marshal(digests)
	fp := string(fpb)
	f.mu.Lock()
	fl := f.recs[key]
	if fl == nil || fl.fp != fp {
		pf := &peerFetcher{f: f, digests: digests}
		var cms blocklists.ConfigMaps
		if f.configMaps != nil {
			cms = retriedConfigMaps{f.configMaps, pf}
		}
		fl = &followedList{fp: fp, pf: pf, rec: blocklists.New(blocklists.Options[policy.CompiledSource, *blocklist.List]{
			Store: readOnlyStatus{f.st}, Fetcher: pf, Compiler: f.compiler, ConfigMaps: cms,
			AllowDegraded: f.allowDegraded, Now: time.Now, Logger: f.log,
			OnList: f.onList,
		})}
		f.recs[key] = fl
	}
	f.mu.Unlock()
	fl.pf.mu.Lock()
	fl.pf.failures = nil
	fl.pf.mu.Unlock()
	if _, err := fl.rec.Reconcile(ctx, ns, name); err != nil {
		return err
	}
	// A source whose body is missing is asked for again on the next pass
	// (the reconciler refetches a source without a digest).
	fl.pf.mu.Lock()
	defer fl.pf.mu.Unlock()
	return errors.Join(fl.pf.failures...)
}

// sourceDigests maps each URL source to the digest the leader recorded.
func sourceDigests(bl *v1alpha1.BlockList) map[string]string {
	byName := map[string]string{}
	for _, s := range bl.Status.Sources {
		byName[s.Name] = s.Digest
	}
	out := map[string]string{}
	for i, src := range bl.Spec.Sources {
		if src.URL != "" {
			out[src.URL] = byName[blocklists.SourceName(src, i)]
		}
	}
	return out
}

// peerFetcher is the follower's blocklists.Fetcher.
type peerFetcher struct {
	f       *listFollower
	digests map[string]string // url -> digest from status

	mu       sync.Mutex
	failures []error
}

func (p *peerFetcher) fail(err error) (listfetch.Result, error) {
	p.mu.Lock()
	p.failures = append(p.failures, err)
	p.mu.Unlock()
	return listfetch.Result{}, err
}

// Fetch resolves url to the digest in the object's status and makes sure the
// body is in the local cache, copying it from a peer when it is not.
func (p *peerFetcher) Fetch(ctx context.Context, url string) (listfetch.Result, error) {
	d := p.digests[url]
	if d == "" {
		return p.fail(fmt.Errorf("%s: the operator leader has not fetched it yet (no digest in status)", url))
	}
	res := listfetch.Result{URL: url, Digest: d, FetchedAt: time.Now()}
	if fh, err := p.f.fetcher.Open(d); err == nil {
		fh.Close()
		return res, nil
	}
	if p.f.client == nil || len(p.f.peers) == 0 {
		return p.fail(fmt.Errorf("%s: body %s not cached and no peers (%s) to copy it from", url, d, PeersEnv))
	}
	var errs []error
	for _, addr := range resolvePeers(ctx, p.f.peers) {
		rc, err := p.f.client.ListBody(ctx, addr, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = p.f.fetcher.Store(ctx, rc, d)
		rc.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("from %s: %w", addr, err))
			continue
		}
		p.f.log.Info("list body copied from peer", "url", url, "digest", d, "peer", addr)
		return res, nil
	}
	return p.fail(fmt.Errorf("%s: body %s from peers: %w", url, d, errors.Join(errs...)))
}

// retriedConfigMaps records a failed ConfigMap read among the list's
// failures, so the follower retries the list with backoff.
type retriedConfigMaps struct {
	blocklists.ConfigMaps
	pf *peerFetcher
}

func (r retriedConfigMaps) ListBody(ctx context.Context, namespace, name string) (string, error) {
	body, err := r.ConfigMaps.ListBody(ctx, namespace, name)
	if err != nil {
		_, _ = r.pf.fail(fmt.Errorf("configMap %s/%s: %w", namespace, name, err))
	}
	return body, err
}

// Open implements blocklists.Fetcher.
func (p *peerFetcher) Open(digest string) (*os.File, error) { return p.f.fetcher.Open(digest) }

// AcquireParse implements blocklists.Fetcher.
func (p *peerFetcher) AcquireParse(ctx context.Context) (func(), error) {
	return p.f.fetcher.AcquireParse(ctx)
}

// resolvePeers expands each host:port to every address its host resolves to
// (a headless Service names every pod).
func resolvePeers(ctx context.Context, peers []string) []string {
	var out []string
	for _, p := range peers {
		host, port, err := net.SplitHostPort(p)
		if err != nil {
			continue
		}
		if net.ParseIP(host) != nil {
			out = append(out, p)
			continue
		}
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil || len(ips) == 0 {
			out = append(out, p)
			continue
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, port))
		}
	}
	return out
}

// readOnlyStatus drops status writes: on a follower the leader owns status.
type readOnlyStatus struct{ store.Store }

func (r readOnlyStatus) UpdateStatus(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return obj, nil
}
