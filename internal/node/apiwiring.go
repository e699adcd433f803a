package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/policy/toggle"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/objectsdir"
	"github.com/svcdns/svc/internal/oidc"
	"github.com/svcdns/svc/internal/settings"
)

// apiOptions maps listeners.api.* and auth.* onto the REST API's options.
func apiOptions(cfg *settings.Config, nodeName string, environ []string) (api.Options, error) {
	bindings, err := rbacBindings(cfg.RBAC.Bindings)
	if err != nil {
		return api.Options{}, err
	}
	env := envLookup(environ)
	visible := cfg.Listeners.API.WriteVisibleTimeout
	if visible <= 0 {
		visible = -1 // the API's zero means its default
	}
	return api.Options{
		WriteVisibleTimeout: visible,
		Address:             cfg.Listeners.API.Address,
		TLSAuto:             cfg.Listeners.API.TLS.Auto,
		TLSCertFile:         cfg.Listeners.API.TLS.CertFile,
		TLSKeyFile:          cfg.Listeners.API.TLS.KeyFile,
		PathPrefix:          cfg.Listeners.API.PathPrefix,
		TrustedProxies:      cfg.Listeners.API.TrustedProxies,
		DataDir:             cfg.Node.DataDir,
		NodeName:            nodeName,
		LocalLogin:          cfg.Auth.LocalLogin,
		AdminPasswordFile:   cfg.Auth.Bootstrap.AdminPasswordFile,
		SessionIdleTimeout:  cfg.Auth.Session.IdleTimeout,
		SessionLifetime:     cfg.Auth.Session.Lifetime,
		SessionSecure:       cfg.Auth.Session.Secure,
		TokenMaxLifetime:    cfg.Auth.Tokens.MaxLifetime,
		RBACBindings:        bindings,
		AdminSocketPath:     cfg.Auth.AdminSocket.Path,
		AdminSocketGroup:    cfg.Auth.AdminSocket.Group,
		Env:                 env,
		GenerateKey:         true,
	}, nil
}

// authLimits are the auth.* settings the API applies live.
func authLimits(cfg *settings.Config) api.AuthLimits {
	return api.AuthLimits{SessionIdleTimeout: cfg.Auth.Session.IdleTimeout, SessionLifetime: cfg.Auth.Session.Lifetime,
		SessionSecure: cfg.Auth.Session.Secure, TokenMaxLifetime: cfg.Auth.Tokens.MaxLifetime}
}

// identityProviders builds the OIDC providers of auth.identityProviders
// (decoded strictly: an unknown key or a bad value stops the start). With the
// kube store, clientSecretRef is read from a Secret in the service's
// namespace; otherwise only clientSecretFile can name a secret.
func identityProviders(cfg *settings.Config, st *openedStore, ns string, log *slog.Logger) (*oidc.Set, error) {
	specs, err := oidc.DecodeSpecs(cfg.Auth.IdentityProviders)
	if err != nil {
		return nil, err
	}
	opts := oidc.Options{Logger: log.With("component", "oidc")}
	if st != nil && st.rest != nil {
		cs, err := kubernetes.NewForConfig(st.rest)
		if err != nil {
			return nil, fmt.Errorf("identity providers: kubernetes client: %w", err)
		}
		opts.SecretRef = func(ctx context.Context, name, key string) ([]byte, error) {
			sec, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			v, ok := sec.Data[key]
			if !ok {
				return nil, fmt.Errorf("secret %s/%s has no key %s", ns, name, key)
			}
			return v, nil
		}
	}
	return oidc.NewSet(specs, opts)
}

// envLookup serves the node's environment (tests pass their own).
func envLookup(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}

// rbacBindings decodes rbac.bindings strictly: an unknown field is an error
// naming the binding.
func rbacBindings(raw []map[string]any) ([]auth.Binding, error) {
	var out []auth.Binding
	for i, m := range raw {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("rbac.bindings[%d]: %w", i, err)
		}
		var spec struct {
			Name    string       `json:"name"`
			Subject auth.Subject `json:"subject"`
			Role    string       `json:"role"`
			Scope   *auth.Scope  `json:"scope"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			return nil, fmt.Errorf("rbac.bindings[%d]: %w", i, err)
		}
		scope := auth.Scope{Kind: "cluster"}
		if spec.Scope != nil {
			scope = *spec.Scope
		}
		binding := auth.Binding{Name: spec.Name, Source: "config", Subject: spec.Subject, Role: spec.Role, Scope: scope}
		if binding.Name == "" {
			binding.Name = fmt.Sprintf("rbac.bindings[%d]", i)
		}
		if err := auth.ValidateBinding(binding); err != nil {
			return nil, fmt.Errorf("rbac.bindings[%d]: %w", i, err)
		}
		out = append(out, binding)
	}
	return out, nil
}

// settingsService serves the settings routes from the settings manager.
type settingsService struct{ m *settings.Manager }

func (s settingsService) Effective(context.Context) (map[string]any, error) {
	return settings.Nest(s.m.Effective(true)), nil
}

// schemaEntry is a key's metadata plus where this node's value comes from,
// so the dashboard can show environment-locked keys read-only with the reason.
type schemaEntry struct {
	settings.KeyInfo
	Source settings.Source `json:"source"`
	Origin string          `json:"origin,omitempty"`
}

func (s settingsService) Schema(context.Context) (any, error) {
	src := s.m.Sources()
	keys := s.m.Schema()
	out := make([]schemaEntry, len(keys))
	for i, k := range keys {
		out[i] = schemaEntry{KeyInfo: k, Source: src[k.Key], Origin: s.m.Origin(k.Key)}
	}
	return out, nil
}
func (s settingsService) PatchCluster(ctx context.Context, p []byte) error {
	return s.m.PatchCluster(ctx, p)
}
func (s settingsService) PatchNode(ctx context.Context, p []byte) error {
	return s.m.PatchNode(ctx, p)
}

// Overrides are the cluster-scope keys set through the API (the settings
// file), for `svc backup`; write-only keys are left out.
func (s settingsService) Overrides(context.Context) (map[string]any, error) {
	out := map[string]any{}
	for _, v := range s.m.Values(settings.ScopeCluster) {
		if v.Source == settings.SourceSettingsFile && !v.Redacted {
			out[v.Key] = v.Value
		}
	}
	return out, nil
}

// dnsService serves POST /dns/query, /dns/blocking and /cache/flush from the
// node's data plane.
type dnsService struct {
	dp     *dataplane.Server
	toggle *toggle.Toggle
	node   string
}

func (d dnsService) Query(ctx context.Context, req api.DNSQueryRequest) (api.DNSQueryResult, error) {
	qtype := uint16(1) // A
	if req.Type != "" {
		t, ok := dataplane.ParseType(req.Type)
		if !ok {
			return api.DNSQueryResult{}, invalidInput(fmt.Sprintf("type %q is not a DNS record type", req.Type))
		}
		qtype = t
	}
	client := netip.MustParseAddr("127.0.0.1")
	if req.Client != "" {
		a, err := netip.ParseAddr(req.Client)
		if err != nil {
			return api.DNSQueryResult{}, invalidInput(fmt.Sprintf("client %q is not an IP address", req.Client))
		}
		client = a
	}
	tr := dataplane.Transport(0)
	if req.Proto != "" {
		t, ok := dataplane.ParseTransport(req.Proto)
		if !ok {
			return api.DNSQueryResult{}, invalidInput(fmt.Sprintf("proto %q", req.Proto))
		}
		tr = t
	}
	res, err := d.dp.Query(ctx, dataplane.QueryRequest{Name: req.Name, Type: qtype, Client: client, Transport: tr, DNSSEC: req.DNSSEC})
	name := req.Name
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	out := api.DNSQueryResult{Name: name, Type: dataplane.TypeString(qtype), Client: client.String(), Node: d.node}
	if err != nil {
		out.Error = err.Error()
		out.Rcode = "SERVFAIL"
		out.StatusClass = "failed"
		return out, nil
	}
	m := res.Msg
	out.Rcode = res.Rcode()
	out.Status = res.Reason.String()
	out.StatusClass = res.Status.String()
	out.List, out.Rule, out.Upstream, out.Policy = res.List, res.Rule, res.Upstream, res.Policy
	if code, ename, text, ok := res.EDE(); ok {
		out.EDE = &api.DNSEDE{Code: code, Name: ename, Text: text}
	}
	out.LatencyMS = float64(res.Latency.Microseconds()) / 1000
	out.Flags = api.DNSFlags{AA: m.Authoritative, TC: m.Truncated, RD: m.RecursionDesired, RA: m.RecursionAvailable, AD: m.AuthenticatedData, CD: m.CheckingDisabled}
	out.Answer, out.Authority, out.Additional = res.Sections()
	return out, nil
}

func (d dnsService) SetBlocking(_ context.Context, req api.BlockingRequest) (api.BlockingState, error) {
	var st toggle.State
	if req.Blocking {
		st = d.toggle.Enable()
	} else {
		var dur time.Duration
		if req.Duration != "" {
			v, err := time.ParseDuration(req.Duration)
			if err != nil || v <= 0 {
				return api.BlockingState{}, invalidInput(fmt.Sprintf("duration %q is not a positive duration such as 10m", req.Duration))
			}
			dur = v
		}
		var until time.Time
		if req.Until != nil {
			until = *req.Until
		}
		s, err := d.toggle.Disable(dur, until)
		if err != nil {
			if errors.Is(err, toggle.ErrPast) {
				return api.BlockingState{}, invalidInput("until is in the past")
			}
			return api.BlockingState{}, err
		}
		st = s
	}
	return blockingState(st), nil
}

// blockingState converts the toggle's state to the API shape.
func blockingState(st toggle.State) api.BlockingState {
	out := api.BlockingState{Blocking: st.Blocking, Configured: st.Configured, Scope: st.Scope, Node: st.Node, Until: st.Until}
	if st.Timer != nil {
		out.Timer = *st.Timer
	}
	return out
}

func (d dnsService) FlushCache(_ context.Context, name string) error { return d.dp.FlushCache(name) }

// messages gathers diagnoses for GET /info/messages.
type messages struct {
	objs *objectsdir.Applier
	node string
}

func (m messages) Messages(context.Context) ([]api.DiagnosisMessage, error) {
	var out []api.DiagnosisMessage
	for _, d := range m.objs.Diagnostics() {
		msg := d.Message
		if d.Field != "" {
			msg = d.Field + ": " + msg
		}
		src := d.Source
		if d.Document > 0 {
			src = fmt.Sprintf("%s (document %d)", src, d.Document)
		}
		out = append(out, api.DiagnosisMessage{Severity: d.Severity, Source: "objectsDir", Reason: "InvalidObject", Message: src + ": " + msg, Node: m.node, Object: d.Object})
	}
	return out, nil
}

// inputError is an invalid request value; the API answers it 400 invalid.
type inputError string

func (e inputError) Error() string    { return string(e) }
func (e inputError) ErrorKey() string { return "invalid" }

func invalidInput(msg string) error { return inputError(msg) }
