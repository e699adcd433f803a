package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/validation"
	"github.com/svcdns/svc/internal/zonefile"
)

// importSetAnnotation marks the record sets one import wrote (value: the
// first set's name), so that a later import of a smaller file removes the
// sets it no longer fills and never a set someone else wrote.
const importSetAnnotation = "service.io/import-set"

// ZoneImportZone says what an import did to the DNSZone.
type ZoneImportZone struct {
	Name     string `json:"name"`
	ZoneName string `json:"zoneName" doc:"the zone's DNS name, absolute"`
	// Result: created, updated or unchanged when the file's SOA and NS were
	// taken; kept when the zone exists and updateZone was not set.
	Result string `json:"result" enum:"created,updated,unchanged,kept"`
	// SOATaken and NameServersTaken say whether the file's SOA and apex NS
	// became spec.soa and spec.nameServers (false also when the file has none).
	SOATaken         bool          `json:"soaTaken"`
	NameServersTaken bool          `json:"nameServersTaken"`
	SOA              *v1alpha1.SOA `json:"soa,omitempty" doc:"the zone's spec.soa after the import (when taken)"`
	NameServers      []string      `json:"nameServers,omitempty" doc:"the file's apex NS targets"`
	NameServerTTL    *int64        `json:"nameServerTTL,omitempty" doc:"the file's apex NS TTL (spec.defaultTTL when taken)"`
	ResourceVersion  string        `json:"resourceVersion,omitempty"`
	// Notes explain choices: a serial raised so it does not go backwards, a
	// file SOA left out because the zone exists.
	Notes []string `json:"notes,omitempty"`
}

// ZoneImportResult answers POST /zones/{zone}/import. The top-level fields
// are the first record set's ApplyResult (what older clients read).
type ZoneImportResult struct {
	ApplyResult
	DryRun bool           `json:"dryRun,omitempty"`
	Zone   ZoneImportZone `json:"zone"`
	// RecordSets lists every record set written (created, updated,
	// unchanged) or removed because the file no longer fills it (deleted).
	RecordSets []ApplyResult `json:"recordSets"`
	// Endpoints counts names and types, Records their targets (SOA and apex
	// NS not included).
	Endpoints int     `json:"endpoints"`
	Records   int     `json:"records"`
	TookMS    float64 `json:"took_ms"`
}

func (r *ZoneImportResult) setTook(ms float64) { r.TookMS = ms }

type importOut struct{ Body *ZoneImportResult }

func (s *Server) exportZone(ctx context.Context, in *ZoneParams) (*exportOut, error) {
	z, err := s.deps.Store.Get(ctx, store.KindDNSZone, "", in.Zone)
	if err != nil {
		return nil, fromError(err)
	}
	var zone v1alpha1.DNSZone
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(z.Object, &zone); err != nil {
		return nil, fromError(fmt.Errorf("%w: zone %s: %v", store.ErrInvalid, in.Zone, err))
	}
	all, err := s.listAll(ctx, store.KindDNSRecordSet)
	if err != nil {
		return nil, fromError(err)
	}
	var sets []v1alpha1.DNSRecordSet
	for _, u := range all {
		if zoneOf(u) != in.Zone {
			continue
		}
		var rs v1alpha1.DNSRecordSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rs); err != nil {
			continue // not served either; the zone's status names it
		}
		sets = append(sets, rs)
	}
	body, err := zonefile.Export(zone, sets, time.Now())
	if err != nil {
		return nil, newErr(http.StatusConflict, KeyConflict, err.Error(), "only primary zones that are served can be exported; see svc describe zone "+in.Zone)
	}
	return &exportOut{ContentType: "text/dns", Body: body}, nil
}

// importPlan is what one import writes.
type importPlan struct {
	zone    *unstructured.Unstructured // nil: the zone is left alone
	zoneRes *ZoneImportZone
	sets    []*unstructured.Unstructured
	stale   []store.Key
	// sameSerial: the file's serial is the one the zone serves; if the
	// records change anyway, the serial is raised (runImport).
	sameSerial bool
}

func (s *Server) importZone(ctx context.Context, in *importIn) (*importOut, error) {
	if err := zoneFileMedia(in.ContentType); err != nil {
		return nil, err
	}
	zki, _ := s.kindFor(store.KindDNSZone)
	stored, err := s.deps.Store.Get(ctx, store.KindDNSZone, "", in.Zone)
	created := false
	var origin string
	switch {
	case err == nil:
		origin = zoneDNSName(stored)
		if in.Origin != "" && !strings.EqualFold(zonefile.Absolute(in.Origin), origin) {
			return nil, newErr(http.StatusBadRequest, KeyInvalid, fmt.Sprintf("origin: %s, but zone %s is %s", zonefile.Absolute(in.Origin), in.Zone, origin),
				"leave origin out for an existing zone, or import into another zone name")
		}
	case errors.Is(err, store.ErrNotFound) && in.Origin != "":
		o, ok := zonefile.Origin(in.Origin)
		if !ok {
			return nil, errInvalid("origin: %q is not a DNS name; write the zone's name, e.g. example.com.", in.Origin)
		}
		created, origin = true, o
		stored = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": validation.APIVersion, "kind": store.KindDNSZone,
			"metadata": map[string]any{"name": in.Zone},
			"spec":     map[string]any{"zoneName": origin},
		}}
	case errors.Is(err, store.ErrNotFound):
		return nil, newErr(http.StatusNotFound, KeyNotFound, fmt.Sprintf("DNSZone %s does not exist", in.Zone),
			"pass origin (svc import bind --origin NAME) to create it with the file's SOA and NS, or create it first")
	default:
		return nil, fromError(err)
	}
	zf, err := zonefile.Parse(origin, in.RawBody)
	if err != nil {
		return nil, errInvalid("body: %v", err)
	}
	if len(zf.Endpoints) == 0 && zf.SOA == nil && len(zf.NameServers) == 0 {
		return nil, errInvalid("body: the zone file holds no records")
	}
	if max := v1alpha1MaxNameServers; len(zf.NameServers) > max {
		return nil, errInvalid("body: %d NS records at the apex; a zone has at most %d name servers (spec.nameServers)", len(zf.NameServers), max)
	}
	ns, base := defaults(in.Namespace, in.RecordSet, in.Zone, "import-")
	plan, e := s.planImport(ctx, in, stored, created, zf, ns, base)
	if e != nil {
		return nil, e
	}
	if plan.zone != nil {
		if e := s.checkObject(ctx, zki, "write", plan.zone); e != nil {
			return nil, e
		}
	}
	res, e := s.runImport(ctx, plan, in.DryRun)
	if e != nil {
		return nil, e
	}
	res.Endpoints, res.Records = len(zf.Endpoints), zf.Records
	return &importOut{Body: res}, nil
}

// v1alpha1MaxNameServers is spec.nameServers' MaxItems.
const v1alpha1MaxNameServers = 16

func zoneDNSName(z *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(z.Object, "spec", "zoneName")
	if name == "" {
		name = z.GetName()
		if z.GetName() == store.DefaultZoneName {
			name = "."
		}
	}
	return strings.ToLower(zonefile.Absolute(name))
}

// planImport builds the zone change and the record sets of an import.
func (s *Server) planImport(ctx context.Context, in *importIn, stored *unstructured.Unstructured, created bool, zf *zonefile.Zone, ns, base string) (*importPlan, *Error) {
	chunks := zonefile.Chunks(zf.Endpoints)
	if len(chunks) > 1 && len(base) > 240 {
		return nil, errInvalid("recordSet: %q is too long to number the %d record sets the zone needs; use at most 240 characters", base, len(chunks))
	}
	zr := &ZoneImportZone{Name: in.Zone, ZoneName: zoneDNSName(stored), NameServers: zf.NameServers, NameServerTTL: zf.NameServerTTL}
	plan := &importPlan{zoneRes: zr}
	if created || in.UpdateZone {
		z := stored.DeepCopy()
		if zf.SOA != nil {
			soa := *zf.SOA
			if !created {
				note, serial, same := honourSerial(z, uint32(soa.Serial))
				if note != "" {
					soa.Serial = int64(serial)
					zr.Notes = append(zr.Notes, note)
				}
				plan.sameSerial = same
			}
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&soa)
			if err != nil {
				return nil, errInternal()
			}
			_ = unstructured.SetNestedMap(z.Object, m, "spec", "soa")
			zr.SOATaken, zr.SOA = true, &soa
		}
		if len(zf.NameServers) > 0 {
			_ = unstructured.SetNestedStringSlice(z.Object, zf.NameServers, "spec", "nameServers")
			if zf.NameServerTTL != nil {
				_ = unstructured.SetNestedField(z.Object, *zf.NameServerTTL, "spec", "defaultTTL")
			}
			zr.NameServersTaken = true
		}
		if created || zr.SOATaken || zr.NameServersTaken {
			plan.zone = z
		}
	} else if !sameZoneSettings(stored, zf) {
		zr.Notes = append(zr.Notes, fmt.Sprintf("zone %s exists: the file's SOA and NS were not applied; pass updateZone=true (svc import bind --update-zone) to take them", in.Zone))
	}
	if plan.zone == nil {
		zr.Result = "kept"
	}

	names := map[string]bool{}
	for i, chunk := range chunks {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s-%d", base, i+1)
		}
		names[name] = true
		eps := make([]any, len(chunk))
		for j, e := range chunk {
			eps[j] = e.Object()
		}
		plan.sets = append(plan.sets, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": validation.APIVersion, "kind": store.KindDNSRecordSet,
			"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{importSetAnnotation: base}},
			"spec":     map[string]any{"zoneRef": map[string]any{"name": in.Zone}, "endpoints": eps},
		}})
	}
	// Sets an earlier import of this base filled and this one does not.
	all, err := s.listAll(ctx, store.KindDNSRecordSet)
	if err != nil {
		return nil, fromError(err)
	}
	for _, rs := range all {
		if rs.GetNamespace() == ns && zoneOf(rs) == in.Zone && !names[rs.GetName()] &&
			(rs.GetAnnotations()[importSetAnnotation] == base || rs.GetName() == base) {
			plan.stale = append(plan.stale, store.KeyOf(rs))
		}
	}
	return plan, nil
}

// sameZoneSettings reports whether the zone already holds the file's SOA
// and name servers (or the file has none), so keeping them loses nothing.
func sameZoneSettings(z *unstructured.Unstructured, zf *zonefile.Zone) bool {
	if zf.SOA != nil {
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(zf.SOA)
		have, _, _ := unstructured.NestedMap(z.Object, "spec", "soa")
		if err != nil || !reflect.DeepEqual(normalizeNumbers(want), normalizeNumbers(have)) {
			return false
		}
	}
	if len(zf.NameServers) > 0 {
		have, _, _ := unstructured.NestedStringSlice(z.Object, "spec", "nameServers")
		if !slices.Equal(have, zf.NameServers) {
			return false
		}
	}
	return true
}

// normalizeNumbers turns every number of m into int64, as JSON decoding and
// the converter give different kinds.
func normalizeNumbers(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch n := v.(type) {
		case int:
			v = int64(n)
		case float64:
			v = int64(n)
		}
		out[k] = v
	}
	return out
}

// honourSerial keeps an imported serial from going backwards: the zone
// serves spec.soa.serial when set, else the serial the status writer
// recorded. A file serial older (RFC 1982) than that is raised to the served
// serial + 1, with a note; same reports a file serial equal to the served one.
func honourSerial(z *unstructured.Unstructured, file uint32) (note string, serial uint32, same bool) {
	served, _, _ := unstructured.NestedInt64(z.Object, "spec", "soa", "serial")
	if served == 0 {
		served, _, _ = unstructured.NestedInt64(z.Object, "status", "serial")
	}
	if served <= 0 || served > 1<<32-1 {
		return "", file, false
	}
	cur := uint32(served)
	if file == cur {
		return "", file, true
	}
	if zonefile.SerialNewer(file, cur) {
		return "", file, false
	}
	next := zonefile.NextSerial(cur)
	return fmt.Sprintf("the file's serial %d is older than the served %d (RFC 1982); serving %d so that secondaries take the change", file, cur, next), next, false
}

// runImport checks and writes the plan in one batch.
func (s *Server) runImport(ctx context.Context, plan *importPlan, dryRun bool) (*ZoneImportResult, *Error) {
	objs := make([]*unstructured.Unstructured, 0, len(plan.sets)+1)
	if plan.zone != nil {
		objs = append(objs, plan.zone)
	}
	objs = append(objs, plan.sets...)
	pending := func(kind, ns, name string) *unstructured.Unstructured {
		if plan.zone != nil && kind == store.KindDNSZone && name == plan.zone.GetName() {
			return plan.zone
		}
		return nil
	}
	warnings := make([][]string, len(objs))
	for i, o := range objs {
		notes, e := s.checkContext(ctx, o, pending)
		if e != nil {
			if o.GetKind() == store.KindDNSRecordSet {
				e.Detail.Message = fmt.Sprintf("record set %s: %s", o.GetName(), e.Detail.Message)
			}
			return nil, e
		}
		warnings[i] = notes
	}
	if plan.sameSerial && plan.zone != nil {
		// The file claims the served version; if its records differ from the
		// stored ones, secondaries would never see them under that serial.
		dry, err := s.deps.Store.ApplyBatch(ctx, plan.sets, plan.stale, store.ApplyOptions{Manager: store.ManagerAPI, DryRun: true})
		if err != nil {
			return nil, fromError(err)
		}
		changed := len(plan.stale) > 0
		for _, r := range dry {
			changed = changed || r.Result != store.Unchanged
		}
		if changed {
			cur, _, _ := unstructured.NestedInt64(plan.zone.Object, "spec", "soa", "serial")
			next := zonefile.NextSerial(uint32(cur))
			_ = unstructured.SetNestedField(plan.zone.Object, int64(next), "spec", "soa", "serial")
			plan.zoneRes.SOA.Serial = int64(next)
			plan.zoneRes.Notes = append(plan.zoneRes.Notes, fmt.Sprintf("the file's serial %d is the served one but the records changed; serving %d so that secondaries take the change", cur, next))
		}
	}
	results, err := s.deps.Store.ApplyBatch(ctx, objs, plan.stale, store.ApplyOptions{Manager: store.ManagerAPI, DryRun: dryRun})
	if err != nil {
		if !dryRun {
			for _, o := range objs {
				auditObject(ctx, "import", o.GetKind(), o.GetNamespace(), o.GetName(), "error")
			}
		}
		return nil, fromError(err)
	}
	out := &ZoneImportResult{DryRun: dryRun, Zone: *plan.zoneRes}
	for i, o := range objs {
		r := results[i]
		if !dryRun {
			auditObject(ctx, "import", o.GetKind(), o.GetNamespace(), o.GetName(), string(r.Result))
			s.afterWrite(o.GetKind())
		}
		if o.GetKind() == store.KindDNSZone {
			out.Zone.Result, out.Zone.ResourceVersion = string(r.Result), r.ResourceVersion
			continue
		}
		out.RecordSets = append(out.RecordSets, ApplyResult{Kind: store.KindDNSRecordSet, Name: o.GetName(), Namespace: o.GetNamespace(),
			Result: string(r.Result), ResourceVersion: r.ResourceVersion, Warnings: warnings[i]})
	}
	for _, k := range plan.stale {
		if !dryRun {
			auditObject(ctx, "import", k.Kind, k.Namespace, k.Name, "deleted")
		}
		out.RecordSets = append(out.RecordSets, ApplyResult{Kind: k.Kind, Name: k.Name, Namespace: k.Namespace, Result: "deleted"})
	}
	if len(out.RecordSets) > 0 {
		out.ApplyResult = out.RecordSets[0]
	} else {
		out.ApplyResult = ApplyResult{Kind: store.KindDNSZone, Name: out.Zone.Name, Result: out.Zone.Result, ResourceVersion: out.Zone.ResourceVersion}
	}
	return out, nil
}
