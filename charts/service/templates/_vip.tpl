{{/* svc vip run beside the data plane (docs/vip.md). */}}

{{- define "service.vipCheck" -}}
{{- $v := .Values.vip }}
{{- if $v.enabled }}
{{- if not (include "service.hostNetwork" .) }}
{{- fail "vip.enabled needs dataplane.hostNetwork: true (keepalived adds the VIPs to the node's interfaces)" }}
{{- end }}
{{- if not $v.image }}
{{- fail "vip.image: set an image with svc and keepalived (docs/vip.md \"Image\"); the service image has no keepalived" }}
{{- end }}
{{- if not $v.addresses }}
{{- fail "vip.addresses: give at least one name=addr/len@iface#vrid" }}
{{- end }}
{{- if and (not $v.hmacSecretName) (not $v.legacy) }}
{{- fail "vip.hmacSecretName: name a Secret with vrrp_hmac_<vrid> keys, or set vip.legacy: true for unauthenticated adverts (docs/vip.md)" }}
{{- end }}
{{- end }}
{{- end -}}

{{/* service.vipAddresses: the VIPs' addresses as a JSON list. */}}
{{- define "service.vipAddresses" -}}
{{- $out := list }}
{{- if .Values.vip.enabled }}
{{- range .Values.vip.addresses }}
{{- $out = append $out (regexReplaceAll "^[^=]*=([^/]*)/.*$" . "${1}") }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end -}}

{{- define "service.vipContainer" -}}
{{- $v := .root.Values.vip }}
{{- if and (eq .component "dataplane") $v.enabled }}
{{- include "service.vipCheck" .root }}
  - name: vip
    image: {{ $v.image | quote }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    args:
      - vip
      - run
      - --peers-from=kubernetes
      - --run-dir=/run/service
      - {{ printf "--health-address=:%v" $v.healthPort | quote }}
      {{- $probe := ternary .root.Values.dataplane.nodeLocal.address "127.0.0.1" .root.Values.dataplane.nodeLocal.enabled }}
      - {{ printf "--dns=%s" (include "service.hostPort" (dict "host" $probe "port" .root.Values.ports.dns)) | quote }}
      - {{ printf "--require-backends=%v" $v.requireBackends | quote }}
      - {{ printf "--preempt-delay=%v" $v.preemptDelay | quote }}
      - {{ printf "--stop-timeout=%v" $v.stopTimeout | quote }}
      {{- if $v.legacy }}
      - --legacy
      {{- else }}
      - --hmac-key-file=/run/secrets/vrrp/vrrp_hmac_{vrid}
      {{- end }}
      {{- range $v.addresses }}
      - {{ printf "--vip=%s" . | quote }}
      {{- end }}
      {{- range $v.extraArgs }}
      - {{ . | quote }}
      {{- end }}
    env:
      - name: POD_NAME
        valueFrom: {fieldRef: {fieldPath: metadata.name}}
      - name: POD_NAMESPACE
        valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    ports:
      - {name: vip-health, containerPort: {{ $v.healthPort }}, protocol: TCP}
    livenessProbe:
      httpGet: {path: /healthz, port: vip-health}
      periodSeconds: 10
    # keepalived adds addresses (NET_ADMIN) and sends VRRP on raw sockets
    # (NET_RAW) as root; no other container of the pod gets either.
    securityContext:
      runAsNonRoot: false
      runAsUser: 0
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: ["ALL"], add: ["NET_ADMIN", "NET_RAW"]}
    resources: {{- toYaml $v.resources | nindent 6 }}
    volumeMounts:
      - {name: vip-run, mountPath: /run/service}
      {{- if not $v.legacy }}
      - {name: vip-hmac, mountPath: /run/secrets/vrrp, readOnly: true}
      {{- end }}
{{- end }}
{{- end -}}

{{- define "service.vipVolumes" -}}
{{- $v := .root.Values.vip }}
{{- if and (eq .component "dataplane") $v.enabled }}
  - name: vip-run
    emptyDir: {medium: Memory, sizeLimit: 16Mi}
  {{- if not $v.legacy }}
  - name: vip-hmac
    secret: {secretName: {{ $v.hmacSecretName }}, defaultMode: 0400}
  {{- end }}
{{- end }}
{{- end -}}
