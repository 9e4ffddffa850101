/**
 * OpenTelemetry for redis-rwlock: spans from the library's
 * `node:diagnostics_channel` tracing channels, and metrics from
 * `redis-rwlock/opentelemetry`. The span bridge below is the whole of it,
 * to copy into a service (or to replace with your APM agent's own channel
 * subscriber).
 *
 * - Every acquisition becomes a span `rwlock.acquire <mode>`, child of the
 *   span active where it was called, with the resource, owner, outcome,
 *   fence, attempts, wait and whether a release handed it the lock as
 *   attributes, and an error status when it timed out or failed; releases,
 *   extensions and renewal rounds become spans too.
 * - `LockMetrics` counts acquisitions by mode and outcome, their durations
 *   (a histogram with the library's bucket bounds), the leases held, losses
 *   and renewal rounds.
 *
 * Here spans and metrics go to in-memory exporters, and the example checks
 * what they hold; in a service, give the providers your OTLP exporters.
 *
 * Run it:
 *   npx tsx examples/opentelemetry.ts                          # on a throw-away redis-server
 *   npx tsx examples/opentelemetry.ts redis://127.0.0.1:6379   # on your own server
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { pathToFileURL } from 'node:url';
import { type Attributes, context, metrics, type Span, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { type Histogram as HistogramPoint, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
// In your own code: from 'redis-rwlock' and 'redis-rwlock/testing'.
import {
  AcquireTimeoutError,
  type AcquireTraceContext,
  type LeaseTraceContext,
  LockClient,
  type LockRedisClient,
  type LockStats,
  type RenewTraceContext,
  TRACING_CHANNELS,
} from 'redis-rwlock';
import { LockMetrics } from 'redis-rwlock/opentelemetry';
import { startRedisServer } from 'redis-rwlock/testing';

// ---------------------------------------------------------------------------
// The bridge: channels -> spans.

type Traced = AcquireTraceContext | LeaseTraceContext | RenewTraceContext;

/**
 * Turns the library's tracing channels into spans of `tracer`. A span starts
 * at `start` (in the caller's context, so its parent is the caller's active
 * span) and ends at `asyncEnd`, when the context holds the outcome. Returns
 * the function that unsubscribes.
 */
export function traceRwlock(tracer: Tracer): () => void {
  const spans = new WeakMap<object, Span>();
  const unsubscribes: (() => void)[] = [];
  const channel = <C extends Traced>(
    name: string,
    spanName: (c: C) => string,
    attributes: (c: C) => Attributes,
    failed: (c: C) => boolean,
  ) => {
    const handlers = {
      start: (c: C) => void spans.set(c, tracer.startSpan(spanName(c), { attributes: attributes(c) })),
      end: () => undefined,
      asyncStart: () => undefined,
      error: (c: C) => {
        const error = (c as { error?: unknown }).error;
        if (error instanceof Error) spans.get(c)?.recordException(error);
      },
      asyncEnd: (c: C) => {
        const span = spans.get(c);
        if (!span) return;
        span.setAttributes(attributes(c));
        if (failed(c)) {
          const error = (c as { error?: unknown }).error;
          span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : String(error) });
        }
        span.end();
        spans.delete(c);
      },
    };
    const ch = tracingChannel<unknown, C>(name);
    ch.subscribe(handlers);
    unsubscribes.push(() => ch.unsubscribe(handlers));
  };

  channel<AcquireTraceContext>(
    TRACING_CHANNELS.acquire,
    (c) => `rwlock.acquire ${c.mode}`,
    (c) =>
      defined({
        'rwlock.resource': c.resource,
        'rwlock.mode': c.mode,
        'rwlock.waiting': c.waiting,
        'rwlock.owner': c.owner,
        'rwlock.outcome': c.outcome,
        'rwlock.fence': c.fence,
        'rwlock.attempts': c.attempts || undefined,
        'rwlock.handed': c.handed || undefined,
        'rwlock.waited_ms': c.outcome === undefined ? undefined : c.waitedMs,
      }),
    // A busy try is an answer, not a failure.
    (c) => c.outcome !== 'granted' && c.outcome !== 'busy',
  );
  for (const [name, op] of [
    [TRACING_CHANNELS.release, 'release'],
    [TRACING_CHANNELS.extend, 'extend'],
  ] as const) {
    channel<LeaseTraceContext>(
      name,
      (c) => `rwlock.${op} ${c.mode}`,
      (c) =>
        defined({
          'rwlock.resource': c.resource,
          'rwlock.mode': c.mode,
          'rwlock.owner': c.owner,
          'rwlock.fence': c.fence,
          'rwlock.held_ms': c.heldMs,
          'rwlock.outcome': c.outcome,
        }),
      (c) => c.outcome === 'failed' || c.outcome === 'not-held',
    );
  }
  channel<RenewTraceContext>(
    TRACING_CHANNELS.renew,
    () => 'rwlock.renew',
    (c) => ({ 'rwlock.holdings': c.holdings, 'rwlock.renewed': c.renewed, 'rwlock.lost': c.lost, 'rwlock.unreached': c.unreached }),
    (c) => c.error !== undefined || c.lost > 0,
  );
  return () => unsubscribes.forEach((u) => u());
}

function defined(attributes: Record<string, string | number | boolean | undefined>): Attributes {
  return Object.fromEntries(Object.entries(attributes).filter(([, v]) => v !== undefined)) as Attributes;
}

/** A reader that collects when asked (a service would use PeriodicExportingMetricReader and an exporter). */
class PullReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

// ---------------------------------------------------------------------------
// The example: two services move money between accounts, and one of them
// gives up on a busy account.

/** What the exporters held at the end, for the checks below and the test that runs this example. */
export interface OpenTelemetryOutcome {
  readonly spans: readonly ReadableSpan[];
  /** Per metric name, the sum over the services of its last value (histograms: their count). */
  readonly metrics: Readonly<Record<string, number>>;
  /** The services' stats() at the end. */
  readonly stats: readonly LockStats[];
}

export async function runOpenTelemetryExample(
  redis: LockRedisClient,
  log: (line: string) => void = console.log,
): Promise<OpenTelemetryOutcome> {
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(tracerProvider);
  const reader = new PullReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(meterProvider);

  const untrace = traceRwlock(trace.getTracer('redis-rwlock'));
  const payments = new LockClient(redis, { recheckMs: 100 });
  const ledger = new LockClient(redis, { leaseMs: 1_500, recheckMs: 100 }); // renews every 500 ms
  // The global MeterProvider's meter; the leases held and losses of both clients.
  const lockMetrics = new LockMetrics().observe(payments).observe(ledger);
  const app = trace.getTracer('example-app');

  try {
    // A transfer under its own span: the acquire spans become its children.
    await app.startActiveSpan('transfer acct:1 -> acct:2', async (span) => {
      await payments.withWrite('acct:{1}', () => payments.withWrite('acct:{2}', () => undefined));
      span.end();
    });
    log('payments: transferred under both write locks');

    // The ledger holds acct:2 while payments waits for it; one impatient try times out.
    const held = await ledger.lock('acct:{2}').acquireWrite();
    const impatient = await payments
      .lock('acct:{2}')
      .acquireWrite({ waitMs: 50 })
      .catch((error: unknown) => error);
    if (!(impatient instanceof AcquireTimeoutError)) throw new Error(`expected a timeout, got ${String(impatient)}`);
    log('payments: gave up on acct:{2} after 50 ms (AcquireTimeoutError)');
    const contended = new Promise<void>((resolve) => payments.once('contended', () => resolve()));
    const patient = payments.lock('acct:{2}').acquireWrite({ waitMs: 5_000 });
    await contended;
    // Held across at least one renewal round, then handed over.
    await new Promise<void>((resolve) => {
      const check = () => (ledger.stats().renewals > 0 ? resolve() : setTimeout(check, 20));
      check();
    });
    await held.release();
    const lease = await patient;
    log(`payments: got acct:{2} after the ledger released it (fence ${lease.fence})`);
    await lease.release();

    const { resourceMetrics } = await reader.collect();
    const sums: Record<string, number> = {};
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        for (const point of metric.dataPoints) {
          const value = typeof point.value === 'number' ? point.value : (point.value as HistogramPoint).count;
          sums[metric.descriptor.name] = (sums[metric.descriptor.name] ?? 0) + value;
        }
      }
    }
    const spans = exporter.getFinishedSpans();
    for (const s of spans) {
      const a = s.attributes;
      const what = [
        a['rwlock.resource'],
        a['rwlock.outcome'],
        a['rwlock.attempts'] && `${a['rwlock.attempts']} attempt(s)`,
        a['rwlock.handed'] && 'handed by the release',
        a['rwlock.renewed'] !== undefined && `${a['rwlock.renewed']} renewed`,
      ];
      log(`span ${s.name.padEnd(26)} ${s.status.code === SpanStatusCode.ERROR ? 'ERROR' : 'ok   '} ${what.filter(Boolean).join(', ')}`);
    }
    log(
      Object.entries(sums)
        .map(([name, value]) => `${name}=${value}`)
        .join(' '),
    );
    return { spans, metrics: sums, stats: [payments.stats(), ledger.stats()] };
  } finally {
    untrace();
    lockMetrics.disable();
    await payments.close();
    await ledger.close();
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
    context.disable();
    trace.disable();
    metrics.disable();
  }
}

/** The checks `npm run examples` relies on: throws if the exporters do not hold what the run did. */
export function checkOpenTelemetryOutcome({ spans, metrics: m, stats }: OpenTelemetryOutcome): void {
  const check = (ok: boolean, what: string) => {
    if (!ok) throw new Error(`opentelemetry example: ${what}`);
  };
  const acquires = spans.filter((s) => s.name.startsWith('rwlock.acquire'));
  const attempts = stats.reduce((n, s) => n + s.acquires + s.timeouts + s.busy + s.aborts + s.failures, 0);
  check(acquires.length === attempts, `${acquires.length} acquire spans for ${attempts} acquisitions`);
  const transfer = spans.find((s) => s.name.startsWith('transfer'));
  const children = acquires.filter((s) => s.parentSpanContext?.spanId === transfer?.spanContext().spanId);
  check(children.length === 2, `the transfer span has ${children.length} acquire children, not 2`);
  const timedOut = acquires.filter((s) => s.attributes['rwlock.outcome'] === 'timeout');
  check(timedOut.length === 1 && timedOut[0]!.status.code === SpanStatusCode.ERROR, 'one timed-out acquire span, with an error status');
  // Granted by a later try, or handed the lock by the release while its first try queued it.
  const waited = acquires.find(
    (s) =>
      s.attributes['rwlock.outcome'] === 'granted' &&
      (Number(s.attributes['rwlock.attempts']) > 1 || s.attributes['rwlock.handed'] === true),
  );
  check(waited !== undefined, 'a granted acquire span that waited');
  const releases = spans.filter((s) => s.name.startsWith('rwlock.release'));
  check(releases.length === stats.reduce((n, s) => n + s.releases, 0), 'one release span per release');
  check(
    spans.some((s) => s.name === 'rwlock.renew' && Number(s.attributes['rwlock.renewed']) >= 1),
    'a renewal round span',
  );
  check(m['rwlock.acquisitions'] === attempts, 'rwlock.acquisitions equals the acquisitions');
  check(m['rwlock.acquire.duration'] === attempts, 'one rwlock.acquire.duration point per acquisition');
  check(m['rwlock.renewal.rounds']! >= 1, 'a renewal round counted');
  check(m['rwlock.leases.held'] === 0, 'no lease held at the end');
}

async function main(): Promise<void> {
  const url = process.argv[2];
  const server = url ? undefined : await startRedisServer();
  const redis = new Redis(url ?? server!.url);
  try {
    checkOpenTelemetryOutcome(await runOpenTelemetryExample(redis));
    console.log('spans and metrics match what the locks did');
  } finally {
    redis.disconnect();
    await server?.stop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
