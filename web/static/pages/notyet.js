// Pages of issue #19 that later sessions build; until then they say what
// to use instead, so a link into them is never a dead end.
import { html, useTitle, Msg } from '../ui.js';

const CLI = {
  services: 'svc services list, svc services block|unblock ID --policy NS/NAME',
  admin: 'svc settings get|set, svc token create, svc audit, svc nodes',
};

export function NotYetPage({ title, route }) {
  useTitle(title);
  return html`<h1>${title}</h1>
  <${Msg} kind="info">This page is not in the dashboard yet. Meanwhile the command-line client does it: <code>${CLI[route.page] || 'svc --help'}</code>, and the REST API reference is at <a href="api/v1/docs" data-external>api/v1/docs</a>.</${Msg}>`;
}
