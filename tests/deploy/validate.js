// SPDX-License-Identifier: MIT
// Validate Kubernetes manifests offline: each document against the API's
// schema as the npm package kubernetes-models carries it (types, required
// fields, enums, formats), and, strictly, no field the API does not have
// (kubernetes-models' validators let unknown fields through; the API
// server drops them silently, so a typo like `livenesProbe` would ship).
// The field lists come from the package's own type declarations.
//
//   NODE_PATH=<dir>/node_modules node validate.js FILE.yaml...
//
// Prints one line per document and ends with "N passed, N failed".
"use strict";
const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");

const root = path.dirname(require.resolve("kubernetes-models/package.json"));

// apiVersion "apps/v1", kind "DaemonSet" -> kubernetes-models/apps/v1/DaemonSet
function modelPath(apiVersion, kind) {
  return `kubernetes-models/${apiVersion}/${kind}`;
}

const ifaces = new Map();

// The properties of the one interface declared in a .d.ts file:
// name -> { type, file }, plus "extends TypeMeta" (apiVersion, kind).
function interfaceOf(file) {
  if (ifaces.has(file)) return ifaces.get(file);
  const text = fs.readFileSync(file, "utf8");
  const m = text.match(/export interface (\w+)( extends TypeMeta)? \{([\s\S]*?)\n\}/);
  let props = null;
  if (m) {
    props = new Map();
    if (m[2]) {
      props.set("apiVersion", "string");
      props.set("kind", "string");
    }
    // One property a line, or over several when its type is an object
    // type ("{ [key: string]: string; }").
    const lines = m[3].split("\n");
    for (let n = 0; n < lines.length; n++) {
      const p = lines[n].match(/^ {4}"([^"]+)"\??: (.*)$/);
      if (!p) continue;
      let type = p[2];
      const depth = (t) => (t.match(/\{/g) || []).length - (t.match(/\}/g) || []).length;
      while (depth(type) > 0 && n + 1 < lines.length) type += " " + lines[++n].trim();
      props.set(p[1], type.replace(/;$/, "").replace(/;\s*\}/g, " }").replace(/\s+/g, " "));
    }
    const imports = new Map();
    const ire = /^import \{ (\w+) \} from "([^"]+)";$/gm;
    let i;
    while ((i = ire.exec(text))) imports.set(i[1], i[2]);
    props.imports = imports;
    props.file = file;
  }
  ifaces.set(file, props);
  return props;
}

function resolveImport(fromFile, spec) {
  const base = spec.startsWith(".")
    ? path.resolve(path.dirname(fromFile), spec)
    : require.resolve(spec.replace(/\.js$/, ""));
  return base.replace(/\.js$/, "") + ".d.ts";
}

// Walk value against a TypeScript type string of file's interface.
function walk(value, type, where, owner, errors) {
  type = type.trim();
  let m;
  if ((m = type.match(/^Array<(.+)>$/))) {
    if (Array.isArray(value))
      value.forEach((v, i) => walk(v, m[1], `${where}[${i}]`, owner, errors));
    return;
  }
  if ((m = type.match(/^\{\s*\[key: string\]: (.+?)\s*\}$/))) {
    if (value && typeof value === "object")
      for (const [k, v] of Object.entries(value))
        walk(v, m[1], `${where}.${k}`, owner, errors);
    return;
  }
  if (!/^I\w+$/.test(type) || !owner.imports.has(type)) return; // scalar
  const target = interfaceOf(resolveImport(owner.file, owner.imports.get(type)));
  if (target) check(value, target, where, errors);
}

function check(obj, iface, where, errors) {
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) return;
  for (const [k, v] of Object.entries(obj)) {
    if (!iface.has(k)) {
      errors.push(`${where}.${k}: no such field`);
      continue;
    }
    walk(v, iface.get(k), `${where}.${k}`, iface, errors);
  }
}

let passed = 0, failed = 0;
for (const file of process.argv.slice(2)) {
  const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter(Boolean);
  docs.forEach((doc, n) => {
    const name = `${path.basename(file)}#${n} ${doc.kind}/${doc.metadata && doc.metadata.name}`;
    const errors = [];
    let mod;
    try {
      mod = require(modelPath(doc.apiVersion, doc.kind));
    } catch (e) {
      errors.push(`unknown apiVersion/kind ${doc.apiVersion} ${doc.kind}`);
    }
    if (mod) {
      const Model = mod[doc.kind];
      try {
        new Model(doc).validate();
      } catch (e) {
        errors.push(e.message);
      }
      const dts = require.resolve(modelPath(doc.apiVersion, doc.kind)).replace(/\.js$/, ".d.ts");
      const iface = interfaceOf(dts);
      if (!iface) errors.push(`no type declaration for ${doc.kind}`);
      else check(doc, iface, doc.kind, errors);
    }
    if (errors.length) {
      failed++;
      console.log(`FAIL ${name}`);
      for (const e of errors) console.log(`  ${e}`);
    } else {
      passed++;
      console.log(`ok   ${name}`);
    }
  });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed || !passed ? 1 : 0);
