package validation

import "strings"

// pcase is one parity case: a base object of kind, edited; on update the
// stored object is the base with oldEdits and the new one has edits on top.
type pcase struct {
	name     string
	kind     string
	edits    []edit
	update   bool
	oldEdits []edit
	// status: the edits are to status, which the apiserver takes only through the
	// status subresource (kinds with one).
	status bool
	// want is the field path of the refusal ("" for a valid object); "<root>"
	// names a rule on the whole object.
	want string
	// defaults are values the admitted object must carry, by path.
	defaults map[string]any
	// localOnly skips the kube-apiserver half, with the reason.
	localOnly string
}

var (
	long501  = strings.Repeat("a", 501)
	long301  = strings.Repeat("a", 301)
	long1025 = strings.Repeat("a", 1025)
)

func parityCases() []pcase {
	return []pcase{
		// DNSZone
		{name: "zone sample", kind: "DNSZone", defaults: map[string]any{"spec.type": "primary", "spec.soa.refresh": int64(3600), "spec.soa.minimum": int64(300)}},
		{name: "zone default ttl default", kind: "DNSZone", edits: []edit{del("spec.defaultTTL")}, defaults: map[string]any{"spec.defaultTTL": int64(3600)}},
		{name: "root zone", kind: "DNSZone", edits: []edit{set("metadata.name", "root"), set("spec", map[string]any{"zoneName": "."})}},
		{name: "root zone needs zoneName dot", kind: "DNSZone", edits: []edit{set("metadata.name", "root"), set("spec", map[string]any{})}, want: "<root>"},
		{name: "zoneName dot only on root", kind: "DNSZone", edits: []edit{set("spec.zoneName", ".")}, want: "<root>"},
		{name: "zoneName pattern", kind: "DNSZone", edits: []edit{set("spec.zoneName", "bad..name")}, want: "spec.zoneName"},
		{name: "zoneName wildcard", kind: "DNSZone", edits: []edit{set("spec.zoneName", "*.example.com")}, want: "spec.zoneName"},
		{name: "zoneName max length", kind: "DNSZone", edits: []edit{set("spec.zoneName", strings.Repeat("a.", 127)+"ab")}, want: "spec.zoneName"},
		{name: "zone type enum", kind: "DNSZone", edits: []edit{set("spec.type", "secondary")}, want: "spec.type"},
		{name: "forward zone needs forward", kind: "DNSZone", edits: []edit{set("spec.type", "forward")}, want: "spec.forward"},
		{name: "forward zone", kind: "DNSZone", edits: []edit{set("spec.type", "forward"), set("spec.forward.upstreamGroup", "corp")}},
		{name: "forward upstreamGroup min length", kind: "DNSZone", edits: []edit{set("spec.type", "forward"), set("spec.forward.upstreamGroup", "")}, want: "spec.forward.upstreamGroup"},
		{name: "defaultTTL minimum", kind: "DNSZone", edits: []edit{set("spec.defaultTTL", -1)}, want: "spec.defaultTTL"},
		{name: "defaultTTL type", kind: "DNSZone", edits: []edit{set("spec.defaultTTL", "1h")}, want: "spec.defaultTTL"},
		{name: "nameServers set", kind: "DNSZone", edits: []edit{set("spec.nameServers", []any{"a.", "a."})}, want: "spec.nameServers[1]"},
		{name: "nameServers max items", kind: "DNSZone", edits: []edit{set("spec.nameServers", strs(17, "ns"))}, want: "spec.nameServers"},
		{name: "soa serial maximum", kind: "DNSZone", edits: []edit{set("spec.soa.serial", int64(4294967296))}, want: "spec.soa.serial"},
		{name: "transferTSIGKeyRefs set", kind: "DNSZone", edits: []edit{set("spec.policy.transferTSIGKeyRefs", []any{"k", "k"})}, want: "spec.policy.transferTSIGKeyRefs[1]"},
		{name: "queryAccess clientGroups max", kind: "DNSZone", edits: []edit{set("spec.queryAccess.clientGroups", strs(101, "g"))}, want: "spec.queryAccess.clientGroups"},
		{name: "zone unknown field", kind: "DNSZone", edits: []edit{set("spec.bogus", true)}, want: "spec.bogus"},
		{name: "zone unknown nested field", kind: "DNSZone", edits: []edit{set("spec.soa.bogus", 1)}, want: "spec.soa.bogus"},
		{name: "zone name dns-1123", kind: "DNSZone", edits: []edit{set("metadata.name", "Example_Com")}, want: "metadata.name"},
		{name: "zone name required", kind: "DNSZone", edits: []edit{del("metadata.name")}, want: "metadata.name", localOnly: "a client cannot send a create without a name"},
		{name: "zone namespace forbidden", kind: "DNSZone", edits: []edit{set("metadata.namespace", "default")}, want: "metadata.namespace", localOnly: "the apiserver clears the namespace of a cluster-scoped object sent to a cluster URL"},
		{name: "recordSetNamespaces default", kind: "DNSZone", defaults: map[string]any{"spec.recordSetNamespaces.from": "Names", "spec.recordSetNamespaces.names": []any{"default"}}},
		{name: "recordSetNamespaces all", kind: "DNSZone", edits: []edit{set("spec.recordSetNamespaces", map[string]any{"from": "All"})}},
		{name: "recordSetNamespaces names", kind: "DNSZone", edits: []edit{set("spec.recordSetNamespaces", map[string]any{"names": []any{"team-a", "team-b"}})}, defaults: map[string]any{"spec.recordSetNamespaces.from": "Names"}},
		{name: "recordSetNamespaces from enum", kind: "DNSZone", edits: []edit{set("spec.recordSetNamespaces.from", "Selector")}, want: "spec.recordSetNamespaces.from"},
		{name: "recordSetNamespaces names with All", kind: "DNSZone", edits: []edit{set("spec.recordSetNamespaces", map[string]any{"from": "All", "names": []any{"x"}})}, want: "spec.recordSetNamespaces.names"},
		{name: "recordSetNamespaces name pattern", kind: "DNSZone", edits: []edit{set("spec.recordSetNamespaces.names", []any{"Team A"})}, want: "spec.recordSetNamespaces.names[0]"},
		{name: "zoneName immutable", kind: "DNSZone", update: true, edits: []edit{set("spec.zoneName", "example.org")}, want: "spec.zoneName"},
		{name: "zoneName cannot be removed", kind: "DNSZone", update: true, edits: []edit{del("spec.zoneName")}, want: "spec.zoneName"},
		{name: "zone update ttl", kind: "DNSZone", update: true, edits: []edit{set("spec.defaultTTL", 60)}},
		{name: "zone status conditions map", kind: "DNSZone", status: true, edits: []edit{set("status.conditions", []any{cond("Ready"), cond("Ready")})}, want: "status.conditions[1]"},
		{name: "zone status condition required", kind: "DNSZone", status: true, edits: []edit{set("status.conditions", []any{map[string]any{"type": "Ready", "status": "True"}})}, want: "status.conditions[0].lastTransitionTime"},

		// DNSRecordSet
		{name: "rrset sample", kind: "DNSRecordSet"},
		{name: "rrset spec required", kind: "DNSRecordSet", edits: []edit{del("spec")}, want: "spec"},
		{name: "zoneRef required", kind: "DNSRecordSet", edits: []edit{del("spec.zoneRef")}, want: "spec.zoneRef"},
		{name: "zoneRef name min length", kind: "DNSRecordSet", edits: []edit{set("spec.zoneRef.name", "")}, want: "spec.zoneRef.name"},
		{name: "endpoints required", kind: "DNSRecordSet", edits: []edit{del("spec.endpoints")}, want: "spec.endpoints"},
		{name: "endpoints max items", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints", objs(1001, map[string]any{"dnsName": "a", "recordType": "A", "targets": []any{"192.0.2.1"}}))}, want: "spec.endpoints"},
		{name: "dnsName required", kind: "DNSRecordSet", edits: []edit{del("spec.endpoints[0].dnsName")}, want: "spec.endpoints[0].dnsName"},
		{name: "dnsName min length", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].dnsName", "")}, want: "spec.endpoints[0].dnsName"},
		{name: "recordType required", kind: "DNSRecordSet", edits: []edit{del("spec.endpoints[0].recordType")}, want: "spec.endpoints[0].recordType"},
		{name: "recordType pattern", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].recordType", "a")}, want: "spec.endpoints[0].recordType"},
		{name: "recordType TYPEnnn", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].recordType", "TYPE65534"), set("spec.endpoints[0].targets", []any{`\# 4 c000020a`})}},
		{name: "recordType unknown", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].recordType", "AA")}, want: "spec.endpoints[0].recordType"},
		{name: "recordType too long", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].recordType", "TYPE12345678901234")}, want: "spec.endpoints[0].recordType"},
		{name: "dnsName empty label", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].dnsName", "a..example.com")}, want: "spec.endpoints[0].dnsName"},
		{name: "dnsName leading dot", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].dnsName", ".www")}, want: "spec.endpoints[0].dnsName"},
		{name: "targets required", kind: "DNSRecordSet", edits: []edit{del("spec.endpoints[0].targets")}, want: "spec.endpoints[0].targets"},
		{name: "targets min items", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].targets", []any{})}, want: "spec.endpoints[0].targets"},
		{name: "providerSpecific value required", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].providerSpecific", []any{map[string]any{"name": "alias"}})}, want: "spec.endpoints[0].providerSpecific[0].value"},
		{name: "providerSpecific name required", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].providerSpecific", []any{map[string]any{"value": "x"}})}, want: "spec.endpoints[0].providerSpecific[0].name"},
		{name: "expiresAt date-time", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].service.expiresAt", "tomorrow")}, want: "spec.endpoints[0].service.expiresAt"},
		{name: "endpoint extension", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].service", map[string]any{"disabled": true, "expiresAt": "2030-01-01T00:00:00Z", "view": "public"})}},
		{name: "endpoint unknown field", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[1].kudurru", map[string]any{})}, want: "spec.endpoints[1].kudurru"},
		{name: "rrset namespace required", kind: "DNSRecordSet", edits: []edit{del("metadata.namespace")}, want: "metadata.namespace", localOnly: "a namespaced create always names a namespace in the URL"},
		{name: "recordTTL minimum", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].recordTTL", -5)}, want: "spec.endpoints[0].recordTTL"},
		{name: "recordTTL zero", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].recordTTL", 0)}},
		{name: "dnsName with a space", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].dnsName", "w w")}, want: "spec.endpoints[0].dnsName"},
		{name: "CNAME one target", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0]", map[string]any{"dnsName": "c", "recordType": "CNAME", "targets": []any{"a.example.", "b.example."}})}, want: "spec.endpoints[0].targets"},
		{name: "SOA endpoint", kind: "DNSRecordSet", edits: []edit{set("spec.endpoints[0].recordType", "SOA")}, want: "spec.endpoints[0].recordType"},
		{name: "zoneRef immutable", kind: "DNSRecordSet", update: true, edits: []edit{set("spec.zoneRef.name", "other")}, want: "spec.zoneRef"},
		{name: "rrset update endpoints", kind: "DNSRecordSet", update: true, edits: []edit{set("spec.endpoints[0].targets", []any{"192.0.2.99"})}},
		{name: "publication state enum", kind: "DNSRecordSet", status: true, edits: []edit{set("status.publications", []any{map[string]any{"integration": "r53", "state": "Done"}})}, want: "status.publications[0].state"},
		{name: "publication integration required", kind: "DNSRecordSet", status: true, edits: []edit{set("status.publications", []any{map[string]any{"state": "Accepted"}})}, want: "status.publications[0].integration"},
		{name: "rrset status", kind: "DNSRecordSet", status: true, edits: []edit{set("status.names", 3), set("status.conditions", []any{cond("Ready")})}},

		// BlockList
		{name: "blocklist sample", kind: "BlockList", defaults: map[string]any{"spec.mode": "block", "spec.sources[1].format": "adblock", "spec.sources[2].format": "auto", "spec.sources[2].entries[0].type": "wildcard"}},
		{name: "blocklist defaults", kind: "BlockList", edits: []edit{del("spec.mode"), del("spec.refreshInterval"), del("spec.sources[0].format"), set("spec.sources[2].entries[0]", map[string]any{"value": "x.example"})},
			defaults: map[string]any{"spec.mode": "block", "spec.refreshInterval": "24h", "spec.sources[0].format": "auto", "spec.sources[2].entries[0].type": "exact"}},
		{name: "mode enum", kind: "BlockList", edits: []edit{set("spec.mode", "deny")}, want: "spec.mode"},
		{name: "mode allow", kind: "BlockList", edits: []edit{set("spec.mode", "allow")}},
		{name: "refreshInterval pattern", kind: "BlockList", edits: []edit{set("spec.refreshInterval", "1 day")}, want: "spec.refreshInterval"},
		{name: "response enum", kind: "BlockList", edits: []edit{set("spec.response", "drop")}, want: "spec.response"},
		{name: "customIP requires block", kind: "BlockList", edits: []edit{del("spec.customIP")}, want: "spec.customIP"},
		{name: "customIP block optional otherwise", kind: "BlockList", edits: []edit{del("spec.customIP"), set("spec.response", "nxdomain")}},
		{name: "customIP not empty", kind: "BlockList", edits: []edit{set("spec.customIP", map[string]any{})}, want: "spec.customIP"},
		{name: "customIP v4 format", kind: "BlockList", edits: []edit{set("spec.customIP.v4", "not-an-ip")}, want: "spec.customIP.v4"},
		{name: "customIP v6 format", kind: "BlockList", edits: []edit{set("spec.customIP.v6", "1.2.3.4")}, want: "spec.customIP.v6"},
		{name: "blocklist spec required", kind: "BlockList", edits: []edit{del("spec")}, want: "spec"},
		{name: "sources required", kind: "BlockList", edits: []edit{del("spec.sources")}, want: "spec.sources"},
		{name: "sources min items", kind: "BlockList", edits: []edit{set("spec.sources", []any{})}, want: "spec.sources"},
		{name: "sources max items", kind: "BlockList", edits: []edit{set("spec.sources", objs(257, map[string]any{"inline": []any{"a.example"}}))}, want: "spec.sources"},
		{name: "source names unique", kind: "BlockList", edits: []edit{set("spec.sources[1].name", "stevenblack")}, want: "spec.sources"},
		{name: "source one origin", kind: "BlockList", edits: []edit{set("spec.sources[0].inline", []any{"a.example"})}, want: "spec.sources[0]"},
		{name: "configMapRef name required", kind: "BlockList", edits: []edit{set("spec.sources[1]", map[string]any{"configMapRef": map[string]any{"namespace": "x"}})}, want: "spec.sources[1].configMapRef.name"},
		{name: "configMapRef name min length", kind: "BlockList", edits: []edit{set("spec.sources[1]", map[string]any{"configMapRef": map[string]any{"name": ""}})}, want: "spec.sources[1].configMapRef.name"},
		{name: "format enum", kind: "BlockList", edits: []edit{set("spec.sources[0].format", "json")}, want: "spec.sources[0].format"},
		{name: "exclude set", kind: "BlockList", edits: []edit{set("spec.sources[0].exclude", []any{"a", "a"})}, want: "spec.sources[0].exclude[1]"},
		{name: "exclude max items", kind: "BlockList", edits: []edit{set("spec.sources[0].exclude", strs(10001, "x"))}, want: "spec.sources[0].exclude"},
		{name: "entries max items", kind: "BlockList", edits: []edit{set("spec.sources[2].entries", objs(10001, map[string]any{"value": "a.example"}))}, want: "spec.sources[2].entries"},
		{name: "entry value required", kind: "BlockList", edits: []edit{del("spec.sources[2].entries[0].value")}, want: "spec.sources[2].entries[0].value"},
		{name: "entry value min length", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].value", "")}, want: "spec.sources[2].entries[0].value"},
		{name: "entry value max length", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].value", long1025)}, want: "spec.sources[2].entries[0].value"},
		{name: "entry type enum", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].type", "glob")}, want: "spec.sources[2].entries[0].type"},
		{name: "entry comment max length", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].comment", long501)}, want: "spec.sources[2].entries[0].comment"},
		{name: "entry origin enum", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].origin", "magic")}, want: "spec.sources[2].entries[0].origin"},
		{name: "entry createdBy max length", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].createdBy", long301)}, want: "spec.sources[2].entries[0].createdBy"},
		{name: "entry request max length", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].request", long301)}, want: "spec.sources[2].entries[0].request"},
		{name: "entry created date-time", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0].created", "yesterday")}, want: "spec.sources[2].entries[0].created"},
		{name: "entry full", kind: "BlockList", edits: []edit{set("spec.sources[2].entries[0]", map[string]any{"value": "^ads[0-9]+\\.example$", "type": "regex", "enabled": false, "origin": "unblock", "created": "2024-01-01T00:00:00Z", "modified": "2024-01-02T00:00:00Z", "createdBy": "alice", "request": "default/unblock-wiki"})}},
		{name: "source enabled type", kind: "BlockList", edits: []edit{set("spec.sources[0].enabled", "no")}, want: "spec.sources[0].enabled"},
		{name: "status source name required", kind: "BlockList", status: true, edits: []edit{set("status.sources", []any{map[string]any{"entries": 3}})}, want: "status.sources[0].name"},
		{name: "status staleExcludes max items", kind: "BlockList", status: true, edits: []edit{set("status.sources", []any{map[string]any{"name": "a", "staleExcludes": strs(51, "x")}})}, want: "status.sources[0].staleExcludes"},
		{name: "blocklist status", kind: "BlockList", status: true, edits: []edit{set("status.entries", 10), set("status.lastFetched", "2024-01-01T00:00:00Z"), set("status.sources", []any{map[string]any{"name": "stevenblack", "digest": "ab", "enabled": false}})}},

		// Policy
		{name: "policy sample", kind: "Policy", defaults: map[string]any{"spec.safeSearchMode": "moderate"}},
		{name: "policy defaults", kind: "Policy", edits: []edit{del("spec.blockTTL"), del("spec.safeSearchMode"), del("spec.schedule.tz")},
			defaults: map[string]any{"spec.blockTTL": "10m", "spec.safeSearchMode": "strict", "spec.schedule.tz": "UTC"}},
		{name: "empty policy", kind: "Policy", edits: []edit{set("spec", map[string]any{})}, defaults: map[string]any{"spec.blockTTL": "10m"}},
		{name: "blockMode enum", kind: "Policy", edits: []edit{set("spec.blockMode", "drop")}, want: "spec.blockMode"},
		{name: "blockTTL pattern", kind: "Policy", edits: []edit{set("spec.blockTTL", "ten minutes")}, want: "spec.blockTTL"},
		{name: "blockedServices set", kind: "Policy", edits: []edit{set("spec.blockedServices", []any{"a", "a"})}, want: "spec.blockedServices[1]"},
		{name: "blockedServices max items", kind: "Policy", edits: []edit{set("spec.blockedServices", strs(257, "s"))}, want: "spec.blockedServices"},
		{name: "blockedCategories set", kind: "Policy", edits: []edit{set("spec.blockedCategories", []any{"a", "b", "a"})}, want: "spec.blockedCategories[2]"},
		{name: "blockedCategories max items", kind: "Policy", edits: []edit{set("spec.blockedCategories", strs(65, "c"))}, want: "spec.blockedCategories"},
		{name: "allowedServices set", kind: "Policy", edits: []edit{set("spec.allowedServices", []any{"a", "a"})}, want: "spec.allowedServices[1]"},
		{name: "allowedServices max items", kind: "Policy", edits: []edit{set("spec.allowedServices", strs(257, "s"))}, want: "spec.allowedServices"},
		{name: "priority type", kind: "Policy", edits: []edit{set("spec.priority", "high")}, want: "spec.priority"},
		{name: "safeSearchMode enum", kind: "Policy", edits: []edit{set("spec.safeSearchMode", "off")}, want: "spec.safeSearchMode"},
		{name: "rewrite name required", kind: "Policy", edits: []edit{set("spec.rewrites[0]", map[string]any{"cname": "x.example"})}, want: "spec.rewrites[0].name"},
		{name: "schedule start required", kind: "Policy", edits: []edit{del("spec.schedule.start")}, want: "spec.schedule.start"},
		{name: "schedule end required", kind: "Policy", edits: []edit{del("spec.schedule.end")}, want: "spec.schedule.end"},
		{name: "schedule start pattern", kind: "Policy", edits: []edit{set("spec.schedule.start", "24:00")}, want: "spec.schedule.start"},
		{name: "schedule end pattern", kind: "Policy", edits: []edit{set("spec.schedule.end", "7:00")}, want: "spec.schedule.end"},
		{name: "weekdays enum", kind: "Policy", edits: []edit{set("spec.schedule.weekdays", []any{"monday"})}, want: "spec.schedule.weekdays[0]"},
		{name: "schedule tz unknown", kind: "Policy", edits: []edit{set("spec.schedule.tz", "Europe/Berln")}, want: "spec.schedule.tz"},
		{name: "schedule tz offset", kind: "Policy", edits: []edit{set("spec.schedule.tz", "+01:00")}, want: "spec.schedule.tz"},
		{name: "schedule tz Local", kind: "Policy", edits: []edit{set("spec.schedule.tz", "Local")}, want: "spec.schedule.tz"},
		{name: "schedule tz IANA", kind: "Policy", edits: []edit{set("spec.schedule.tz", "America/Argentina/Buenos_Aires")}},
		{name: "weekdays set", kind: "Policy", edits: []edit{set("spec.schedule.weekdays", []any{"mon", "mon"})}, want: "spec.schedule.weekdays[1]"},
		{name: "policy status condition", kind: "Policy", status: true, edits: []edit{set("status.conditions", []any{cond("Ready"), cond("Degraded")}), set("status.observedGeneration", 1)}},
		{name: "policy status condition status enum", kind: "Policy", status: true, edits: []edit{set("status.conditions", []any{map[string]any{"type": "Ready", "status": "Yes", "reason": "R", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}})}, want: "status.conditions[0].status"},

		// ClientGroup
		{name: "clientgroup sample", kind: "ClientGroup"},
		{name: "empty clientgroup", kind: "ClientGroup", edits: []edit{set("spec", map[string]any{})}},
		{name: "address not an IP", kind: "ClientGroup", edits: []edit{set("spec.addresses", []any{"300.1.1.1"})}, want: "spec.addresses"},
		{name: "address set", kind: "ClientGroup", edits: []edit{set("spec.addresses", []any{"10.0.0.1", "10.0.0.1"})}, want: "spec.addresses[1]"},
		{name: "clientID pattern", kind: "ClientGroup", edits: []edit{set("spec.clientIDs", []any{"Kids_Tablet"})}, want: "spec.clientIDs[0]"},
		{name: "clientID max length", kind: "ClientGroup", edits: []edit{set("spec.clientIDs", []any{strings.Repeat("a", 64)})}, want: "spec.clientIDs[0]"},
		{name: "client name min length", kind: "ClientGroup", edits: []edit{set("spec.names", []any{""})}, want: "spec.names[0]"},

		// UnblockRequest
		{name: "unblock sample", kind: "UnblockRequest", defaults: map[string]any{"status.phase": "pending"}},
		{name: "unblock defaults", kind: "UnblockRequest", edits: []edit{del("spec.scope"), del("spec.groups"), del("spec.match")},
			defaults: map[string]any{"spec.scope": "everyone", "spec.match": "exact", "status.phase": "pending"}},
		{name: "unblock domain required", kind: "UnblockRequest", edits: []edit{del("spec.domain")}, want: "spec.domain"},
		{name: "unblock domain pattern", kind: "UnblockRequest", edits: []edit{set("spec.domain", "not a domain")}, want: "spec.domain"},
		{name: "unblock scope enum", kind: "UnblockRequest", edits: []edit{set("spec.scope", "me")}, want: "spec.scope"},
		{name: "scope groups needs groups", kind: "UnblockRequest", edits: []edit{del("spec.groups")}, want: "spec.groups"},
		{name: "groups need scope groups", kind: "UnblockRequest", edits: []edit{set("spec.scope", "everyone")}, want: "spec.groups"},
		{name: "unblock match enum", kind: "UnblockRequest", edits: []edit{set("spec.match", "regex")}, want: "spec.match"},
		{name: "unblock duration pattern", kind: "UnblockRequest", edits: []edit{set("spec.duration", "1 week")}, want: "spec.duration"},
		{name: "duration excludes permanent", kind: "UnblockRequest", edits: []edit{set("spec.permanent", true)}, want: "spec.duration"},
		{name: "permanent", kind: "UnblockRequest", edits: []edit{set("spec.permanent", true), del("spec.duration")}},
		{name: "unblock phase enum", kind: "UnblockRequest", edits: []edit{set("status.phase", "done")}, want: "status.phase"},
		{name: "unblock approved", kind: "UnblockRequest", update: true, edits: []edit{set("status", map[string]any{"phase": "approved", "decidedBy": "admin", "decidedAt": "2024-01-01T00:00:00Z", "expiresAt": "2024-01-02T00:00:00Z"})}},
		{name: "unblock domain immutable", kind: "UnblockRequest", update: true, edits: []edit{set("spec.domain", "other.example")}, want: "spec.domain"},
	}
}

// localCases are internal kinds, checked in process only.
func localCases() []pcase {
	return []pcase{
		{name: "localuser base", kind: "LocalUser"},
		{name: "username required", kind: "LocalUser", edits: []edit{del("spec.username")}, want: "spec.username"},
		{name: "username pattern", kind: "LocalUser", edits: []edit{set("spec.username", "a b")}, want: "spec.username"},
		{name: "passwordHash empty", kind: "LocalUser", edits: []edit{set("spec.passwordHash", "")}},
		{name: "passwordHash argon2id", kind: "LocalUser", edits: []edit{set("spec.passwordHash", "hunter2")}, want: "spec.passwordHash"},
		{name: "user groups set", kind: "LocalUser", edits: []edit{set("spec.groups", []any{"a", "a"})}, want: "spec.groups[1]"},
		{name: "username immutable", kind: "LocalUser", update: true, edits: []edit{set("spec.username", "bob")}, want: "spec.username"},
		{name: "localuser cluster scoped", kind: "LocalUser", edits: []edit{set("metadata.namespace", "x")}, want: "metadata.namespace"},
		{name: "localuser unknown field", kind: "LocalUser", edits: []edit{set("spec.password", "x")}, want: "spec.password"},
		{name: "localuser status", kind: "LocalUser", edits: []edit{set("status.lastLoginAt", "2024-01-01T00:00:00Z")}},

		{name: "token base", kind: "APIToken"},
		{name: "token id pattern", kind: "APIToken", edits: []edit{set("spec.id", "ABC"), set("metadata.name", "abc")}, want: "spec.id"},
		{name: "token name is id", kind: "APIToken", edits: []edit{set("metadata.name", "zzzzzzzzzzzz")}, want: "<root>"},
		{name: "token hash pattern", kind: "APIToken", edits: []edit{set("spec.hash", "xyz")}, want: "spec.hash"},
		{name: "token owner kind enum", kind: "APIToken", edits: []edit{set("spec.owner.kind", "Robot")}, want: "spec.owner.kind"},
		{name: "token sa owner namespace", kind: "APIToken", edits: []edit{set("spec.owner.kind", "ServiceAccount")}, want: "spec.owner.namespace"},
		{name: "token scope pattern", kind: "APIToken", edits: []edit{set("spec.scopes", []any{"root"})}, want: "spec.scopes[0]"},
		{name: "token scope zone only for zone-admin", kind: "APIToken", edits: []edit{set("spec.scopes", []any{"viewer@zone:example.com"})}, want: "spec.scopes[0]"},
		{name: "token scope at cluster", kind: "APIToken", edits: []edit{set("spec.scopes", []any{"admin@cluster", "viewer"})}},
		{name: "token expiry after creation", kind: "APIToken", edits: []edit{set("spec.expiresAt", "2024-04-01T00:00:00Z")}, want: "spec.expiresAt"},
		{name: "token hash immutable", kind: "APIToken", update: true, edits: []edit{set("spec.hash", strings.Repeat("f", 64))}, want: "spec.hash"},
		{name: "token description mutable", kind: "APIToken", update: true, edits: []edit{set("spec.description", "new")}},

		{name: "serviceaccount base", kind: "ServiceAccount"},
		{name: "serviceaccount namespace required", kind: "ServiceAccount", edits: []edit{del("metadata.namespace")}, want: "metadata.namespace"},

		{name: "rolebinding base", kind: "RoleBinding", defaults: map[string]any{"spec.scope.kind": "cluster"}},
		{name: "role enum", kind: "RoleBinding", edits: []edit{set("spec.role", "root")}, want: "spec.role"},
		{name: "subject kind enum", kind: "RoleBinding", edits: []edit{set("spec.subject.kind", "Robot")}, want: "spec.subject.kind"},
		{name: "subject name required", kind: "RoleBinding", edits: []edit{del("spec.subject.name")}, want: "spec.subject.name"},
		{name: "sa subject namespace", kind: "RoleBinding", edits: []edit{set("spec.subject.kind", "ServiceAccount")}, want: "spec.subject.namespace"},
		{name: "user subject no namespace", kind: "RoleBinding", edits: []edit{set("spec.subject.namespace", "x")}, want: "spec.subject.namespace"},
		{name: "zone scope needs name", kind: "RoleBinding", edits: []edit{set("spec.scope.kind", "zone")}, want: "spec.scope.name"},
		{name: "cluster scope takes no name", kind: "RoleBinding", edits: []edit{set("spec.scope.name", "example.com")}, want: "spec.scope.name"},
		{name: "zone scope only for zone-admin", kind: "RoleBinding", edits: []edit{set("spec.scope", map[string]any{"kind": "zone", "name": "example.com"})}, want: "spec.role"},
		{name: "zone-admin of every zone", kind: "RoleBinding", edits: []edit{set("spec.role", "zone-admin")}},
		{name: "zone admin", kind: "RoleBinding", edits: []edit{set("spec.role", "zone-admin"), set("spec.scope", map[string]any{"kind": "zone", "name": "example.com"})}},

		{name: "idp base", kind: "IdentityProvider", defaults: map[string]any{"spec.usernameClaim": "sub", "spec.groupsClaim": "groups", "spec.scopes": []any{"openid", "profile", "email"}}},
		{name: "idp id pattern", kind: "IdentityProvider", edits: []edit{set("spec.id", "Corp SSO")}, want: "spec.id"},
		{name: "idp issuer https", kind: "IdentityProvider", edits: []edit{set("spec.issuerURL", "http://login.example.com")}, want: "spec.issuerURL"},
		{name: "idp clientID required", kind: "IdentityProvider", edits: []edit{del("spec.clientID")}, want: "spec.clientID"},
		{name: "idp one secret source", kind: "IdentityProvider", edits: []edit{set("spec.clientSecretRef", map[string]any{"name": "oidc", "key": "secret"})}, want: "spec.clientSecretRef"},
		{name: "idp empty prefix", kind: "IdentityProvider", edits: []edit{set("spec.usernamePrefix", "")}},
	}
}

func cond(typ string) map[string]any {
	return map[string]any{"type": typ, "status": "True", "reason": "Ok", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
}
