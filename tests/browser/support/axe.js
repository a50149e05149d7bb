// The accessibility scan every panel screen goes through: axe-core (pinned in package.json),
// its `axe.min.js` evaluated in the page from node_modules (no network, and no inline script:
// the page's CSP stays as strict as it is for users), run with the WCAG 2.0/2.1 A and AA rules
// plus best practices. A screen passes with no serious or critical violation; anything
// found is printed, one line per element, so a failing test says what to fix.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'];
const BLOCKING = new Set(['serious', 'critical']);

/** Runs axe on the page as it is now; resolves to every violation (any impact). */
export async function axeViolations(page) {
  const loaded = await page.evaluate(() => typeof window.axe === 'object');
  // `evaluate` runs the source through the DevTools protocol, which the CSP does not govern.
  if (!loaded) await page.evaluate(AXE_SOURCE);
  return page.evaluate(
    (tags) => window.axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] })
      .then((r) => r.violations.map((v) => ({
        id: v.id,
        impact: v.impact,
        help: v.help,
        nodes: v.nodes.map((n) => ({ target: n.target.join(' '), summary: n.failureSummary })),
      }))),
    AXE_TAGS,
  );
}

/** One line per offending element: `[impact] rule: help — target — why`. */
export function describeViolations(violations) {
  return violations.flatMap((v) => v.nodes.map((n) =>
    `[${v.impact}] ${v.id}: ${v.help} \u2014 ${n.target} \u2014 ${(n.summary || '').replace(/\s+/g, ' ')}`));
}

/**
 * Asserts that the screen `name` has no serious or critical violation; prints every
 * violation found (minor and moderate ones too, as notes) either way.
 */
export async function assertAccessible(page, name) {
  const violations = await axeViolations(page);
  const blocking = violations.filter((v) => BLOCKING.has(v.impact));
  const notes = violations.filter((v) => !BLOCKING.has(v.impact));
  if (notes.length) console.log(`axe notes on ${name}:\n  ${describeViolations(notes).join('\n  ')}`);
  assert.deepEqual(describeViolations(blocking), [], `serious or critical axe violations on the ${name} screen`);
  return violations;
}
