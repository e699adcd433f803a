{{- define "service.name" -}}{{ .Chart.Name }}{{- end -}}
{{- define "service.fullname" -}}{{ printf "%s" .Release.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- define "service.labels" -}}
app.kubernetes.io/name: {{ include "service.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "service.selector" -}}
app.kubernetes.io/name: {{ include "service.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}
{{- define "service.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
{{- /* service.tlsListeners: the enabled encrypted listeners, as a list of
  dicts {key (settings key and port name), port, proto (TCP or UDP)}; empty
  without tls.secretName. */ -}}
{{- define "service.tlsListeners" -}}
{{- $out := list }}
{{- if .Values.tls.secretName }}
{{- range $k := list "dot" "doq" "doh" "doh3" }}
{{- $l := get $.Values.tls $k }}
{{- if $l.enabled }}
{{- $out = append $out (dict "key" $k "port" $l.port "proto" (ternary "UDP" "TCP" (or (eq $k "doq") (eq $k "doh3")))) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end -}}
{{- /* service.hostNetwork: "true" when the data plane runs in the node's
  network namespace (dataplane.hostNetwork or dataplane.nodeLocal), else
  empty. hostPort needs the pod's own namespace. */ -}}
{{- define "service.hostNetwork" -}}
{{- $d := .Values.dataplane }}
{{- if and $d.hostPort.enabled (or $d.hostNetwork $d.nodeLocal.enabled) }}
{{- fail "dataplane.hostPort.enabled cannot be combined with dataplane.hostNetwork or dataplane.nodeLocal.enabled (a hostNetwork pod already takes its ports on the node): choose one" }}
{{- end }}
{{- if or $d.hostNetwork $d.nodeLocal.enabled }}true{{ end }}
{{- end -}}
{{- /* service.hostPort: host:port, bracketing IPv6 hosts. */ -}}
{{- define "service.hostPort" -}}
{{- if contains ":" .host }}[{{ .host }}]:{{ .port }}{{ else }}{{ .host }}:{{ .port }}{{ end }}
{{- end -}}
{{- /* service.dnsAddresses: the addresses the plain DNS listeners bind, as a
  JSON list: every address (0.0.0.0), or with dataplane.nodeLocal only its
  address and extraAddresses; with vip.enabled also each VIP. */ -}}
{{- define "service.dnsAddresses" -}}
{{- $n := .Values.dataplane.nodeLocal }}
{{- /* VIPs get listeners of their own: a wildcard UDP socket answers from
  the node's own address, which resolvers drop (docs/vip.md). */ -}}
{{- $vips := include "service.vipAddresses" . | fromJsonArray }}
{{- if $n.enabled }}
{{- toJson (concat (prepend ($n.extraAddresses | default list) $n.address) $vips | uniq) }}
{{- else }}
{{- toJson (prepend $vips "0.0.0.0" | uniq) }}
{{- end }}
{{- end -}}
{{- define "service.keySecret" -}}{{ .Values.encryptionKey.existingSecret | default (printf "%s-encryption-key" (include "service.fullname" .)) }}{{- end -}}
{{- define "service.podSpec" -}}
serviceAccountName: {{ include "service.fullname" .root }}-{{ .component }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  # Secret volumes are root's; with fsGroup the kubelet gives them this
  # group and group read, so the 0400 keys and certificates are readable by
  # the unprivileged user (without it they are not).
  fsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
containers:
  - name: service
    image: {{ include "service.image" .root }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    args: ["serve", "--config", "/etc/service/service.yaml", "--role", {{ .component | quote }}]
    env:
      - name: SERVICE_NODE__NAME
        valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
      - name: SERVICE_POD_NAME
        valueFrom: {fieldRef: {fieldPath: metadata.name}}
      - name: SERVICE_NAMESPACE
        valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
      - name: SERVICE_ENCRYPTION_KEY_FILE
        value: /etc/service/keys/encryption-key
      {{- if eq .component "dataplane" }}
      # list bodies are copied by digest from the operator's internal listeners
      - name: SERVICE_INTERNAL_PEERS
        value: {{ printf "%s-operator-internal.%s.svc:%v" (include "service.fullname" .root) .root.Release.Namespace .root.Values.ports.internal | quote }}
      {{- end }}
    ports:
      {{- $dp := and (eq .component "dataplane") .root.Values.dataplane }}
      {{- range $proto := list "UDP" "TCP" }}
      - name: dns-{{ lower $proto }}
        containerPort: {{ $.root.Values.ports.dns }}
        protocol: {{ $proto }}
        {{- if and $dp $dp.hostPort.enabled }}
        hostPort: {{ $dp.hostPort.port }}
        {{- else if and $dp $dp.nodeLocal.enabled }}
        # the scheduler then sees port 53 taken on this address only
        hostIP: {{ $dp.nodeLocal.address }}
        {{- end }}
      {{- end }}
      - {name: api, containerPort: {{ .root.Values.ports.api }}, protocol: TCP}
      - {name: ops, containerPort: {{ .root.Values.ports.ops }}, protocol: TCP}
      - {name: internal, containerPort: {{ .root.Values.ports.internal }}, protocol: TCP}
      - {name: metrics, containerPort: {{ .root.Values.ports.metrics }}, protocol: TCP}
      {{- if and (eq .component "operator") .root.Values.externalDNS.enabled }}
      - {name: extdns-health, containerPort: {{ .root.Values.externalDNS.healthPort }}, protocol: TCP}
      {{- end }}
      {{- if eq .component "dataplane" }}
      {{- range include "service.tlsListeners" .root | fromJsonArray }}
      - {name: {{ .key }}, containerPort: {{ .port }}, protocol: {{ .proto }}}
      {{- end }}
      {{- end }}
    livenessProbe:
      httpGet: {path: /healthz/live, port: ops}
      periodSeconds: 10
    readinessProbe:
      httpGet: {path: /healthz/ready, port: ops}
      periodSeconds: 5
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: ["ALL"], add: ["NET_BIND_SERVICE"]}
    resources: {{- toYaml .resources | nindent 6 }}
    volumeMounts:
      - {name: config, mountPath: /etc/service/service.yaml, subPath: service.yaml, readOnly: true}
      - {name: keys, mountPath: /etc/service/keys, readOnly: true}
      - {name: data, mountPath: /var/lib/service}
      {{- if and (eq .component "dataplane") .root.Values.tls.secretName }}
      # a directory, not subPath: the kubelet's updates must reach the files
      - {name: tls, mountPath: /etc/service/tls, readOnly: true}
      {{- end }}
      {{- if and (eq .component "dataplane") .root.Values.proxyProtocol.secretName }}
      - {name: proxy-secret, mountPath: /etc/service/proxy, readOnly: true}
      {{- end }}
  {{- include "service.externalDNSSidecar" . }}
  {{- include "service.vipContainer" . }}
volumes:
  - name: config
    configMap: {name: {{ include "service.fullname" .root }}-config}
  - name: keys
    secret: {secretName: {{ include "service.keySecret" .root }}, defaultMode: 0400}
  - name: data
    emptyDir: {}
  {{- if and (eq .component "dataplane") .root.Values.tls.secretName }}
  - name: tls
    secret: {secretName: {{ .root.Values.tls.secretName }}, defaultMode: 0400}
  {{- end }}
  {{- if and (eq .component "dataplane") .root.Values.proxyProtocol.secretName }}
  - name: proxy-secret
    secret:
      secretName: {{ .root.Values.proxyProtocol.secretName }}
      defaultMode: 0400
      items: [{key: secret, path: secret}]
  {{- end }}
  {{- include "service.vipVolumes" . }}
{{- end -}}

{{/* external-dns beside the webhook provider in an operator pod
(docs/external-dns.md): it calls the webhook over loopback. */}}
{{- define "service.externalDNSSidecar" -}}
{{- $e := .root.Values.externalDNS }}
{{- if and (eq .component "operator") $e.enabled $e.sidecar.enabled }}
  - name: external-dns
    image: {{ $e.sidecar.image | quote }}
    args:
      - --provider=webhook
      - {{ printf "--webhook-provider-url=http://127.0.0.1:%v" $e.port | quote }}
      - --metrics-address=:7979
      {{- range $e.sidecar.args }}
      - {{ . | quote }}
      {{- end }}
    ports:
      - {name: extdns-metrics, containerPort: 7979, protocol: TCP}
    livenessProbe:
      httpGet: {path: /healthz, port: extdns-metrics}
      periodSeconds: 10
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: ["ALL"]}
    resources: {{- toYaml $e.sidecar.resources | nindent 6 }}
{{- end }}
{{- end }}
