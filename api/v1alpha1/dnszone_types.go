package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNSZone declares a zone the service answers for. The zone's DNS name is
// spec.zoneName when set, else metadata.name; the default zone "." (the root zone)
// is the object named "root" whose spec.zoneName is ".".
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=service-dns,shortName=zone;zones;dnszone
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'root' || (has(self.spec) && has(self.spec.zoneName) && self.spec.zoneName == '.')",message="the DNSZone named root is the root zone: spec.zoneName must be \".\""
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.zoneName) || !(self.spec.zoneName in ['.']) || self.metadata.name == 'root'",message="only the DNSZone named root may have spec.zoneName \".\""
// +kubebuilder:printcolumn:name="TYPE",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="SERIAL",type=integer,JSONPath=`.status.serial`
// +kubebuilder:printcolumn:name="RECORDS",type=integer,JSONPath=`.status.records`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type DNSZone struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DNSZoneSpec   `json:"spec,omitempty"`
	Status DNSZoneStatus `json:"status,omitempty"`
}

// DNSZoneSpec describes one zone.
// +kubebuilder:validation:XValidation:rule="self.type != 'forward' || has(self.forward)",message="a forward zone needs spec.forward.upstreamGroup",fieldPath=".forward"
// +kubebuilder:validation:XValidation:rule="has(self.zoneName) == has(oldSelf.zoneName) && (!has(self.zoneName) || self.zoneName == oldSelf.zoneName)",message="spec.zoneName is immutable",fieldPath=".zoneName"
type DNSZoneSpec struct {
	// ZoneName is the DNS name of the zone (for example "example.com" or "." for the
	// default zone). Empty means metadata.name. A trailing dot is optional.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\.|([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?)$`
	ZoneName string `json:"zoneName,omitempty"`

	// Type is primary (answered from DNSRecordSet objects) or forward (every name
	// under the zone is sent to spec.forward.upstreamGroup and never answered locally).
	// +optional
	// +kubebuilder:default=primary
	// +kubebuilder:validation:Enum=primary;forward
	Type string `json:"type,omitempty"`

	// DefaultTTL applies to records that set no recordTTL, in seconds.
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	DefaultTTL *int64 `json:"defaultTTL,omitempty"`

	// NameServers are the host names of the zone's NS records at the apex. Empty
	// means one name server, "ns.<zone>.". Glue comes from A/AAAA records in the zone.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	NameServers []string `json:"nameServers,omitempty"`

	// SOA holds the fields of the zone's SOA record; every field has a default.
	// +optional
	SOA *SOA `json:"soa,omitempty"`

	// QueryAccess restricts who may query the zone. Empty means everyone.
	// +optional
	QueryAccess *QueryAccess `json:"queryAccess,omitempty"`

	// Forward names the upstream group of a forward zone.
	// +optional
	Forward *ForwardZone `json:"forward,omitempty"`

	// DNSSEC holds DNSSEC settings. Signing is not supported in this release line.
	// +optional
	DNSSEC *ZoneDNSSEC `json:"dnssec,omitempty"`

	// Policy holds transfer policy of the zone.
	// +optional
	Policy *ZonePolicy `json:"policy,omitempty"`

	// RecordSetNamespaces says which namespaces may attach DNSRecordSets to the
	// zone (like Gateway API's allowedRoutes). A record set from any other
	// namespace is not served and shows Ready=False, reason NamespaceNotAllowed.
	// Omitted means the namespace "default" only: where the REST API writes
	// record sets and where the SQLite store keeps them.
	// +optional
	// +kubebuilder:default={from: "Names", names: {"default"}}
	RecordSetNamespaces *RecordSetNamespaces `json:"recordSetNamespaces,omitempty"`
}

// Values of RecordSetNamespaces.From.
const (
	NamespacesFromAll   = "All"
	NamespacesFromNames = "Names"
)

// DefaultRecordSetNamespace is the one namespace a zone without
// spec.recordSetNamespaces accepts record sets from.
const DefaultRecordSetNamespace = "default"

// RecordSetNamespaces names the namespaces whose DNSRecordSets a zone accepts.
// There is no label selector: matching one would need every data-plane pod to
// watch Namespace objects cluster-wide, and a tenant who may label its own
// namespace could then select itself into a zone.
// +kubebuilder:validation:XValidation:rule="self.from != 'All' || !has(self.names) || size(self.names) == 0",message="names is only used with from: Names",fieldPath=".names"
type RecordSetNamespaces struct {
	// From is All (record sets of every namespace) or Names (only the
	// namespaces listed in names; none when names is empty).
	// +optional
	// +kubebuilder:default=Names
	// +kubebuilder:validation:Enum=All;Names
	From string `json:"from,omitempty"`
	// Names are the namespaces allowed with from: Names.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Names []string `json:"names,omitempty"`
}

// Allows reports whether record sets of namespace ns may attach to the zone.
// A nil receiver is the default (the namespace "default" only).
func (r *RecordSetNamespaces) Allows(ns string) bool {
	if r == nil {
		return ns == DefaultRecordSetNamespace
	}
	switch r.From {
	case NamespacesFromAll:
		return true
	case NamespacesFromNames, "":
		for _, n := range r.Names {
			if n == ns {
				return true
			}
		}
	}
	return false
}

// SOA is the start of authority of a zone. Times are in seconds.
type SOA struct {
	// MName is the primary name server; empty means the first of spec.nameServers.
	// +optional
	MName string `json:"mname,omitempty"`
	// RName is the mailbox of the zone's administrator in DNS form; empty means
	// "hostmaster.<zone>.".
	// +optional
	RName string `json:"rname,omitempty"`
	// Serial is the zone's serial. Zero (the default) lets the service derive it
	// from the zone's content version, so that it grows with every change.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	Serial int64 `json:"serial,omitempty"`
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Refresh int64 `json:"refresh,omitempty"`
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Retry int64 `json:"retry,omitempty"`
	// +optional
	// +kubebuilder:default=604800
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Expire int64 `json:"expire,omitempty"`
	// Minimum is the negative-caching TTL (RFC 2308).
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Minimum int64 `json:"minimum,omitempty"`
	// TTL of the SOA record itself; empty means the zone's defaultTTL.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	TTL *int64 `json:"ttl,omitempty"`
}

// QueryAccess lists who may query a zone. A query that matches neither list is
// answered REFUSED. Both empty means everyone may query.
type QueryAccess struct {
	// CIDRs of clients allowed to query (single addresses are /32 or /128).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	AllowCIDRs []string `json:"allowCIDRs,omitempty"`
	// ClientGroups (names of ClientGroup objects, "namespace/name" or a name in any
	// namespace) allowed to query.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	ClientGroups []string `json:"clientGroups,omitempty"`
}

// ForwardZone sends every name under the zone to an upstream group.
type ForwardZone struct {
	// UpstreamGroup is a key of the upstreams.groups setting.
	// +kubebuilder:validation:MinLength=1
	UpstreamGroup string `json:"upstreamGroup"`
}

// ZoneDNSSEC holds DNSSEC settings of a zone.
type ZoneDNSSEC struct {
	// Validate asks the resolver to validate answers of a forward zone. Accepted
	// and reported; validation arrives with DNSSEC support (planned 1.0).
	// +optional
	Validate bool `json:"validate,omitempty"`
}

// ZonePolicy holds zone transfer policy.
type ZonePolicy struct {
	// TransferTSIGKeyRefs names tsigKeys (node setting) allowed to transfer the zone
	// (AXFR/IXFR). Empty means transfers are refused.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	TransferTSIGKeyRefs []string `json:"transferTSIGKeyRefs,omitempty"`
}

// DNSZoneStatus is written by the zone reconciler.
type DNSZoneStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Serial is the serial the zone is served with.
	// +optional
	Serial int64 `json:"serial,omitempty"`
	// SerialDigest identifies the content Serial was assigned to (the zone's
	// generation and its record sets' UIDs and generations): while the content
	// matches, every data-plane pod serves Serial; a change gets a larger one.
	// +optional
	SerialDigest string `json:"serialDigest,omitempty"`
	// RecordSets counts the DNSRecordSet objects referencing the zone.
	// +optional
	RecordSets int64 `json:"recordSets,omitempty"`
	// Records counts the records served in the zone.
	// +optional
	Records int64 `json:"records,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// DNSZoneList is a list of DNSZone.
type DNSZoneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DNSZone `json:"items"`
}
