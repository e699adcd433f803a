// The node selector of the overview and the query log (docs/dashboard.md,
// Node selector): shown when GET /nodes lists more than one node; the
// choice is the API's node= parameter, kept in the URL so a shared link
// names the node. The serving node forwards the reads to the chosen one.
import { useState, useEffect } from './vendor/preact-htm.js';
import { call } from './api.js';
import { html, navigate, href } from './ui.js';

let nodesOnce = null;

/** The cluster's nodes (fetched once per page load; [] when not allowed). */
export function useNodes() {
  const [nodes, setNodes] = useState([]);
  useEffect(() => {
    if (!nodesOnce) nodesOnce = call('nodes').then((p) => p.items || []).catch(() => []);
    let live = true;
    nodesOnce.then((items) => { if (live) setNodes(items); });
    return () => { live = false; };
  }, []);
  return nodes;
}

/** The node= of the URL ('' is the serving node). */
export function nodeOf(route) {
  return route.query.get('node') || '';
}

/** A select of the nodes; changing it reloads the page's view for that node
 * with the rest of the URL kept. Nothing with a single node. */
export function NodeSelect({ route, page }) {
  const nodes = useNodes();
  if (nodes.length < 2) return null;
  const cur = nodeOf(route);
  const change = (e) => {
    const q = Object.fromEntries(route.query.entries());
    delete q.continue; // a position in one node's log means nothing in another's
    q.node = e.target.value;
    navigate(href(page, q));
  };
  return html`<label for="node-select" class="sr-only">Node</label>
    <select id="node-select" data-testid="node-select" value=${cur} onChange=${change} style=${{ width: 'auto' }} title="Whose queries to show">
      ${nodes.map((n, i) => html`<option value=${i === 0 ? '' : n.name} disabled=${i > 0 && n.ready === false}>
        ${i === 0 ? `${n.name} (this node)` : n.name + (n.ready === false ? ' (not ready)' : n.error ? ' (not answering)' : '')}</option>`)}
    </select>`;
}
