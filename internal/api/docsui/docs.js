// The API reference page: renders the OpenAPI document of this server
// (openapi.json, same origin) without any third-party code or request.
"use strict";

const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k ?? "")));
  return e;
};

// ref resolves a local $ref (#/components/...).
const ref = (doc, s) => {
  let seen = 0;
  while (s && s.$ref && seen++ < 20) {
    s = s.$ref.replace(/^#\//, "").split("/").reduce((o, k) => (o ? o[k] : undefined), doc);
  }
  return s || {};
};

const typeOf = (doc, s) => {
  if (s.$ref) return s.$ref.split("/").pop();
  s = ref(doc, s);
  if (Array.isArray(s.type)) return s.type.filter((t) => t !== "null").join("|");
  if (s.type === "array") return typeOf(doc, s.items || {}) + "[]";
  if (s.enum) return (s.type || "") + " (" + s.enum.join(", ") + ")";
  return s.type || (s.oneOf || s.anyOf ? "one of" : "object");
};

// schemaTable lists the properties of an object schema, one level deep.
const schemaTable = (doc, s) => {
  s = ref(doc, s);
  const props = s.properties || {};
  const names = Object.keys(props);
  if (!names.length) return el("p", {}, el("code", {}, typeOf(doc, s)));
  const req = new Set(s.required || []);
  const t = el("table", {}, el("tr", {}, el("th", {}, "field"), el("th", {}, "type"), el("th", {}, "description")));
  for (const n of names) {
    const p = props[n];
    t.append(el("tr", {}, el("td", {}, el("code", {}, n + (req.has(n) ? " *" : ""))),
      el("td", {}, typeOf(doc, p)), el("td", {}, ref(doc, p).description || p.description || "")));
  }
  return t;
};

const opSection = (doc, path, method, op, id) => {
  const sec = el("section", { class: "op", id },
    el("h2", {}, el("span", { class: "m " + method.toUpperCase() }, method.toUpperCase()), " ", el("code", {}, path)),
    el("p", {}, op.summary || ""));
  if (op.description) sec.append(el("p", {}, op.description));
  if (op["x-permission"]) {
    sec.append(el("p", { class: "perm" }, "permission: " + op["x-permission"] +
      (op["x-permission-scope"] ? " (scope " + op["x-permission-scope"] + ")" : "")));
  }
  const params = (op.parameters || []).map((p) => ref(doc, p)).filter((p) => p.in !== "header" || !/^(Cookie)$/i.test(p.name));
  if (params.length) {
    const t = el("table", {}, el("tr", {}, el("th", {}, "parameter"), el("th", {}, "in"), el("th", {}, "type"), el("th", {}, "description")));
    for (const p of params) {
      t.append(el("tr", {}, el("td", {}, el("code", {}, p.name + (p.required ? " *" : ""))), el("td", {}, p.in),
        el("td", {}, typeOf(doc, p.schema || {})), el("td", {}, p.description || "")));
    }
    sec.append(el("h4", {}, "Parameters"), t);
  }
  const body = op.requestBody && ref(doc, op.requestBody).content;
  if (body) {
    const [ctype, media] = Object.entries(body)[0];
    sec.append(el("h4", {}, "Request body (" + ctype + ")"), schemaTable(doc, media.schema || {}));
  }
  const rs = Object.entries(op.responses || {});
  if (rs.length) {
    const t = el("table", {}, el("tr", {}, el("th", {}, "status"), el("th", {}, "description"), el("th", {}, "body")));
    for (const [code, r0] of rs) {
      const r = ref(doc, r0);
      const c = r.content && Object.values(r.content)[0];
      t.append(el("tr", {}, el("td", {}, code), el("td", {}, r.description || ""), el("td", {}, c && c.schema ? typeOf(doc, c.schema) : "")));
    }
    sec.append(el("h4", {}, "Responses"), t);
  }
  return sec;
};

const render = (doc) => {
  const main = document.getElementById("main");
  const toc = document.getElementById("toc");
  main.replaceChildren(el("h1", {}, (doc.info && doc.info.title) || "API", " ", el("small", {}, (doc.info && doc.info.version) || "")),
    el("p", {}, (doc.info && doc.info.description) || ""),
    el("p", {}, "Base URL: ", el("code", {}, ((doc.servers || [])[0] || {}).url || ""),
      ". Raw document: ", el("a", { href: "openapi.json" }, "openapi.json"), " (3.1), ",
      el("a", { href: "openapi-3.0.json" }, "openapi-3.0.json"), " (3.0)."));
  const byTag = new Map();
  let n = 0;
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of ["get", "post", "put", "patch", "delete"]) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags || ["other"])[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push({ path, method, op, id: "op-" + n++ });
    }
  }
  toc.replaceChildren();
  for (const tag of [...byTag.keys()].sort()) {
    toc.append(el("h3", {}, tag));
    main.append(el("h2", { id: "tag-" + tag }, tag));
    for (const o of byTag.get(tag)) {
      const a = el("a", { href: "#" + o.id, "data-k": (o.path + " " + o.op.summary + " " + tag).toLowerCase() },
        el("span", { class: "m " + o.method.toUpperCase() }, o.method.toUpperCase()), " ", o.path);
      toc.append(a);
      const sec = opSection(doc, o.path, o.method, o.op, o.id);
      sec.dataset.k = a.dataset.k;
      main.append(sec);
    }
  }
  document.getElementById("filter").addEventListener("input", (ev) => {
    const q = ev.target.value.toLowerCase();
    for (const e of document.querySelectorAll("[data-k]")) e.classList.toggle("hidden", q !== "" && !e.dataset.k.includes(q));
  });
  if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView();
};

fetch("openapi.json", { credentials: "same-origin" })
  .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
  .then(render)
  .catch((e) => { document.getElementById("status").textContent = "Could not load openapi.json: " + e.message; });
