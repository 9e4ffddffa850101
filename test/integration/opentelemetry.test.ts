/**
 * examples/opentelemetry.ts on both topologies: the spans it makes from the
 * tracing channels and the metrics of redis-rwlock/opentelemetry match
 * what the locks did.
 */
import { expect } from 'chai';
import { checkOpenTelemetryOutcome, runOpenTelemetryExample } from '../../examples/opentelemetry.js';
import { ALL_CLIENTS, forEachTopology } from '../setup/topologies.js';

forEachTopology('OpenTelemetry example', { clients: ALL_CLIENTS }, (ctx) => {
  it("examples/opentelemetry.ts: one span per acquisition and release, children of the caller's span; metrics that count what the locks did", async () => {
    const lines: string[] = [];
    const outcome = await runOpenTelemetryExample(await ctx.lockRedis(), (line) => lines.push(line));
    expect(() => checkOpenTelemetryOutcome(outcome), lines.join('\n')).to.not.throw();
    const timedOut = outcome.spans.find((s) => s.attributes['rwlock.outcome'] === 'timeout');
    expect(timedOut?.attributes).to.include({ 'rwlock.resource': 'acct:{2}', 'rwlock.mode': 'write' });
    expect(timedOut?.events.some((e) => e.name === 'exception')).to.equal(true);
    expect(outcome.metrics['rwlock.acquisitions']).to.equal(5);
  });
});
