/**
 * The server check's control flow over a stub driver, no server: calls made
 * while a client's first check is in flight wait for it; when it goes
 * unanswered (sent before an outage) they check again once, and when it
 * failed for good they fail with it.
 */
import { expect } from 'chai';
import { runScript } from '../../src/backends/scripts.js';
import type { Driver } from '../../src/clients/driver.js';
import { UnsupportedServerError } from '../../src/errors.js';
import { rejection } from '../support/rejection.js';

const NOT_ANSWERED = Object.assign(new Error('timed out'), { name: 'TimeoutError' });

/** A one-server driver whose COMMAND INFO answers are settled by the test, one per check. */
function stubDriver() {
  const checks: { resolve(reply: unknown): void; reject(error: Error): void }[] = [];
  let scripts = 0;
  const driver = {
    cluster: false,
    closed: false,
    keyPrefix: '',
    command: (args: readonly string[]) =>
      args[0] === 'INFO' ? Promise.resolve('cluster_enabled:0\r\n') : new Promise((resolve, reject) => checks.push({ resolve, reject })),
    everyMaster: () => Promise.resolve([]),
    watchNodes: () => undefined,
    script: () => Promise.resolve(`ran ${++scripts}`),
    isReplyError: (error: unknown) => error instanceof Error && error.name === 'ReplyError',
    notRunWhileMigrating: () => false,
  } as unknown as Driver;
  return { driver, checks, scripts: () => scripts };
}

const run = (driver: Driver) => runScript(driver, 'fencedGet', ['k', 'f'], [1]);
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('server check', () => {
  it('a call that joined a check that went unanswered checks again, once, and runs', async () => {
    const { driver, checks, scripts } = stubDriver();
    const first = rejection(run(driver)); // starts the check, sent before an outage
    await settled();
    const later = run(driver); // made while that check is in flight
    const latest = run(driver);
    expect(checks).to.have.length(1);
    checks[0]!.reject(NOT_ANSWERED);
    expect(await first).to.equal(NOT_ANSWERED); // the call that sent it fails with it
    await settled();
    expect(checks, 'one new check for both joiners').to.have.length(2);
    checks[1]!.resolve([[], [], []]);
    expect(await Promise.all([later, latest])).to.deep.equal(['ran 1', 'ran 2']);
    expect(scripts()).to.equal(2);
  });

  it('a joiner whose new check goes unanswered too fails with it, not checking a third time', async () => {
    const { driver, checks } = stubDriver();
    const first = rejection(run(driver));
    await settled();
    const later = rejection(run(driver));
    checks[0]!.reject(NOT_ANSWERED);
    await first;
    await settled();
    checks[1]!.reject(NOT_ANSWERED);
    expect(await later).to.equal(NOT_ANSWERED);
    expect(checks).to.have.length(2);
  });

  it('a joiner of a check that failed for good fails with it, checking nothing again', async () => {
    const { driver, checks, scripts } = stubDriver();
    const first = rejection(run(driver));
    await settled();
    const later = rejection(run(driver));
    checks[0]!.resolve([null, [], []]); // no SPUBLISH
    expect(await first).to.be.instanceOf(UnsupportedServerError);
    expect(await later).to.be.instanceOf(UnsupportedServerError);
    expect(await rejection(run(driver))).to.be.instanceOf(UnsupportedServerError);
    expect(checks).to.have.length(1);
    expect(scripts()).to.equal(0);
  });
});
