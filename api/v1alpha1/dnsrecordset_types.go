package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNSRecordSet holds records that belong to one zone. Its endpoint shape follows
// external-dns's DNSEndpoint, so external-dns sources can write it unchanged.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=service-dns,shortName=rrset;rrsets;dnsrecordset
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="ZONE",type=string,JSONPath=`.spec.zoneRef.name`
// +kubebuilder:printcolumn:name="NAMES",type=integer,JSONPath=`.status.names`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type DNSRecordSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DNSRecordSetSpec   `json:"spec"`
	Status DNSRecordSetStatus `json:"status,omitempty"`
}

// DNSRecordSetSpec lists the endpoints of one zone.
type DNSRecordSetSpec struct {
	// ZoneRef names the DNSZone the records belong to. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.zoneRef is immutable"
	ZoneRef ZoneRef `json:"zoneRef"`

	// Endpoints are the records, one record type of one name each.
	// +kubebuilder:validation:MaxItems=1000
	Endpoints []Endpoint `json:"endpoints"`
}

// ZoneRef points at a DNSZone. DNSZone is cluster-scoped, so namespace is kept
// for compatibility and ignored.
type ZoneRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Endpoint is one record type at one name with its targets. The service's
// API checks every target with the compile step's parser before it stores a
// record set; the rules here are what the apiserver can check within its CEL
// cost budget (for kubectl): the type is known, the name has no empty label.
// Targets (A/AAAA addresses, MX preferences, ...) are not checked here: a CEL
// rule over 1000 endpoints of unbounded targets exceeds the budget. For
// objects written past the service's API the compile step reports them
// (Ready=False, InvalidRecords).
// +kubebuilder:validation:XValidation:rule="self.recordType in ['A', 'AAAA', 'AFSDB', 'AMTRELAY', 'APL', 'ATMA', 'AVC', 'CAA', 'CDNSKEY', 'CDS', 'CERT', 'CNAME', 'CSYNC', 'DHCID', 'DLV', 'DNAME', 'DNSKEY', 'DS', 'EID', 'EUI48', 'EUI64', 'GID', 'GPOS', 'HINFO', 'HIP', 'HTTPS', 'IPSECKEY', 'ISDN', 'KEY', 'KX', 'L32', 'L64', 'LOC', 'LP', 'MB', 'MD', 'MF', 'MG', 'MINFO', 'MR', 'MX', 'NAPTR', 'NID', 'NIMLOC', 'NINFO', 'NS', 'NSEC', 'NSEC3', 'NSEC3PARAM', 'NULL', 'NXNAME', 'NXT', 'OPENPGPKEY', 'PTR', 'PX', 'RESINFO', 'RKEY', 'RP', 'RRSIG', 'RT', 'SIG', 'SMIMEA', 'SPF', 'SRV', 'SSHFP', 'SVCB', 'TA', 'TALINK', 'TLSA', 'TXT', 'UID', 'UINFO', 'UNSPEC', 'URI', 'X25', 'ZONEMD'] || self.recordType.matches('^TYPE[0-9]+$')",message="unknown record type; expected a type such as A, AAAA, CNAME, MX, TXT, SRV, CAA, NS, PTR or TYPEnnn (RFC 3597)",fieldPath=".recordType"
// +kubebuilder:validation:XValidation:rule="self.dnsName == '.' || !(self.dnsName.startsWith('.') || self.dnsName.contains('..'))",message="the name has an empty label; expected dot-separated labels, e.g. www, @ for the apex, or www.example.com.",fieldPath=".dnsName"
// +kubebuilder:validation:XValidation:rule="!(self.recordType in ['CNAME', 'DNAME']) || size(self.targets) == 1",message="a CNAME or DNAME record has exactly one target",fieldPath=".targets"
// +kubebuilder:validation:XValidation:rule="self.recordType != 'SOA'",message="SOA comes from the DNSZone's spec.soa",fieldPath=".recordType"
type Endpoint struct {
	// DNSName is the owner name, absolute ("www.example.com") or relative to the
	// zone ("www", "@" for the apex); "*" labels make wildcards. No spaces.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	DNSName string `json:"dnsName"`
	// RecordType is a type mnemonic (A, AAAA, MX, ...) or TYPEnnn (RFC 3597).
	// +kubebuilder:validation:Pattern=`^([A-Z0-9]+|TYPE[0-9]+)$`
	// +kubebuilder:validation:MaxLength=16
	RecordType string `json:"recordType"`
	// Targets are the record data in presentation format, one record each.
	// +kubebuilder:validation:MinItems=1
	Targets []string `json:"targets"`
	// RecordTTL in seconds; the zone's defaultTTL applies when omitted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	RecordTTL *int64 `json:"recordTTL,omitempty"`
	// +optional
	SetIdentifier string `json:"setIdentifier,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	ProviderSpecific []ProviderSpecificProperty `json:"providerSpecific,omitempty"`
	// Service holds the service's own extensions of an endpoint.
	// +optional
	Service *EndpointExtension `json:"service,omitempty"`
}

// ProviderSpecificProperty is a name/value pair kept for external-dns.
type ProviderSpecificProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// EndpointExtension holds the service's extensions of an endpoint.
type EndpointExtension struct {
	// +optional
	Comment string `json:"comment,omitempty"`
	// Disabled records are kept but never served.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// ExpiresAt takes the record out of service after this time.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// View is "public" (published to sinks, never served) or the name of a
	// ClientGroup ("namespace/name", or a name in the record set's namespace) whose
	// members alone are served the record.
	// +optional
	View string `json:"view,omitempty"`
}

// DNSRecordSetStatus is written by the record set reconciler.
type DNSRecordSetStatus struct {
	// Names counts the distinct owner names of the record set.
	// +optional
	Names int `json:"names,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	Publications []Publication `json:"publications,omitempty"`
}

// Publication is the state of a record set at one publication target.
type Publication struct {
	Integration string `json:"integration"`
	// +optional
	Message string `json:"message,omitempty"`
	// +kubebuilder:validation:Enum=Accepted;Programmed;Failed
	State string `json:"state"`
}

// +kubebuilder:object:root=true

// DNSRecordSetList is a list of DNSRecordSet.
type DNSRecordSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DNSRecordSet `json:"items"`
}
