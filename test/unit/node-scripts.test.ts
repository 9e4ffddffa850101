// NodeScripts: after NOSCRIPT one EVAL per script and node, which the other
// calls that met it wait for; its failure to reach the server fails them too.
import { expect } from 'chai';
import { NodeScripts } from '../../src/clients/script-shas.js';

const noScript = () => Object.assign(new Error('NOSCRIPT No matching script.'), { reply: true });
const answered = (error: unknown) => (error as { reply?: boolean }).reply === true;

/** A node that has lost its scripts until an EVAL reaches it; `reach` false: EVALs fail unreached. */
function node(reach = true) {
  const sent: string[] = [];
  let loaded = false;
  const send = (asEval: boolean) => {
    sent.push(asEval ? 'EVAL' : 'EVALSHA');
    return new Promise<unknown>((resolve, reject) =>
      setImmediate(() => {
        if (asEval && !reach) reject(new Error('Connection is closed.'));
        else if (asEval) resolve((loaded = true));
        else if (loaded) resolve('ok');
        else reject(noScript());
      }),
    );
  };
  return { sent, send };
}

describe('NodeScripts: one load per script and node', () => {
  it("sends a node's first call of a script as EVAL, the rest as EVALSHA", async () => {
    const scripts = new NodeScripts();
    const { sent, send } = node();
    await Promise.all(Array.from({ length: 5 }, () => scripts.run('release', send, answered)));
    expect(sent).to.deep.equal(['EVAL', 'EVALSHA', 'EVALSHA', 'EVALSHA', 'EVALSHA']);
  });

  it('after NOSCRIPT, one call loads the script and the others wait for it, then go as EVALSHA', async () => {
    const scripts = new NodeScripts();
    await scripts.run('release', node().send, answered); // sent once: the node had it
    const { sent, send } = node(); // then lost it
    const replies = await Promise.all(Array.from({ length: 100 }, () => scripts.run('release', send, answered)));
    expect(sent.filter((c) => c === 'EVAL')).to.have.length(1);
    expect(replies.filter((r) => r === 'ok')).to.have.length(99);
  });

  it('a load that did not reach the node fails the calls that waited for it', async () => {
    const scripts = new NodeScripts();
    await scripts.run('release', node().send, answered);
    const { sent, send } = node(false);
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => scripts.run('release', send, answered)));
    expect(sent.filter((c) => c === 'EVAL')).to.have.length(1);
    expect(outcomes.map((o) => o.status === 'rejected' && (o.reason as Error).message)).to.deep.equal(
      Array.from({ length: 10 }, () => 'Connection is closed.'),
    );
  });
});
