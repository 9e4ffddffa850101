import { createInterface } from 'node:readline/promises';
import { type CliIO, UsageError } from './command.js';

/** The process's terminal. */
export const processIO: CliIO = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  get interactive() {
    return Boolean(process.stdin.isTTY && process.stdout.isTTY);
  },
  async ask(question) {
    const rl = createInterface({ input: process.stdin, output: process.stdout });
    try {
      return await rl.question(question);
    } finally {
      rl.close();
    }
  },
  askSecret(question) {
    // Raw mode: the terminal echoes nothing; the line ends at Enter, Ctrl-C gives up.
    process.stdout.write(question);
    process.stdin.setRawMode(true);
    process.stdin.resume();
    return new Promise<string>((resolve, reject) => {
      let secret = '';
      const onData = (data: Buffer) => {
        for (const char of data.toString('utf8')) {
          if (char === '\r' || char === '\n' || char === '\u0003') {
            process.stdin.off('data', onData);
            process.stdin.setRawMode(false);
            process.stdin.pause();
            process.stdout.write('\n');
            if (char === '\u0003') reject(new UsageError('no password given'));
            else resolve(secret);
            return;
          }
          secret = char === '\u007f' ? secret.slice(0, -1) : secret + char;
        }
      };
      process.stdin.on('data', onData);
    });
  },
  get screen() {
    return process.stdout.isTTY ? { columns: process.stdout.columns || 80, rows: process.stdout.rows || 24 } : undefined;
  },
  interrupts() {
    const controller = new AbortController();
    const stop = () => controller.abort();
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    // On a terminal, keys come one by one (raw mode): q quits, and so does Ctrl-C (raw mode sends no SIGINT).
    const keys = process.stdin.isTTY && process.stdout.isTTY;
    const onKey = (data: Buffer) => {
      const key = data.toString();
      if (key === 'q' || key === 'Q' || key === '\u0003') stop();
    };
    if (keys) {
      process.stdin.setRawMode(true);
      process.stdin.on('data', onKey);
      process.stdin.resume();
    }
    return {
      signal: controller.signal,
      dispose() {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        if (keys) {
          process.stdin.off('data', onKey);
          process.stdin.setRawMode(false);
          process.stdin.pause();
        }
      },
    };
  },
};
