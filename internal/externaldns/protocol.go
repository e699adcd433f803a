// Package externaldns is the external-dns webhook provider: external-dns
// (sigs.k8s.io/external-dns, --provider=webhook) reads and writes the
// service's DNSRecordSet objects through it. The wire shapes below are
// external-dns's own (endpoint.Endpoint, plan.Changes, endpoint.DomainFilter
// of v0.21), copied rather than imported: the service does not depend on
// external-dns's module and its cloud SDKs.
package externaldns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// MediaType is the only content type of the webhook protocol, version 1.
const MediaType = "application/external.dns.webhook+json;version=1"

// MaxBodyBytes bounds every request body; external-dns caps its own at
// 32 MiB, so a larger body is not from external-dns.
const MaxBodyBytes = 32 << 20

// Endpoint is external-dns's endpoint.Endpoint as it travels as JSON.
type Endpoint struct {
	DNSName          string             `json:"dnsName,omitempty"`
	Targets          []string           `json:"targets,omitempty"`
	RecordType       string             `json:"recordType,omitempty"`
	SetIdentifier    string             `json:"setIdentifier,omitempty"`
	RecordTTL        int64              `json:"recordTTL,omitempty"`
	Labels           map[string]string  `json:"labels,omitempty"`
	ProviderSpecific []ProviderProperty `json:"providerSpecific,omitempty"`
}

// ProviderProperty is external-dns's endpoint.ProviderSpecificProperty.
type ProviderProperty struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// Changes is external-dns's plan.Changes: POST /records.
type Changes struct {
	Create    []*Endpoint `json:"create,omitempty"`
	UpdateOld []*Endpoint `json:"updateOld,omitempty"`
	UpdateNew []*Endpoint `json:"updateNew,omitempty"`
	Delete    []*Endpoint `json:"delete,omitempty"`
}

// DomainFilter is the negotiation answer (endpoint.DomainFilter's JSON):
// the zones external-dns may send.
type DomainFilter struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// Limits of one endpoint, matching what a DNSRecordSet endpoint may hold.
const (
	maxNameLen   = 255
	maxTargets   = 1000
	maxEndpoints = 100000
)

var recordTypeRE = regexp.MustCompile(`^([A-Z0-9]+|TYPE[0-9]+)$`)

// errTooLarge is a body over MaxBodyBytes.
var errTooLarge = errors.New("request body over 32 MiB")

// decodeJSON reads one JSON value of at most limit bytes from r into v and
// refuses trailing data.
func decodeJSON(r io.Reader, limit int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		return errTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("decode JSON: data after the first value")
	}
	return nil
}

// DecodeEndpoints reads the body of POST /adjustendpoints: a JSON array of
// endpoints, each checked (see checkEndpoint).
func DecodeEndpoints(r io.Reader, limit int64) ([]*Endpoint, error) {
	var eps []*Endpoint
	if err := decodeJSON(r, limit, &eps); err != nil {
		return nil, err
	}
	if len(eps) > maxEndpoints {
		return nil, fmt.Errorf("%d endpoints, at most %d", len(eps), maxEndpoints)
	}
	for i, ep := range eps {
		if err := checkEndpoint(ep, true); err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
	}
	return eps, nil
}

// DecodeChanges reads the body of POST /records. Deleted and old endpoints
// need no targets (a delete names the record by name, type and set
// identifier); created and new ones do.
func DecodeChanges(r io.Reader, limit int64) (*Changes, error) {
	var ch Changes
	if err := decodeJSON(r, limit, &ch); err != nil {
		return nil, err
	}
	if n := len(ch.Create) + len(ch.UpdateOld) + len(ch.UpdateNew) + len(ch.Delete); n > maxEndpoints {
		return nil, fmt.Errorf("%d endpoints, at most %d", n, maxEndpoints)
	}
	if len(ch.UpdateOld) != len(ch.UpdateNew) {
		return nil, fmt.Errorf("updateOld has %d endpoints, updateNew %d: they pair up", len(ch.UpdateOld), len(ch.UpdateNew))
	}
	for _, l := range []struct {
		name    string
		eps     []*Endpoint
		targets bool
	}{{"create", ch.Create, true}, {"updateOld", ch.UpdateOld, false}, {"updateNew", ch.UpdateNew, true}, {"delete", ch.Delete, false}} {
		for i, ep := range l.eps {
			if err := checkEndpoint(ep, l.targets); err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", l.name, i, err)
			}
		}
	}
	return &ch, nil
}

// checkEndpoint refuses what no DNSRecordSet endpoint can hold; record data
// is checked later against the zone by the compile step's parser.
func checkEndpoint(ep *Endpoint, needTargets bool) error {
	if ep == nil {
		return errors.New("null endpoint")
	}
	if ep.DNSName == "" {
		return errors.New("dnsName is empty")
	}
	if len(ep.DNSName) > maxNameLen {
		return fmt.Errorf("dnsName is %d characters, at most %d", len(ep.DNSName), maxNameLen)
	}
	if strings.ContainsAny(ep.DNSName, " \t\r\n") {
		return fmt.Errorf("dnsName %q holds white space", ep.DNSName)
	}
	if strings.HasPrefix(ep.DNSName, ".") || strings.Contains(ep.DNSName, "..") {
		return fmt.Errorf("dnsName %q has an empty label", ep.DNSName)
	}
	if len(ep.RecordType) > 16 || !recordTypeRE.MatchString(ep.RecordType) {
		return fmt.Errorf("recordType %q is not a type such as A, AAAA, CNAME, TXT or TYPE65", ep.RecordType)
	}
	if ep.RecordType == "SOA" {
		return errors.New("recordType SOA: the SOA comes from the DNSZone")
	}
	if ep.RecordTTL < 0 || ep.RecordTTL > 2147483647 {
		return fmt.Errorf("recordTTL %d is outside 0 to 2147483647", ep.RecordTTL)
	}
	if needTargets && len(ep.Targets) == 0 {
		return fmt.Errorf("%s %s has no targets", ep.DNSName, ep.RecordType)
	}
	if len(ep.Targets) > maxTargets {
		return fmt.Errorf("%s %s has %d targets, at most %d", ep.DNSName, ep.RecordType, len(ep.Targets), maxTargets)
	}
	for i, t := range ep.Targets {
		if t == "" {
			return fmt.Errorf("%s %s target %d is empty", ep.DNSName, ep.RecordType, i)
		}
	}
	return nil
}
