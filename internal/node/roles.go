package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/controllers/policies"
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
// them run only while this replica holds the Lease. stop ends the operator,
// releasing the Lease, and waits for it.
func startOperator(ctx context.Context, cfg *settings.Config, st *openedStore, blk *blocking, env func(string) string, nodeName string, log *slog.Logger) (stop func(), err error) {
	cms, err := newConfigMaps(st.rest)
	if err != nil {
		return nil, fmt.Errorf("configmap reader: %w", err)
	}
	lists := blocklists.New(blocklists.Options[policy.CompiledSource, *blocklist.List]{
		Store: st, Fetcher: blk.fetcher, Compiler: policy.ListCompiler{}, ConfigMaps: cms,
		AllowDegraded: cfg.Blocking.AllowDegraded, DefaultRefresh: cfg.Blocking.RefreshInterval,
		Now: time.Now, Logger: log.With("component", "blocklists"),
		OnFetch: blk.metrics.listFetched,
	})
	pols := operator.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
		_, err := blk.pols.Reconcile(ctx, ns, name)
		return 0, err
	})
	op, err := operator.New(st.rest, operator.Options{
		Namespace: namespace(env), Identity: nodeName, Store: st,
		Controllers: []operator.Controller{
			{Kind: blocklists.Kind, Reconciler: lists},
			{Kind: policies.Kind, Reconciler: pols},
		},
		Logger: log.With("component", "operator"),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-op.Elected():
			log.Info("operator: elected leader")
		case <-ctx.Done():
		}
	}()
	go func() {
		defer close(done)
		if err := op.Run(ctx); stoppedEarly(ctx, err) {
			log.Error("operator stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}, nil
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
