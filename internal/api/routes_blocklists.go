package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/store"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	kindBlockList = "BlockList"
	kindPolicy    = "Policy"
)

// BlockListConfigMapRef names the ConfigMap a source reads.
type BlockListConfigMapRef struct {
	Name      string
	Namespace string
}

// BlockListSource is one source of a BlockList as stored.
type BlockListSource struct {
	Namespace, List, Name string
	Format                string // auto (default), hosts, domains, adblock, regex
	Subdomains            bool
	URL                   string
	Inline                []string
	ConfigMapRef          *BlockListConfigMapRef
}

// BlockListRules reads the rules of a source's body. The node implements it
// with the list fetcher's cache and blocklist.NormalizeRules.
type BlockListRules interface {
	// SourceRules lists the rules of the source body (inline lines, or the
	// cached body of its url or configMapRef) normalised as the source
	// format writes them, in body order; structured entries are not part of
	// it. known false: the body is not known on this node (not fetched yet).
	SourceRules(ctx context.Context, src BlockListSource) (rules []string, known bool, err error)
}

// BlockListRefresher asks for an immediate refetch of a list's sources.
type BlockListRefresher interface {
	RefreshBlockList(ctx context.Context, namespace, name string) error
}

// DomainEntry is one rule or structured entry of a block-list source.
type DomainEntry struct {
	ID        string     `json:"id" doc:"stable id of the entry or rule, for PATCH"`
	Kind      string     `json:"kind" enum:"entry,rule" doc:"entry: spec.sources[].entries; rule: a rule of the source body (switched by spec.sources[].exclude)"`
	Value     string     `json:"value" doc:"entry value, or the rule normalised as the source format writes it"`
	Type      string     `json:"type,omitempty" enum:"exact,wildcard,regex" doc:"entries only"`
	Enabled   bool       `json:"enabled"`
	Stale     bool       `json:"stale,omitempty" doc:"an exclude value that matches no rule of the body"`
	Comment   string     `json:"comment,omitempty"`
	Origin    string     `json:"origin,omitempty"`
	Created   *time.Time `json:"created,omitempty"`
	Modified  *time.Time `json:"modified,omitempty"`
	CreatedBy string     `json:"createdBy,omitempty"`
	Request   string     `json:"request,omitempty"`
	Groups    []string   `json:"groups,omitempty" doc:"entries only: the ClientGroups (namespace/name) the entry applies to; empty applies it to every client the list reaches"`
	List      string     `json:"list" doc:"namespace/name of the BlockList"`
	Source    string     `json:"source"`
	Action    string     `json:"action" enum:"block,allow" doc:"block: the list blocks (spec.mode block); allow: it exempts from blocking"`
}

// DomainEntries is a page of entries: of one source, or across the lists
// of an action and namespace (GET /entries).
type DomainEntries struct {
	Items      []DomainEntry      `json:"items"`
	Total      int64              `json:"total" doc:"entries (and rules) of the action(s) and namespace(s), or of the source, before filters"`
	Matched    int64              `json:"matched" doc:"after filters"`
	Lists      []DomainListInfo   `json:"lists" doc:"the lists the view covers"`
	Unattached []DomainUnattached `json:"unattached" doc:"policies that should reference a listed list (it is not global and no Policy names it) but are managed by a file or integration, so the API cannot attach it"`
	TookMS     float64            `json:"took_ms"`
	Continue   string             `json:"continue"`
	RulesKnown bool               `json:"rulesKnown" doc:"false: the rules of some source body are unknown on this node (not fetched yet, or no rule reader), or were not asked for; entries and exclude values are listed"`
}

// DomainListInfo is one list a DomainEntries view covers.
type DomainListInfo struct {
	List      string `json:"list" doc:"namespace/name"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    string `json:"action" enum:"block,allow"`
	Global    bool   `json:"global" doc:"spec.global (omitted means true): the list reaches every client without a Policy naming it"`
	Enabled   bool   `json:"enabled" doc:"false: switched off by the annotation service.io/enabled"`
	Entries   int64  `json:"entries" doc:"items of this list in the view before filters"`
	Sources   int64  `json:"sources" doc:"sources of the list"`
	ManagedBy string `json:"managedBy,omitempty" doc:"the manager when not the API (file:<path>, integration:<name>): the API cannot change the list"`
}

// DomainUnattached is a policy that should reference a list but that the
// API cannot change.
type DomainUnattached struct {
	Policy    string `json:"policy" doc:"namespace/name"`
	List      string `json:"list" doc:"namespace/name of the list no Policy names"`
	ManagedBy string `json:"managedBy" doc:"file:<path> or integration:<name>"`
	Hint      string `json:"hint"`
}

func (d *DomainEntries) setTook(ms float64) { d.TookMS = ms }

// DomainEntriesBatch switches or deletes entries and rules by id.
type DomainEntriesBatch struct {
	IDs []string `json:"ids" minItems:"1" maxItems:"1000"`
	Op  string   `json:"op" enum:"enable,disable,delete" doc:"rules of the body are switched through exclude; they cannot be deleted (edit the body)"`
}

// DomainEntriesCreate adds structured entries to a source.
type DomainEntriesCreate struct {
	Values  []string `json:"values" minItems:"1" maxItems:"1000" doc:"exact names, *.domain wildcards or regular expressions (without slashes), per type"`
	Type    string   `json:"type,omitempty" enum:"exact,wildcard,regex" doc:"default exact"`
	Comment string   `json:"comment,omitempty" maxLength:"500"`
	Enabled *bool    `json:"enabled,omitempty" doc:"default true"`
	Groups  []string `json:"groups,omitempty" maxItems:"100" doc:"ClientGroups as namespace/name or a name in the list's namespace; the entries apply to clients of these groups only, whichever policy serves them; empty applies them to everyone the list reaches"`
}

// SourceParams address one source of a BlockList.
type SourceParams struct {
	Namespace string `path:"namespace" maxLength:"253"`
	Name      string `path:"name" maxLength:"253"`
	Source    string `path:"source" maxLength:"253" doc:"spec.sources[].name"`
}

type entriesListIn struct {
	SourceParams
	Q        string `query:"q" maxLength:"1024" doc:"case-insensitive substring of the value"`
	Kind     string `query:"kind" enum:"entry,rule"`
	Enabled  string `query:"enabled" enum:"true,false"`
	Limit    int    `query:"limit" minimum:"0" maximum:"1000" doc:"page size; 0 means 500"`
	Continue string `query:"continue" maxLength:"64"`
}

type entriesPatchIn struct {
	SourceParams
	IfMatch string `header:"If-Match" maxLength:"128" doc:"resourceVersion the write expects"`
	Body    DomainEntriesBatch
}

type entriesCreateIn struct {
	SourceParams
	IfMatch string `header:"If-Match" maxLength:"128" doc:"resourceVersion the write expects"`
	Body    DomainEntriesCreate
}

type entriesOut struct{ Body *DomainEntries }

type listRefreshIn struct {
	Namespace string `path:"namespace" maxLength:"253"`
	Name      string `path:"name" maxLength:"253"`
}

// RefreshAccepted acknowledges a refresh request.
type RefreshAccepted struct {
	List   string  `json:"list"`
	Node   string  `json:"node"`
	TookMS float64 `json:"took_ms"`
}

func (r *RefreshAccepted) setTook(ms float64) { r.TookMS = ms }

type listRefreshOut struct{ Body *RefreshAccepted }

func (s *Server) registerBlockListRoutes() {
	tags := []string{"blocklists"}
	path := "/blocklists/{namespace}/{name}/sources/{source}/entries"
	register(s, huma.Operation{OperationID: "blocklist-entries", Method: http.MethodGet, Path: path, Summary: "Entries and rules of one block-list source", Tags: tags,
		Description: "Structured entries (spec.sources[].entries) first, then the rules of the source body normalised as the source format writes them (disabled when listed in spec.sources[].exclude), then exclude values that match no rule (stale).",
		Errors:      []int{http.StatusNotFound}},
		clusterPerm("blocklists.read"), s.listEntries)
	register(s, huma.Operation{OperationID: "blocklist-entries-patch", Method: http.MethodPatch, Path: path, Summary: "Enable, disable or delete entries and rules by id", Tags: tags,
		Description: "Entries: enable and disable set `enabled`, delete removes them. Rules of the body: disable adds the rule to `exclude`, enable removes it; they cannot be deleted (422 unprocessable). An unknown id refuses the whole batch (404). Objects owned by a file or integration answer `managed_by`.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict, http.StatusPreconditionFailed, http.StatusUnprocessableEntity}},
		clusterPerm("blocklists.write"), s.patchEntries)
	register(s, huma.Operation{OperationID: "blocklist-entries-create", Method: http.MethodPost, Path: path, Summary: "Add structured entries to a source", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Values already present with the same type and groups are left as they are. Entries get origin `api`, `created`/`modified` now and `createdBy` the caller. `groups` confines them to the clients of those ClientGroups.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict, http.StatusPreconditionFailed}},
		clusterPerm("blocklists.write"), s.createEntries)
	s.registerEntriesRoutes()
	register(s, huma.Operation{OperationID: "blocklist-refresh", Method: http.MethodPost, Path: "/blocklists/{namespace}/{name}/refresh", Summary: "Fetch the list's sources again now", Tags: tags, DefaultStatus: http.StatusAccepted,
		Errors: []int{http.StatusNotFound}},
		clusterPerm("blocklists.write"), func(ctx context.Context, in *listRefreshIn) (*listRefreshOut, error) {
			if s.deps.BlockListRefresher == nil {
				return nil, errNotImplemented("block-list refresh")
			}
			if _, err := s.deps.Store.Get(ctx, kindBlockList, in.Namespace, in.Name); err != nil {
				return nil, fromError(err)
			}
			auditObject(ctx, "refresh", kindBlockList, in.Namespace, in.Name, "")
			if err := s.deps.BlockListRefresher.RefreshBlockList(ctx, in.Namespace, in.Name); err != nil {
				return nil, fromError(err)
			}
			return &listRefreshOut{Body: &RefreshAccepted{List: in.Namespace + "/" + in.Name, Node: s.opts.NodeName}}, nil
		})
}

// ruleKey compares rules and exclude values: ASCII case and one trailing
// dot are ignored.
func ruleKey(v string) string { return strings.ToLower(strings.TrimSuffix(v, ".")) }

func entryID(prefix string, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + hex.EncodeToString(h[:8])
}

func ruleID(rule string) string { return entryID("r-", "rule", ruleKey(rule)) }

// structuredID identifies an entry by type, value and groups: the same
// value for other groups is another entry.
func structuredID(typ, value string, groups []string) string {
	if typ == "" {
		typ = "exact"
	}
	if len(groups) == 0 {
		return entryID("e-", "entry", typ, strings.ToLower(value))
	}
	gs := slices.Clone(groups)
	slices.Sort(gs)
	return entryID("e-", "entry", typ, strings.ToLower(value), strings.Join(gs, ","))
}

// findSource returns the index of the named source in spec.sources.
func findSource(obj *unstructured.Unstructured, name string) ([]any, int, *Error) {
	srcs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
	for i, v := range srcs {
		m, _ := v.(map[string]any)
		if n, _ := m["name"].(string); n == name {
			return srcs, i, nil
		}
	}
	return nil, -1, errNotFound("source " + strconv.Quote(name) + " of blocklist " + obj.GetNamespace() + "/" + obj.GetName())
}

func sourceOf(ns, list string, m map[string]any) BlockListSource {
	src := BlockListSource{Namespace: ns, List: list}
	src.Name, _ = m["name"].(string)
	src.Format, _ = m["format"].(string)
	src.Subdomains, _ = m["subdomains"].(bool)
	src.URL, _ = m["url"].(string)
	src.Inline = strList(m["inline"])
	if cm, ok := m["configMapRef"].(map[string]any); ok {
		r := &BlockListConfigMapRef{}
		r.Name, _ = cm["name"].(string)
		r.Namespace, _ = cm["namespace"].(string)
		src.ConfigMapRef = r
	}
	return src
}

func timeField(m map[string]any, k string) *time.Time {
	v, _ := m[k].(string)
	if v == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil
	}
	return &t
}

// sourceEntries lists the entries, rules and stale exclude values of a source.
// withRules false leaves the rules of the body out (known is then false).
func (s *Server) sourceEntries(ctx context.Context, obj *unstructured.Unstructured, m map[string]any, withRules bool) ([]DomainEntry, bool, error) {
	ns, name := obj.GetNamespace(), obj.GetName()
	list := ns + "/" + name
	srcName, _ := m["name"].(string)
	action := listAction(obj)
	var out []DomainEntry
	seen := map[string]bool{}
	ents, _ := m["entries"].([]any)
	for _, v := range ents {
		e, _ := v.(map[string]any)
		val, _ := e["value"].(string)
		typ, _ := e["type"].(string)
		if typ == "" {
			typ = "exact"
		}
		groups := strList(e["groups"])
		id := structuredID(typ, val, groups)
		if seen[id] {
			continue
		}
		seen[id] = true
		en := true
		if b, ok := e["enabled"].(bool); ok {
			en = b
		}
		d := DomainEntry{ID: id, Kind: "entry", Value: val, Type: typ, Enabled: en, List: list, Source: srcName,
			Created: timeField(e, "created"), Modified: timeField(e, "modified"), Groups: groups, Action: action}
		d.Comment, _ = e["comment"].(string)
		d.Origin, _ = e["origin"].(string)
		d.CreatedBy, _ = e["createdBy"].(string)
		d.Request, _ = e["request"].(string)
		out = append(out, d)
	}
	excluded := map[string]bool{}
	excl := strList(m["exclude"])
	for _, x := range excl {
		excluded[ruleKey(x)] = true
	}
	known := false
	if s.deps.BlockListRules != nil && withRules {
		src := sourceOf(ns, name, m)
		if src.URL != "" || len(src.Inline) > 0 || src.ConfigMapRef != nil {
			rules, ok, err := s.deps.BlockListRules.SourceRules(ctx, src)
			if err != nil {
				return nil, false, err
			}
			known = ok
			for _, r := range rules {
				id := ruleID(r)
				if seen[id] {
					continue
				}
				seen[id] = true
				out = append(out, DomainEntry{ID: id, Kind: "rule", Value: r, Enabled: !excluded[ruleKey(r)], List: list, Source: srcName, Action: action})
			}
		} else {
			known = true // a source of entries only has no body
		}
	}
	for _, x := range excl {
		id := ruleID(x)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, DomainEntry{ID: id, Kind: "rule", Value: x, Enabled: false, Stale: known, List: list, Source: srcName, Action: action})
	}
	return out, known, nil
}

// unattached lists, when no Policy references the list, the policies of its
// namespace owned by a file or integration.
func (s *Server) unattached(ctx context.Context, ns, name string) ([]DomainUnattached, error) {
	res, err := s.deps.Store.List(ctx, store.ListOptions{Kind: kindPolicy, Namespace: ns})
	if err != nil {
		return nil, err
	}
	return unattachedOf(res.Items, ns, name), nil
}

// unattachedOf is unattached over the policies of the list's namespace.
func unattachedOf(pols []*unstructured.Unstructured, ns, name string) []DomainUnattached {
	out := []DomainUnattached{}
	for _, p := range pols {
		if p.GetNamespace() != ns {
			continue
		}
		for _, f := range []string{"blockListRefs", "allowListRefs"} {
			refs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", f)
			if slices.Contains(refs, name) || slices.Contains(refs, ns+"/"+name) {
				return []DomainUnattached{}
			}
		}
		if m := p.GetAnnotations()[store.ManagerAnnotation]; m != "" && m != string(store.ManagerAPI) {
			out = append(out, DomainUnattached{Policy: p.GetNamespace() + "/" + p.GetName(), List: ns + "/" + name, ManagedBy: m,
				Hint: "add " + name + " to spec.blockListRefs or spec.allowListRefs where " + m + " defines the policy, or make the list global"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Policy < out[j].Policy })
	return out
}

// listAction is block or allow from spec.mode.
func listAction(obj *unstructured.Unstructured) string {
	if m, _, _ := unstructured.NestedString(obj.Object, "spec", "mode"); m == "allow" {
		return "allow"
	}
	return "block"
}

// listInfo describes a list of a view holding n of its items.
func listInfo(obj *unstructured.Unstructured, n int) DomainListInfo {
	srcs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
	d := DomainListInfo{List: obj.GetNamespace() + "/" + obj.GetName(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Action: listAction(obj), Global: true, Enabled: obj.GetAnnotations()["service.io/enabled"] != "false",
		Entries: int64(n), Sources: int64(len(srcs))}
	if g, found, _ := unstructured.NestedBool(obj.Object, "spec", "global"); found {
		d.Global = g
	}
	if m := obj.GetAnnotations()[store.ManagerAnnotation]; m != "" && m != string(store.ManagerAPI) {
		d.ManagedBy = m
	}
	return d
}

func encodeOffset(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(n)))
}

func decodeOffset(s string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), "o:") {
		return 0, errors.New("bad continue token")
	}
	n, err := strconv.Atoi(string(b[2:]))
	if err != nil || n < 0 {
		return 0, errors.New("bad continue token")
	}
	return n, nil
}

// offsetPage is the page of items that continue token cont (from
// encodeOffset; "" = the first) and limit (<= 0: 500) select, and the
// token of the next page ("" on the last).
func offsetPage[T any](items []T, cont string, limit int) (page []T, next string, err error) {
	off := 0
	if cont != "" {
		if off, err = decodeOffset(cont); err != nil {
			return nil, "", errInvalid("continue: %v", err)
		}
	}
	if limit <= 0 {
		limit = 500
	}
	if off >= len(items) {
		return nil, "", nil
	}
	end := min(off+limit, len(items))
	if end < len(items) {
		next = encodeOffset(end)
	}
	return items[off:end], next, nil
}

func (s *Server) entriesPage(ctx context.Context, obj *unstructured.Unstructured, source string, in *entriesListIn) (*DomainEntries, error) {
	_, i, e := findSource(obj, source)
	if e != nil {
		return nil, e
	}
	srcs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
	m, _ := srcs[i].(map[string]any)
	all, known, err := s.sourceEntries(ctx, obj, m, true)
	if err != nil {
		return nil, fromError(err)
	}
	q := strings.ToLower(in.Q)
	var matched []DomainEntry
	for _, d := range all {
		if q != "" && !strings.Contains(strings.ToLower(d.Value), q) {
			continue
		}
		if in.Kind != "" && d.Kind != in.Kind {
			continue
		}
		if in.Enabled != "" && strconv.FormatBool(d.Enabled) != in.Enabled {
			continue
		}
		matched = append(matched, d)
	}
	page, next, err := offsetPage(matched, in.Continue, in.Limit)
	if err != nil {
		return nil, err
	}
	out := &DomainEntries{Items: append([]DomainEntry{}, page...), Total: int64(len(all)), Matched: int64(len(matched)),
		Lists: []DomainListInfo{listInfo(obj, len(all))}, RulesKnown: known, Continue: next}
	out.Unattached = []DomainUnattached{}
	if g, found, _ := unstructured.NestedBool(obj.Object, "spec", "global"); found && !g {
		// a global list (spec.global omitted or true) applies to every
		// client without a reference: nothing to attach
		if out.Unattached, err = s.unattached(ctx, obj.GetNamespace(), obj.GetName()); err != nil {
			return nil, fromError(err)
		}
	}
	return out, nil
}

func (s *Server) listEntries(ctx context.Context, in *entriesListIn) (*entriesOut, error) {
	obj, err := s.deps.Store.Get(ctx, kindBlockList, in.Namespace, in.Name)
	if err != nil {
		return nil, fromError(err)
	}
	page, err := s.entriesPage(ctx, obj, in.Source, in)
	if err != nil {
		return nil, err
	}
	return &entriesOut{Body: page}, nil
}

// mutateSource re-reads the list, lets fn change the source's map and stores
// the list as manager api, retrying lost races unless If-Match was given.
func (s *Server) mutateSource(ctx context.Context, p SourceParams, ifMatch, action string, fn func(obj *unstructured.Unstructured, src map[string]any) error) (*unstructured.Unstructured, error) {
	var lastErr error
	for range writeAttempts {
		obj, err := s.deps.Store.Get(ctx, kindBlockList, p.Namespace, p.Name)
		if err != nil {
			return nil, fromError(err)
		}
		if ifMatch != "" && unquoteETag(ifMatch) != obj.GetResourceVersion() {
			return nil, fromError(store.ErrPrecondition)
		}
		srcs, i, e := findSource(obj, p.Source)
		if e != nil {
			return nil, e
		}
		m, _ := srcs[i].(map[string]any)
		if err := fn(obj, m); err != nil {
			return nil, err
		}
		srcs[i] = m
		if err := unstructured.SetNestedSlice(obj.Object, srcs, "spec", "sources"); err != nil {
			return nil, fromError(err)
		}
		res, err := s.deps.Store.Apply(ctx, obj, store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: obj.GetResourceVersion()})
		if err == nil {
			auditObject(ctx, action, kindBlockList, p.Namespace, p.Name, string(res.Result))
			return res.Object, nil
		}
		lastErr = err
		if ifMatch != "" || !(errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict)) {
			break
		}
	}
	auditObject(ctx, action, kindBlockList, p.Namespace, p.Name, "error")
	if errors.Is(lastErr, store.ErrPrecondition) && ifMatch == "" {
		return nil, newErr(http.StatusConflict, KeyConflict, "the block list kept changing; every attempt lost", "retry")
	}
	return nil, fromError(lastErr)
}

func (s *Server) patchEntries(ctx context.Context, in *entriesPatchIn) (*entriesOut, error) {
	now := s.clock().UTC().Format(time.RFC3339)
	obj, err := s.mutateSource(ctx, in.SourceParams, in.IfMatch, "entries-"+in.Body.Op, func(obj *unstructured.Unstructured, m map[string]any) error {
		all, _, err := s.sourceEntries(ctx, obj, m, true)
		if err != nil {
			return fromError(err)
		}
		byID := map[string]DomainEntry{}
		for _, d := range all {
			byID[d.ID] = d
		}
		var missing []string
		for _, id := range in.Body.IDs {
			d, ok := byID[id]
			if !ok {
				missing = append(missing, id)
				continue
			}
			if d.Kind == "rule" && in.Body.Op == "delete" && !d.Stale {
				return newErr(http.StatusUnprocessableEntity, KeyUnprocessable, "rule "+strconv.Quote(d.Value)+" belongs to the source body and cannot be deleted", "disable it (it is added to exclude), or edit the source")
			}
		}
		if len(missing) > 0 {
			return errNotFound("entries " + strings.Join(missing, ", "))
		}
		want := map[string]bool{}
		for _, id := range in.Body.IDs {
			want[id] = true
		}
		// Structured entries.
		ents, _ := m["entries"].([]any)
		kept := make([]any, 0, len(ents))
		for _, v := range ents {
			e, _ := v.(map[string]any)
			val, _ := e["value"].(string)
			typ, _ := e["type"].(string)
			if !want[structuredID(typ, val, strList(e["groups"]))] {
				kept = append(kept, v)
				continue
			}
			switch in.Body.Op {
			case "delete":
				continue
			case "enable", "disable":
				on := in.Body.Op == "enable"
				if cur, ok := e["enabled"].(bool); (ok && cur != on) || (!ok && !on) {
					e["enabled"] = on
					e["modified"] = now
				}
			}
			kept = append(kept, e)
		}
		if len(ents) > 0 {
			m["entries"] = kept
		}
		// Rules: exclude values.
		excl := strList(m["exclude"])
		var nextExcl []string
		drop := map[string]bool{}
		add := []string{}
		for _, id := range in.Body.IDs {
			d := byID[id]
			if d.Kind != "rule" {
				continue
			}
			if in.Body.Op == "disable" {
				add = append(add, d.Value)
			} else {
				drop[ruleKey(d.Value)] = true
			}
		}
		have := map[string]bool{}
		for _, x := range excl {
			if drop[ruleKey(x)] {
				continue
			}
			have[ruleKey(x)] = true
			nextExcl = append(nextExcl, x)
		}
		for _, x := range add {
			if !have[ruleKey(x)] {
				have[ruleKey(x)] = true
				nextExcl = append(nextExcl, x)
			}
		}
		switch {
		case len(nextExcl) > 0:
			m["exclude"] = toAny(nextExcl)
		case len(excl) > 0:
			delete(m, "exclude")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	page, err := s.entriesPage(ctx, obj, in.Source, &entriesListIn{})
	if err != nil {
		return nil, err
	}
	return &entriesOut{Body: page}, nil
}

// canonicalEntry writes a value as its type stores it.
func canonicalEntry(typ, v string) (string, *Error) {
	v = strings.TrimSpace(v)
	switch typ {
	case "regex":
		if len(v) >= 2 && strings.HasPrefix(v, "/") && strings.HasSuffix(v, "/") {
			v = v[1 : len(v)-1]
		}
	case "wildcard":
		v = strings.ToLower(strings.TrimSuffix(v, "."))
		if !strings.HasPrefix(v, "*.") {
			v = "*." + strings.TrimPrefix(v, ".")
		}
	default:
		v = strings.ToLower(strings.TrimSuffix(v, "."))
	}
	if v == "" || len(v) > 1024 {
		return "", errInvalid("values: each value must be 1 to 1024 characters")
	}
	return v, nil
}

func (s *Server) createEntries(ctx context.Context, in *entriesCreateIn) (*entriesOut, error) {
	b := in.Body
	ne, e := s.prepareEntries(ctx, in.Namespace, b)
	if e != nil {
		return nil, e
	}
	obj, err := s.mutateSource(ctx, in.SourceParams, in.IfMatch, "entries-add", func(_ *unstructured.Unstructured, m map[string]any) error {
		addStructured(m, ne, b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	page, err := s.entriesPage(ctx, obj, in.Source, &entriesListIn{})
	if err != nil {
		return nil, err
	}
	return &entriesOut{Body: page}, nil
}
