/**
 * What the library's commands cost the server, by SLOWLOG at 1 ms on every
 * master. SLOWLOG is wall time, so on a shared machine it lists any command
 * the OS took the CPU from, however little it does: a control script that
 * holds the server for a call's budget and does nothing else, run beside the
 * library's calls, measures how often that happens to a command that keeps
 * to the budget.
 */
import type { Redis } from 'ioredis';
import { EXTEND_BUDGET_US } from '../../src/backends/extend-groups.js';

/** The commands the library sends (every change and read of a lock is a script) and the CLI's scan. */
const LIBRARY_COMMANDS = new Set(['evalsha', 'eval', 'scan']);

/**
 * The control: a script that holds the server for the extend calls' budget,
 * and does nothing else. Its clock is the scripts' (lua/includes/clock.lua):
 * `os.clock()` where the server has it, else `TIME` (Redis 7.0, whose `TIME`
 * moves inside a script; on later servers it stands still, and they have
 * `os.clock()`, but for Redis 7.2 and Valkey 7.2, not run here).
 */
export const CONTROL_SCRIPT = `local os = rawget(_G, 'os')
local function us() if os and os.clock then return os.clock() * 1000000 end local t = redis.call('TIME') return t[1] * 1000000 + t[2] end
local start = us() local stop = start + ${EXTEND_BUDGET_US}
repeat until us() >= stop
return 1`;

/** SLOWLOG at 1 ms on every master, emptied. */
export async function watchSlowlog(nodes: readonly Redis[]): Promise<void> {
  for (const node of nodes) {
    await node.config('SET', 'slowlog-log-slower-than', '1000');
    await node.config('SET', 'slowlog-max-len', '4096');
    await node.slowlog('RESET');
  }
}

/**
 * The library's commands (its scripts, and the CLI's SCAN) SLOWLOG lists on
 * every master, as "<µs> µs <command> (<port>)", and how many control calls
 * it lists. (It lists the commands a script runs too, when one stalls: the
 * script is listed with them.)
 */
export async function slowCommands(nodes: readonly Redis[]): Promise<{ library: string[]; control: number }> {
  const library: string[] = [];
  let control = 0;
  for (const node of nodes) {
    const entries = (await node.slowlog('GET', 4096)) as [number, number, number, string[]][];
    for (const [, , usec, args] of entries) {
      const command = String(args[0]).toLowerCase();
      if (command === 'eval' && String(args[1]).startsWith(CONTROL_SCRIPT.slice(0, 60))) control++;
      else if (LIBRARY_COMMANDS.has(command)) library.push(`${usec} µs ${command} (${node.options.port})`);
    }
  }
  return { library, control };
}

export async function restoreSlowlog(nodes: readonly Redis[]): Promise<void> {
  for (const node of nodes) await node.config('SET', 'slowlog-log-slower-than', '10000');
}

/**
 * Runs the control on a connection of its own to every master, one call after
 * another, while `running()` says so, until `stop()`; counts its calls.
 */
export function runControl(nodes: readonly Redis[], running: () => boolean = () => true) {
  const connections = nodes.map((node) => node.duplicate());
  let open = true;
  let calls = 0;
  const loops = connections.map(async (control) => {
    while (open) {
      if (!running()) await new Promise((resolve) => setTimeout(resolve, 1));
      else {
        await control.eval(CONTROL_SCRIPT, 0);
        calls++;
      }
    }
  });
  return {
    /** Control calls made so far. */
    get calls() {
      return calls;
    },
    /** Ends the loops, and closes their connections. */
    async stop(): Promise<void> {
      open = false;
      await Promise.all(loops);
      for (const control of connections) control.disconnect();
    },
  };
}

/**
 * How many of the library's calls SLOWLOG may list without a finding: four
 * times as often as it listed the control's (the library's calls run back to
 * back, the control's one at a time), and `spare` more. The control's rate
 * counts one stall more than it saw: a few hundred control calls often see
 * none where the library's calls, three or four times as many, see several
 * (a command inside a script stalled 1-4 ms on an idle machine, about one
 * call in a hundred). A call that runs past its budget every time is still
 * a finding: most of the calls are listed then.
 */
export function slowAllowed(slow: { control: number }, controlCalls: number, libraryCalls: number, spare: number): number {
  const controlRate = controlCalls > 0 ? (slow.control + 1) / controlCalls : 0;
  return 4 * controlRate * libraryCalls + spare;
}
