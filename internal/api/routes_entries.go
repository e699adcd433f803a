package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/suggest"
)

// Defaults of POST /entries, the lists `svc lists allow|deny` writes.
const (
	DefaultAllowList = "ui-allow"
	DefaultDenyList  = "ui-deny"
	// ManualSource is the source POST /entries adds entries to.
	ManualSource = "manual"
	kindGroup    = "ClientGroup"
)

// DomainEntriesAdd adds entries to a list chosen by action (POST /entries).
type DomainEntriesAdd struct {
	Action    string `json:"action" enum:"block,allow"`
	Namespace string `json:"namespace,omitempty" maxLength:"63" doc:"namespace of the list; default default"`
	List      string `json:"list,omitempty" maxLength:"253" doc:"BlockList name; default ui-deny for block, ui-allow for allow. Created (global, source manual) when missing"`
	DomainEntriesCreate
}

type allEntriesIn struct {
	Action    string `query:"action" enum:"block,allow" doc:"lists of this action only (spec.mode); empty: both"`
	Namespace string `query:"namespace" maxLength:"63" doc:"lists of this namespace only; empty: every namespace"`
	List      string `query:"list" maxLength:"253" doc:"lists of this name only"`
	Group     string `query:"group" maxLength:"507" doc:"entries for this ClientGroup only (namespace/name, or a name in the list's namespace)"`
	Rules     bool   `query:"rules" doc:"also list the rules of the source bodies (url, inline, configMapRef); they can be many"`
	Q         string `query:"q" maxLength:"1024" doc:"case-insensitive substring of the value"`
	Kind      string `query:"kind" enum:"entry,rule"`
	Enabled   string `query:"enabled" enum:"true,false"`
	Limit     int    `query:"limit" minimum:"0" maximum:"1000" doc:"page size; 0 means 500"`
	Continue  string `query:"continue" maxLength:"64"`
}

type entriesAddIn struct {
	Body DomainEntriesAdd
}

func (s *Server) registerEntriesRoutes() {
	tags := []string{"blocklists"}
	register(s, huma.Operation{OperationID: "entries", Method: http.MethodGet, Path: "/entries", Summary: "Entries across block and allow lists", Tags: tags,
		Description: "The structured entries and exclude values (and, with `rules=true`, the rules of the source bodies) of every list of the action(s) and namespace(s), list by list (namespace/name order), each source in order. " +
			"Items keep the id of their source: switch or delete them with PATCH /blocklists/{namespace}/{name}/sources/{source}/entries. " +
			"`unattached` names the policies managed by a file or integration that would have to name a listed list no Policy names.",
		Errors: []int{http.StatusBadRequest}},
		clusterPerm("blocklists.read"), s.allEntries)
	register(s, huma.Operation{OperationID: "entries-create", Method: http.MethodPost, Path: "/entries", Summary: "Block or allow names, for everyone or some client groups", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Adds structured entries to the source `manual` of the list (default ui-deny for block, ui-allow for allow), creating the list or the source when missing. " +
			"`groups` confines the entries to the clients of those ClientGroups, whichever policy serves them. Answers the entries of the source.",
		Errors: []int{http.StatusBadRequest, http.StatusConflict}},
		clusterPerm("blocklists.write"), s.addEntries)
}

// entryGroups resolves DomainEntriesCreate.groups against the stored
// ClientGroups: "namespace/name" or a name in ns, sorted and unique.
func (s *Server) entryGroups(ctx context.Context, ns string, groups []string) ([]string, *Error) {
	if len(groups) == 0 {
		return nil, nil
	}
	if len(groups) > 100 {
		return nil, errInvalid("groups: %d groups; at most 100", len(groups))
	}
	all, err := s.listAll(ctx, kindGroup)
	if err != nil {
		return nil, fromError(err)
	}
	have := map[string]bool{}
	names := make([]string, 0, len(all))
	for _, g := range all {
		k := g.GetNamespace() + "/" + g.GetName()
		have[k] = true
		names = append(names, k)
	}
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		g = strings.TrimSpace(g)
		if g == "" {
			return nil, errInvalid("groups: an empty group name")
		}
		r := g
		if !strings.Contains(r, "/") {
			r = ns + "/" + g
		}
		if !have[r] {
			e := errInvalid("groups: ClientGroup %s does not exist%s", r, suggest.DidYouMean(r, names))
			e.Detail.Hint = "name an existing ClientGroup ('svc get clientgroups -A'), or leave groups empty for everyone"
			return nil, e
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (s *Server) allEntries(ctx context.Context, in *allEntriesIn) (*entriesOut, error) {
	lists, err := s.listAll(ctx, kindBlockList)
	if err != nil {
		return nil, fromError(err)
	}
	pols, err := s.listAll(ctx, kindPolicy)
	if err != nil {
		return nil, fromError(err)
	}
	slices.SortFunc(lists, func(a, b *unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	out := &DomainEntries{Items: []DomainEntry{}, Lists: []DomainListInfo{}, Unattached: []DomainUnattached{}, RulesKnown: in.Rules}
	q := strings.ToLower(in.Q)
	var matched []DomainEntry
	for _, obj := range lists {
		if (in.Namespace != "" && obj.GetNamespace() != in.Namespace) || (in.List != "" && obj.GetName() != in.List) ||
			(in.Action != "" && listAction(obj) != in.Action) {
			continue
		}
		srcs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
		n := 0
		for _, v := range srcs {
			m, _ := v.(map[string]any)
			all, known, err := s.sourceEntries(ctx, obj, m, in.Rules)
			if err != nil {
				return nil, fromError(err)
			}
			if in.Rules && !known {
				out.RulesKnown = false
			}
			n += len(all)
			for _, d := range all {
				if entryMatches(d, q, in.Kind, in.Enabled, in.Group, obj.GetNamespace()) {
					matched = append(matched, d)
				}
			}
		}
		out.Total += int64(n)
		out.Lists = append(out.Lists, listInfo(obj, n))
		if g, found, _ := unstructured.NestedBool(obj.Object, "spec", "global"); found && !g {
			out.Unattached = append(out.Unattached, unattachedOf(pols, obj.GetNamespace(), obj.GetName())...)
		}
	}
	out.Matched = int64(len(matched))
	page, next, err := offsetPage(matched, in.Continue, in.Limit)
	if err != nil {
		return nil, err
	}
	out.Items, out.Continue = append(out.Items, page...), next
	return &entriesOut{Body: out}, nil
}

// entryMatches applies the filters of GET /entries to one item.
func entryMatches(d DomainEntry, q, kind, enabled, group, ns string) bool {
	if q != "" && !strings.Contains(strings.ToLower(d.Value), q) {
		return false
	}
	if kind != "" && d.Kind != kind {
		return false
	}
	if enabled != "" && strconv.FormatBool(d.Enabled) != enabled {
		return false
	}
	if group != "" {
		if !strings.Contains(group, "/") {
			group = ns + "/" + group
		}
		return slices.Contains(d.Groups, group)
	}
	return true
}

// addEntries is POST /entries: the entries go to the manual source of the
// list, which is created (global, or the source) when missing.
func (s *Server) addEntries(ctx context.Context, in *entriesAddIn) (*entriesOut, error) {
	b := in.Body
	ns := b.Namespace
	if ns == "" {
		ns = "default"
	}
	name := b.List
	if name == "" {
		name = DefaultDenyList
		if b.Action == "allow" {
			name = DefaultAllowList
		}
	}
	ne, e := s.prepareEntries(ctx, ns, b.DomainEntriesCreate)
	if e != nil {
		return nil, e
	}
	var lastErr error
	for range writeAttempts {
		obj, err := s.deps.Store.Get(ctx, kindBlockList, ns, name)
		created := errors.Is(err, store.ErrNotFound)
		switch {
		case created:
			obj = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": kindBlockList,
				"metadata": map[string]any{"namespace": ns, "name": name},
				"spec":     map[string]any{"mode": b.Action, "sources": []any{}}}}
		case err != nil:
			return nil, fromError(err)
		case listAction(obj) != b.Action:
			return nil, newErr(http.StatusBadRequest, KeyInvalid, "BlockList "+ns+"/"+name+" is a "+listAction(obj)+" list, not a "+b.Action+" list",
				"name a "+b.Action+" list in list, or leave list empty for the default ("+DefaultDenyList+" or "+DefaultAllowList+")")
		}
		srcs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
		idx := -1
		for i, v := range srcs {
			if m, ok := v.(map[string]any); ok && m["name"] == ManualSource {
				idx = i
			}
		}
		if idx < 0 {
			srcs = append(srcs, map[string]any{"name": ManualSource})
			idx = len(srcs) - 1
		}
		m, _ := srcs[idx].(map[string]any)
		addStructured(m, ne, b.DomainEntriesCreate)
		srcs[idx] = m
		if err := unstructured.SetNestedSlice(obj.Object, srcs, "spec", "sources"); err != nil {
			return nil, fromError(err)
		}
		opts := store.ApplyOptions{Manager: store.ManagerAPI}
		if !created {
			opts.ResourceVersion = obj.GetResourceVersion()
		}
		res, err := s.deps.Store.Apply(ctx, obj, opts)
		if err == nil {
			auditObject(ctx, "entries-add", kindBlockList, ns, name, string(res.Result))
			page, err := s.entriesPage(ctx, res.Object, ManualSource, &entriesListIn{})
			if err != nil {
				return nil, err
			}
			return &entriesOut{Body: page}, nil
		}
		lastErr = err
		if !(errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict)) {
			break
		}
	}
	auditObject(ctx, "entries-add", kindBlockList, ns, name, "error")
	if errors.Is(lastErr, store.ErrPrecondition) {
		return nil, newErr(http.StatusConflict, KeyConflict, "the block list kept changing; every attempt lost", "retry")
	}
	return nil, fromError(lastErr)
}

// addStructured appends the values not yet present (same type and groups)
// to a source's entries.
// newEntries is what both entry-adding routes check and stamp: the groups
// resolved, the values canonical for their type, who adds them and when.
type newEntries struct {
	groups   []string
	typ      string
	values   []string
	who, now string
}

func (s *Server) prepareEntries(ctx context.Context, ns string, b DomainEntriesCreate) (newEntries, *Error) {
	groups, e := s.entryGroups(ctx, ns, b.Groups)
	if e != nil {
		return newEntries{}, e
	}
	ne := newEntries{groups: groups, typ: b.Type, values: make([]string, 0, len(b.Values)), now: s.clock().UTC().Format(time.RFC3339)}
	if ne.typ == "" {
		ne.typ = "exact"
	}
	for _, v := range b.Values {
		c, e := canonicalEntry(ne.typ, v)
		if e != nil {
			return newEntries{}, e
		}
		ne.values = append(ne.values, c)
	}
	if p := state(ctx).principal; p != nil {
		ne.who = p.Name
		if len(ne.who) > 300 {
			ne.who = ne.who[:300]
		}
	}
	return ne, nil
}

func addStructured(m map[string]any, ne newEntries, b DomainEntriesCreate) {
	values, typ, groups, who, now := ne.values, ne.typ, ne.groups, ne.who, ne.now
	ents, _ := m["entries"].([]any)
	have := map[string]bool{}
	for _, v := range ents {
		e, _ := v.(map[string]any)
		val, _ := e["value"].(string)
		t, _ := e["type"].(string)
		have[structuredID(t, val, strList(e["groups"]))] = true
	}
	for _, v := range values {
		id := structuredID(typ, v, groups)
		if have[id] {
			continue
		}
		have[id] = true
		e := map[string]any{"value": v, "origin": "api", "created": now, "modified": now}
		if typ != "exact" {
			e["type"] = typ
		}
		if b.Enabled != nil && !*b.Enabled {
			e["enabled"] = false
		}
		if b.Comment != "" {
			e["comment"] = b.Comment
		}
		if who != "" {
			e["createdBy"] = who
		}
		if len(groups) > 0 {
			e["groups"] = toAny(groups)
		}
		ents = append(ents, e)
	}
	m["entries"] = ents
}
