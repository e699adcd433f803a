package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/kubeauth"
	"github.com/svcdns/svc/internal/operator"
	"github.com/svcdns/svc/internal/settings"
)

// Roles of `svc serve --role`.
const (
	// RoleAll runs everything in one process: with the sqlite store exactly
	// the single-node server; with the kube store also the operator part
	// (leader election, status reconcilers, list fetching while leader).
	RoleAll = "all"
	// RoleOperator runs the operator (Lease, DNSZone/DNSRecordSet/Policy
	// status, BlockList fetching while leader), the ops/metrics listeners and
	// the internal listener serving list bodies; no DNS listeners, no API.
	RoleOperator = "operator"
	// RoleDataplane runs the DNS listeners, the API and the internal
	// listener; it never fetches list URLs but copies the bodies the leader
	// fetched, by the digests in BlockList status, from its peers.
	RoleDataplane = "dataplane"
)

// PeersEnv names the internal listeners (host:port, comma separated) a
// data-plane node copies list bodies from, e.g. the chart's headless
// <release>-internal Service: every address a name resolves to is tried.
const PeersEnv = "SERVICE_INTERNAL_PEERS"

func parseRole(role, driver string) (string, error) {
	switch role {
	case "", RoleAll:
		return RoleAll, nil
	case RoleOperator, RoleDataplane:
		if driver != "kube" {
			return "", fmt.Errorf("--role %s needs store.driver kube (store.driver is %q)", role, driver)
		}
		return role, nil
	default:
		return "", fmt.Errorf("--role: unknown role %q (all, operator or dataplane)", role)
	}
}

// internalCredentials are the listeners.internal credentials (configured
// files, else derived from the encryption key).
func internalCredentials(cfg *settings.Config, env func(string) string) (*internalapi.Credentials, error) {
	keys, err := auth.LoadKeys(env, cfg.Node.DataDir, cfg.Store.Driver != "kube")
	if err != nil {
		return nil, err
	}
	it := cfg.Listeners.Internal
	return internalapi.LoadCredentials(internalapi.Files{TokenFile: it.TokenFile, CertFile: it.TLS.CertFile, KeyFile: it.TLS.KeyFile, CAFile: it.TLS.CAFile, ServerName: it.TLS.ServerName}, keys.Current)
}

// startOperator runs the operator part of a node on the kube store: leader
// election, the DNSZone/DNSRecordSet status reconcilers, the Policy status
// reconciler and the BlockList reconciler that fetches list URLs (into the
// node's list cache, which the internal listener serves by digest). All of
// them run only while this replica holds the Lease; a replica that loses it
// runs for election again. stop ends the operator, releasing the Lease, and
// waits for it; live is the operator's liveness check.
func startOperator(ctx context.Context, cfg *settings.Config, st *openedStore, blk *blocking, env func(string) string, nodeName string, lease LeaseTimings, log *slog.Logger) (stop func(), live ReadinessCheck, err error) {
	cms, err := newConfigMaps(st.rest)
	if err != nil {
		return nil, nil, fmt.Errorf("configmap reader: %w", err)
	}
	lists := blocklists.New(blocklists.Options[policy.CompiledSource, *blocklist.List]{
		Store: st, Fetcher: blk.fetcher, Compiler: policy.ListCompiler{}, ConfigMaps: cms,
		AllowDegraded: cfg.Blocking.AllowDegraded, DefaultRefresh: cfg.Blocking.RefreshInterval,
		Now: time.Now, Logger: log.With("component", "blocklists"),
		OnFetch: blk.metrics.listFetched, Events: blk.listEvents(),
	})
	opts := operator.Options{
		Namespace: namespace(env), Identity: nodeName, Store: st,
		LeaseDuration: lease.Duration, RenewDeadline: lease.RenewDeadline, RetryPeriod: lease.RetryPeriod,
		Controllers: blk.operatorControllers(ctx, st.rest, lists),
		Logger:      log.With("component", "operator"),
	}
	if pub, err := publishRunnable(cfg, st, namespace(env), log); err != nil {
		return nil, nil, err
	} else if pub != nil {
		opts.Runnables = append(opts.Runnables, pub)
	}
	// The first manager is built here so a configuration error stops the
	// start; later ones are built by the loop.
	op, err := operator.New(st.rest, opts)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	life := &operatorLife{}
	life.running()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runOperator(ctx, op, life, func() (*operator.Operator, error) { return operator.New(st.rest, opts) }, log)
	}()
	return func() {
		cancel()
		<-done
	}, life.live, nil
}

// The wait before a replica that lost the Lease (or whose manager failed)
// runs for election again, doubling between the two.
const (
	operatorRejoinMin = time.Second
	operatorRejoinMax = 30 * time.Second
	// operatorHealthyRun is how long a manager must have run for its stop
	// to count as an outage rather than a failure to start.
	operatorHealthyRun = 10 * time.Second
)

// runOperator runs managers until ctx ends. A controller-runtime manager
// stops for good when it loses the Lease (the apiserver was away longer than
// the lease, or another replica took over); a replica that merely stopped
// would leave the cluster without an operator after two outages, so a new
// manager rejoins the election instead.
func runOperator(ctx context.Context, op *operator.Operator, life *operatorLife, rebuild func() (*operator.Operator, error), log *slog.Logger) {
	backoff := operatorRejoinMin
	for {
		elected := op.Elected()
		go func() {
			select {
			case <-elected:
				log.Info("operator: elected leader")
			case <-ctx.Done():
			}
		}()
		started := time.Now()
		err := op.Run(ctx)
		life.stopped()
		if ctx.Err() != nil {
			return
		}
		// A manager that ran a while stopped because of an outage, not
		// because it cannot start: rejoin soon, whatever happened before
		// (otherwise repeated outages would push the wait to 30s).
		if time.Since(started) > operatorHealthyRun {
			backoff = operatorRejoinMin
		}
		log.Warn("operator: manager stopped (leader lease lost or apiserver unreachable); rejoining the election", "err", err, "retry", backoff)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, operatorRejoinMax)
			if op, err = rebuild(); err == nil {
				break
			}
			log.Error("operator: cannot build a new manager", "err", err, "retry", backoff)
		}
		life.running()
	}
}

// operatorLife is what liveness knows of the operator loop: a replica whose
// manager has not run for operatorDeadAfter is not live, so the kubelet
// restarts it.
type operatorLife struct {
	mu        sync.Mutex
	down      bool
	downSince time.Time
}

const operatorDeadAfter = 2 * time.Minute

func (l *operatorLife) running() {
	l.mu.Lock()
	l.down = false
	l.mu.Unlock()
}

func (l *operatorLife) stopped() {
	l.mu.Lock()
	l.down, l.downSince = true, time.Now()
	l.mu.Unlock()
}

func (l *operatorLife) live() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := time.Since(l.downSince); l.down && d > operatorDeadAfter {
		return fmt.Errorf("operator manager not running for %s", d.Round(time.Second))
	}
	return nil
}

// kubeBearer authenticates Kubernetes ServiceAccount tokens in the REST API
// and authorizes them through SubjectAccessReview (kube store only).
func kubeBearer(cfg *settings.Config, st *openedStore, log *slog.Logger) ([]api.BearerAuthenticator, error) {
	if st.rest == nil {
		return nil, nil
	}
	v, err := kubeauth.NewVerifier(st.rest, kubeauth.VerifierOptions{Logger: log.With("component", "kubeauth")})
	if err != nil {
		return nil, err
	}
	az, err := kubeauth.NewAuthorizer(st.rest, kubeauth.AuthorizerOptions{Mode: cfg.Auth.Kubernetes.Mode})
	if err != nil {
		return nil, err
	}
	return []api.BearerAuthenticator{&kubeauth.Bearer{Verifier: v, Authorizer: az}}, nil
}
