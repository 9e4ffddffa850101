/**
 * Keeps the docs and the code together (`npm run docs:check`, run by CI):
 *
 * 1. Every ```ts block of README.md and docs/*.md type-checks against the
 *    source, as a module of its own; a doc that says
 *    `<!-- docs-check: one program -->` is checked as one module made of all
 *    its blocks, in order (a guide whose blocks build on each other). Names
 *    a block uses without making them (`redis`, `locks`, a `lease`, the
 *    guide's own helpers) are declared in scripts/docs-check/globals.d.ts
 *    (outside the project's own type-check, whose files must not see them),
 *    so a block shows only what the reader needs.
 * 2. Every usage block of the CLI in the docs (a ```text or unlabelled
 *    block that starts with `Usage: redis-rwlock <command>`) says what
 *    `--help` prints, line by line, for the lines it shows.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(fileURLToPath(import.meta.url), '..', '..');
const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f)),
];

interface Block {
  readonly file: string;
  readonly line: number;
  readonly lang: string;
  readonly text: string;
}

function blocks(file: string): Block[] {
  const out: Block[] = [];
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && !/^```\s*$/.test(lines[i]!)) body.push(lines[i]!);
    out.push({ file, line: start + 1, lang: open[1]!, text: body.join('\n') });
  }
  return out;
}

const all = docs.flatMap(blocks);
const problems: string[] = [];

// 1. TypeScript blocks.
const dir = mkdtempSync(join(tmpdir(), 'rwlock-docs-check-'));
try {
  const ts = all.filter((b) => b.lang === 'ts');
  // Each module: its blocks, and for each line of the module the block and line it came from.
  const modules: { text: string[]; origin: { block: Block; line: number }[] }[] = [];
  const programs = new Map<string, (typeof modules)[number]>();
  for (const b of ts) {
    const whole = readFileSync(join(root, b.file), 'utf8').includes('<!-- docs-check: one program -->');
    let module = whole ? programs.get(b.file) : undefined;
    if (!module) {
      module = { text: [], origin: [] };
      modules.push(module);
      if (whole) programs.set(b.file, module);
    }
    for (const [k, line] of b.text.split('\n').entries()) {
      module.text.push(line);
      module.origin.push({ block: b, line: b.line + 1 + k });
    }
  }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir'); // the blocks import ioredis
  const names = modules.map((m, i) => {
    const name = join(dir, `block-${i}.ts`);
    writeFileSync(name, `${m.text.join('\n')}\nexport {};\n`);
    return name;
  });
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        lib: ['es2023', 'es2024.string', 'esnext.disposable'],
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules', '@types')],
        baseUrl: root,
        paths: { 'redis-rwlock': ['src/index.ts'], 'redis-rwlock/testing': ['src/testing/index.ts'] },
      },
      files: [join(root, 'scripts', 'docs-check', 'globals.d.ts'), ...names],
    }),
  );
  try {
    execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', join(dir, 'tsconfig.json')], {
      cwd: root,
      encoding: 'utf8',
      stdio: 'pipe',
    });
  } catch (error) {
    const output = String((error as { stdout?: string }).stdout ?? error);
    for (const line of output.split('\n').filter((l) => /error TS/.test(l))) {
      const match = /block-(\d+)\.ts\((\d+),(\d+)\): (.*)$/.exec(line);
      if (!match) {
        problems.push(line.replace(`${root}/`, ''));
        continue;
      }
      const at = modules[Number(match[1])]!.origin[Number(match[2]) - 1];
      problems.push(at ? `${at.block.file}:${at.line}: ${match[4]}` : line);
    }
  }
  console.log(`docs-check: ${ts.length} TypeScript blocks type-checked, in ${modules.length} modules`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// 2. CLI usage blocks against --help.
const usages = all.filter((b) => (b.lang === 'text' || b.lang === '') && /^Usage: redis-rwlock \w/.test(b.text));
for (const b of usages) {
  const command = /^Usage: redis-rwlock ([\w-]+)/.exec(b.text)![1]!;
  const cli = command === 'demo' ? ['src/demo/main.ts', '--help'] : ['src/cli/index.ts', command, '--help'];
  const help = execFileSync(process.execPath, ['--import', 'tsx', ...cli], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .map((l) => l.trimEnd());
  for (const [k, line] of b.text.split('\n').entries()) {
    if (line.trim() !== '' && !help.includes(line.trimEnd())) {
      problems.push(`${b.file}:${b.line + 1 + k}: not in \`redis-rwlock ${command} --help\`: ${line.trim()}`);
    }
  }
}
console.log(`docs-check: ${usages.length} CLI usage blocks compared with --help`);

if (problems.length > 0) {
  console.error(`docs-check: ${problems.length} problem(s):\n${problems.map((p) => `  ${p}`).join('\n')}`);
  process.exitCode = 1;
}
