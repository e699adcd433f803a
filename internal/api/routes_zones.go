package api

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/store"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ZoneParams name the zone of a /zones route.
type ZoneParams struct {
	Zone string `path:"zone" maxLength:"253" doc:"DNSZone object name"`
}

type deleteZoneIn struct {
	ZoneParams
	DryRun bool `query:"dryRun" doc:"count what would be deleted"`
}

// ZoneDeleteResult counts what a zone delete removed (or would remove).
type ZoneDeleteResult struct {
	Zone       string  `json:"zone"`
	DryRun     bool    `json:"dryRun"`
	RecordSets int     `json:"recordSets"`
	Records    int     `json:"records"`
	TookMS     float64 `json:"took_ms"`
}

func (z *ZoneDeleteResult) setTook(ms float64) { z.TookMS = ms }

type deleteZoneOut struct{ Body *ZoneDeleteResult }

// RecordsRequest adds records to a zone.
type RecordsRequest struct {
	Name          string   `json:"name" minLength:"1" maxLength:"253" doc:"relative to the zone, @ for the apex, or absolute with a trailing dot"`
	Type          string   `json:"type" pattern:"^([A-Z0-9]+|TYPE[0-9]+)$" maxLength:"16"`
	Targets       []string `json:"targets" minItems:"1" maxItems:"1000"`
	TTL           *int64   `json:"ttl,omitempty" minimum:"0" maximum:"2147483647"`
	Comment       string   `json:"comment,omitempty" maxLength:"500"`
	RecordSet     string   `json:"recordSet,omitempty" maxLength:"253" doc:"default api-<zone>"`
	Namespace     string   `json:"namespace,omitempty" maxLength:"253" doc:"default default"`
	SetIdentifier string   `json:"setIdentifier,omitempty" maxLength:"253"`
}

type addRecordsIn struct {
	ZoneParams
	Body RecordsRequest
}

type removeRecordsIn struct {
	ZoneParams
	Name          string `query:"name" required:"true" maxLength:"253"`
	Type          string `query:"type" required:"true" maxLength:"16"`
	Target        string `query:"target" maxLength:"1024" doc:"remove only this target"`
	RecordSet     string `query:"recordSet" maxLength:"253"`
	Namespace     string `query:"namespace" maxLength:"253"`
	SetIdentifier string `query:"setIdentifier" maxLength:"253"`
}

type recordsOut struct{ Body *ApplyResult }

type exportOut struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

type importIn struct {
	ZoneParams
	Namespace  string `query:"namespace" maxLength:"253"`
	RecordSet  string `query:"recordSet" maxLength:"240" doc:"default import-<zone>; a zone over 1000 names and types continues in <recordSet>-2, -3, ..."`
	Origin     string `query:"origin" maxLength:"254" doc:"DNS name of the zone: creates the DNSZone (named by the path) when it is missing, with the file's SOA and apex NS; needs dnszones.write"`
	UpdateZone bool   `query:"updateZone" doc:"the file's SOA, apex NS and NS TTL replace the existing zone's spec.soa, spec.nameServers and spec.defaultTTL; needs dnszones.write"`
	DryRun     bool   `query:"dryRun" doc:"report what the import would do and store nothing"`
	// ContentType is checked by importZone: text/dns (RFC 4027) or text/plain.
	ContentType string `header:"Content-Type" doc:"text/dns (RFC 4027) or text/plain"`
	RawBody     []byte `contentType:"text/dns"`
}

// maxZoneFileBody bounds an import: room for the 100,000 records one import
// may hold (authority.MaxZoneFileRecords) at about 80 bytes each, split
// across record sets of at most 1000 names and types.
const maxZoneFileBody = 8 << 20

// zoneFileMedia refuses an import body that does not say it is a zone file,
// with the spec's error body (415).
func zoneFileMedia(ct string) error {
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "text/dns" || mt == "text/plain") {
		return nil
	}
	return newErr(http.StatusUnsupportedMediaType, KeyInvalid,
		fmt.Sprintf("Content-Type %q is not a zone file", ct), "send the zone file with Content-Type: text/dns (RFC 4027) or text/plain")
}

func (s *Server) registerZoneRoutes() {
	tags := []string{"zones"}
	register(s, huma.Operation{OperationID: "zone-delete", Method: http.MethodDelete, Path: "/zones/{zone}", Summary: "Delete a zone and its record sets", Tags: tags,
		Errors: []int{http.StatusNotFound, http.StatusConflict}}, zonePerm("dnszones.delete", "zone"), s.deleteZone)
	register(s, huma.Operation{OperationID: "zone-records-add", Method: http.MethodPost, Path: "/zones/{zone}/records", Summary: "Add records", Tags: tags,
		Errors: []int{http.StatusNotFound, http.StatusConflict}}, zonePerm("records.write", "zone"), s.addRecords)
	register(s, huma.Operation{OperationID: "zone-records-remove", Method: http.MethodDelete, Path: "/zones/{zone}/records", Summary: "Remove records", Tags: tags,
		Errors: []int{http.StatusNotFound, http.StatusConflict}}, zonePerm("records.write", "zone"), s.removeRecords)
	register(s, huma.Operation{OperationID: "zone-export", Method: http.MethodGet, Path: "/zones/{zone}/export", Summary: "Export as a zone file (text/dns)", Tags: tags,
		Errors: []int{http.StatusNotFound, http.StatusConflict}, Responses: map[string]*huma.Response{"200": {Description: "zone file", Content: map[string]*huma.MediaType{"text/dns": {Schema: &huma.Schema{Type: "string"}}}}}},
		zonePerm("records.read", "zone"), s.exportZone)
	register(s, huma.Operation{OperationID: "zone-import", Method: http.MethodPost, Path: "/zones/{zone}/import", Summary: "Import a zone file (text/dns): SOA and NS into the zone, records into import record sets", Tags: tags,
		MaxBodyBytes: maxZoneFileBody, Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}},
		zonePerm("records.write", "zone"), s.importZone)
}

func (s *Server) deleteZone(ctx context.Context, in *deleteZoneIn) (*deleteZoneOut, error) {
	res, err := s.deps.Store.DeleteZone(ctx, in.Zone, store.DeleteZoneOptions{Manager: store.ManagerAPI, DryRun: in.DryRun})
	if !in.DryRun {
		r := "deleted"
		if err != nil {
			r = "error"
		}
		auditObject(ctx, "delete-zone", store.KindDNSZone, "", in.Zone, r)
	}
	if err != nil {
		return nil, fromError(err)
	}
	return &deleteZoneOut{Body: &ZoneDeleteResult{Zone: in.Zone, DryRun: in.DryRun, RecordSets: res.RecordSets, Records: res.Records}}, nil
}

// zoneDomain returns the DNS name of a zone object.
func (s *Server) zoneDomain(ctx context.Context, zone string) (string, *unstructured.Unstructured, error) {
	z, err := s.deps.Store.Get(ctx, store.KindDNSZone, "", zone)
	if err != nil {
		return "", nil, err
	}
	name, _, _ := unstructured.NestedString(z.Object, "spec", "zoneName")
	if name == "" {
		name = zone
		if zone == store.DefaultZoneName {
			name = "."
		}
	}
	return strings.TrimSuffix(strings.ToLower(name), "."), z, nil
}

// absName resolves a record name relative to the zone.
func absName(name, domain string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	switch {
	case name == "@" || name == "":
		return domain
	case strings.HasSuffix(name, "."):
		return strings.TrimSuffix(name, ".")
	case domain == "":
		return name
	}
	return name + "." + domain
}

// mutateRecordSet re-reads and re-applies on write races; only when every
// attempt loses is the answer 409.
func (s *Server) mutateRecordSet(ctx context.Context, zone, ns, name string, create bool, fn func(eps []any) ([]any, error)) (*ApplyResult, error) {
	var lastErr error
	for range writeAttempts {
		obj, err := s.deps.Store.Get(ctx, store.KindDNSRecordSet, ns, name)
		rv := ""
		switch {
		case err == nil:
			if z, _, _ := unstructured.NestedString(obj.Object, "spec", "zoneRef", "name"); z != zone {
				return nil, errInvalid("recordSet: %s/%s belongs to zone %q", ns, name, z)
			}
			rv = obj.GetResourceVersion()
		case errors.Is(err, store.ErrNotFound) && create:
			obj = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "service.io/v1alpha1", "kind": store.KindDNSRecordSet,
				"metadata": map[string]any{"name": name, "namespace": ns},
				"spec":     map[string]any{"zoneRef": map[string]any{"name": zone}, "endpoints": []any{}},
			}}
		default:
			return nil, fromError(err)
		}
		eps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
		next, err := fn(eps)
		if err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedSlice(obj.Object, next, "spec", "endpoints"); err != nil {
			return nil, fromError(err)
		}
		// The same checks as apply: the admitter (in Store.Apply) and the
		// record set against its zone here.
		notes, e := s.checkContext(ctx, obj, nil)
		if e != nil {
			return nil, e
		}
		res, err := s.deps.Store.Apply(ctx, obj, store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: rv})
		if err == nil {
			auditObject(ctx, "records", store.KindDNSRecordSet, ns, name, string(res.Result))
			return &ApplyResult{Kind: store.KindDNSRecordSet, Name: name, Namespace: ns, Result: string(res.Result), ResourceVersion: res.ResourceVersion, Warnings: notes}, nil
		}
		lastErr = err
		if !errors.Is(err, store.ErrPrecondition) && !errors.Is(err, store.ErrConflict) {
			break
		}
	}
	auditObject(ctx, "records", store.KindDNSRecordSet, ns, name, "error")
	if errors.Is(lastErr, store.ErrPrecondition) || errors.Is(lastErr, store.ErrConflict) {
		return nil, newErr(http.StatusConflict, KeyConflict, "the record set kept changing; every attempt lost", "retry")
	}
	return nil, fromError(lastErr)
}

func strList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func toAny(l []string) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

func sameEndpoint(ep map[string]any, name, typ, setID string) bool {
	n, _ := ep["dnsName"].(string)
	t, _ := ep["recordType"].(string)
	id, _ := ep["setIdentifier"].(string)
	return strings.EqualFold(strings.TrimSuffix(n, "."), name) && t == typ && id == setID
}

func defaults(ns, rs, zone, prefix string) (string, string) {
	if ns == "" {
		ns = "default"
	}
	if rs == "" {
		rs = prefix + zone
	}
	return ns, rs
}

func (s *Server) addRecords(ctx context.Context, in *addRecordsIn) (*recordsOut, error) {
	domain, _, err := s.zoneDomain(ctx, in.Zone)
	if err != nil {
		return nil, fromError(err)
	}
	b := in.Body
	name := absName(b.Name, domain)
	ns, rs := defaults(b.Namespace, b.RecordSet, in.Zone, "api-")
	res, err := s.mutateRecordSet(ctx, in.Zone, ns, rs, true, func(eps []any) ([]any, error) {
		for _, e := range eps {
			ep, ok := e.(map[string]any)
			if ok && sameEndpoint(ep, name, b.Type, b.SetIdentifier) {
				ts := strList(ep["targets"])
				for _, t := range b.Targets {
					if !slices.Contains(ts, t) {
						ts = append(ts, t)
					}
				}
				ep["targets"] = toAny(ts)
				if b.TTL != nil {
					ep["recordTTL"] = *b.TTL
				}
				return eps, nil
			}
		}
		ep := map[string]any{"dnsName": name, "recordType": b.Type, "targets": toAny(b.Targets)}
		if b.TTL != nil {
			ep["recordTTL"] = *b.TTL
		}
		if b.SetIdentifier != "" {
			ep["setIdentifier"] = b.SetIdentifier
		}
		if b.Comment != "" {
			ep["service"] = map[string]any{"comment": b.Comment}
		}
		return append(eps, ep), nil
	})
	if err != nil {
		return nil, err
	}
	return &recordsOut{Body: res}, nil
}

func (s *Server) removeRecords(ctx context.Context, in *removeRecordsIn) (*recordsOut, error) {
	domain, _, err := s.zoneDomain(ctx, in.Zone)
	if err != nil {
		return nil, fromError(err)
	}
	name := absName(in.Name, domain)
	ns, rs := defaults(in.Namespace, in.RecordSet, in.Zone, "api-")
	res, err := s.mutateRecordSet(ctx, in.Zone, ns, rs, false, func(eps []any) ([]any, error) {
		out := make([]any, 0, len(eps))
		found := false
		for _, e := range eps {
			ep, ok := e.(map[string]any)
			if !ok || !sameEndpoint(ep, name, in.Type, in.SetIdentifier) {
				out = append(out, e)
				continue
			}
			found = true
			if in.Target != "" {
				ts := slices.DeleteFunc(strList(ep["targets"]), func(t string) bool { return t == in.Target })
				if len(ts) > 0 {
					ep["targets"] = toAny(ts)
					out = append(out, ep)
				}
			}
		}
		if !found {
			return nil, errNotFound("record " + name + " " + in.Type)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return &recordsOut{Body: res}, nil
}
